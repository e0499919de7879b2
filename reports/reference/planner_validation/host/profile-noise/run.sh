# gpu-pairs profile of resnet20 and resnet44 on one GPU: alone; beside four built-ins waiting at a
# start gate (as a case's standby jobs wait); beside a stopped partner (as in a solo phase); alone again
set -u
source tools/device/setup.sh >/dev/null 2>&1
S=.carry/exp2/presence.json; W=/tmp/presence; mkdir -p $W
export CUDA_VISIBLE_DEVICES=0
PGIDS=()
cleanup() { for g in "${PGIDS[@]}"; do kill -KILL -- -$g 2>/dev/null; done; }
trap cleanup EXIT
job() {  # cpus model log [env...]
  local cpus=$1 model=$2 log=$3; shift 3
  setsid env "$@" taskset -c $cpus python3 -m pytest_gpu_pairs.workloads $model --device cuda --epochs 100000 > $log 2>&1 &
  PGIDS+=($!)
}
prof() { taskset -c 0-7 python3 -m pytest_gpu_pairs.cli profile $S --device cuda --out $W/$1 > $W/$1.txt 2>&1; grep -A3 "^workload" $W/$1.txt; }
prof alone1
for i in 1 2 3 4; do m=resnet20; [ $i -gt 2 ] && m=resnet44; job $((7+i)) $m $W/standby$i.log GPU_PAIRS_START_GATE=/tmp/never GPU_PAIRS_STEADY_STATE=1; done
sleep 35; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
prof standby
cleanup; PGIDS=(); sleep 3
job 12-13 resnet32 $W/partner.log GPU_PAIRS_STEADY_STATE=1
sleep 25; kill -STOP -- -${PGIDS[0]}; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
prof stopped_partner
kill -CONT -- -${PGIDS[0]}; cleanup; PGIDS=(); sleep 3
prof alone2
nvidia-smi --query-gpu=uuid --format=csv,noheader > $W/gpu.txt
tar -czf $OUT/presence.tgz -C /tmp presence
pgrep -af pytest_gpu_pairs.workloads || echo "no job left"
