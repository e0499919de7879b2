# The sharing study's MPS client limits at work on the GPU machine, beside the ballast of
# --gpu-pairs-gpu-memory-mb (~7 min).
# 1. Memory. resnet20 at batch 1792 reserves ~6.2 GB per job (the measurement study's small-card
#    pair). The same pair runs (a) time-sliced on an emulated 10 GB card (ballast), (b) under MPS
#    without limits, (c) under MPS with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT 5120 MB per job (the 10 GB
#    split evenly), (d) the same with 8192 MB per job.
# 2. SMs. m01 (densenet121 + pcb, the sharing reference's epochs and scale) under MPS, 3 rounds
#    without limits and 3 with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 50 for both jobs, in one session.
# m01 and its epochs come from reports/reference/sharing/sharing_settings.json (the calibration the
# committed time-slicing vs MPS results ran with).
# Usage, from the repository root: bash tools/sharing/mps_limits_on_gpu.sh
# $OUT: mps_limits.json, mps_limits.md (printed last), mps_limits_results.tgz; copy the first two
# to reports/reference/sharing/.
source tools/device/setup.sh
export GPU_PAIRS_CUDNN_BENCHMARK=0
R=/tmp/limits
rm -rf $R && mkdir -p $R
PAIRS="python3 -m pytest benchmarks --gpu-pairs-device cuda -p no:cacheprovider -q -rA"
python3 - "$R" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
job = {"model": "resnet20", "hyperparameters": {"epochs": 2, "batch_size": 1792, "seed": 1334}}
defaults = {"vram_budget_mb": 80000, "min_efficiency": 0.0, "restart_delay_s": 1, "timeout_s": 300}
(out / "oom_pair.json").write_text(json.dumps({"name": "mps_memory_limit", "design": "pairs", "defaults": defaults,
                                               "pairs": [{"group": "oom", "foreground": job, "background": job}]}))
m01 = json.loads(Path("reports/reference/sharing/sharing_settings.json").read_text())["pairs"][0]
half = {**m01, "group": "m01t50", "note": "both jobs at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 50",
        "foreground": {**m01["foreground"], "mps": {"active_thread_percentage": 50}},
        "background": {**m01["background"], "mps": {"active_thread_percentage": 50}}}
(out / "threads.json").write_text(json.dumps({"name": "mps_thread_limit", "design": "pairs",
    "defaults": {**defaults, "runs_per_config": 3, "timeout_s": 900, "sharing": ["mps"]}, "pairs": [m01, half]}))
PY
run() { local name=$1; shift; timeout 150 $PAIRS --gpu-pairs-out $R/$name "$@" > $R/$name.log 2>&1; echo "$name: exit $?" | tee -a $R/exits.txt; }
run a_ballast_10240 --gpu-pairs-settings $R/oom_pair.json --gpu-pairs-gpu-memory-mb 10240
run b_mps_unlimited --gpu-pairs-settings $R/oom_pair.json --gpu-pairs-sharing mps
run c_mps_limit_5120 --gpu-pairs-settings $R/oom_pair.json --gpu-pairs-sharing mps --gpu-pairs-mps-mem-limit-mb 5120
run d_mps_limit_8192 --gpu-pairs-settings $R/oom_pair.json --gpu-pairs-sharing mps --gpu-pairs-mps-mem-limit-mb 8192
timeout 330 $PAIRS --gpu-pairs-out $R/e_threads --gpu-pairs-settings $R/threads.json --gpu-pairs-scale 0.0664202 \
  > $R/e_threads.log 2>&1; echo "e_threads: exit $?" | tee -a $R/exits.txt
ps -eo pid,args | grep -i "[m]ps-" | tee $R/leftover-mps.txt
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tee $R/leftover-gpu.txt
python3 tools/sharing/collate_mps_limits.py $R --out $OUT/mps_limits
tar czf $OUT/mps_limits_results.tgz -C /tmp limits
cat $OUT/mps_limits.md
