set -u
source tools/device/setup.sh >/dev/null 2>&1
S=.carry/exp/drift.json
mkdir -p /tmp/A/caseA/_fit /tmp/B
cp .carry/planner_validation_host/fit-profiles/*.json /tmp/A/caseA/_fit/
( CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 python3 -m pytest_gpu_pairs.cli profile $S --device cuda --warmup 40 --out /tmp/B > /tmp/B/profile.txt 2>&1 ) &
( CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python3 -m pytest_gpu_pairs.cli profile $S --device cuda --out /tmp/A > /tmp/A/profile.txt 2>&1
  taskset -c 0-15 python3 -m pytest benchmarks -p no:cacheprovider -q -rA --gpu-pairs-settings $S --gpu-pairs-device cuda --gpu-pairs-gpus=0 --gpu-pairs-out /tmp/A/caseA > /tmp/A/case.txt 2>&1 ) &
wait
nvidia-smi --query-gpu=index,uuid --format=csv,noheader > /tmp/A/gpu.txt
tar -czf $OUT/drift.tgz --exclude='*process_samples.csv' --exclude='*.progress.jsonl' -C /tmp A B
tail -3 /tmp/A/case.txt; cat /tmp/A/profile.txt /tmp/B/profile.txt | grep -A6 "^workload"
