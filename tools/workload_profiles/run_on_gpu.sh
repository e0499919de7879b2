# The workload profiles on the GPU machine: a solo profile of every built-in workload (about 6
# minutes of wall time). Each workload: build, evaluate untrained, 2 s warm-up, 8 s timed training,
# evaluate; NVML sampled from outside at 10 Hz (tools/workload_profiles/profile.py).
# Usage, from the repository root: bash tools/workload_profiles/run_on_gpu.sh
# Everything goes to $OUT: workload_profiles_raw.json, profile.log, workload_profiles.tgz (per-workload
# logs), and the table printed last.
# Then, on your machine: python tools/workload_profiles/collate.py FETCHED/workload_profiles_raw.json
#   (writes reports/reference/workload_profiles/).
source tools/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
timeout 420 python3 tools/workload_profiles/profile.py --out /tmp/workload_profiles --seconds 8 --warmup 2 \
  --eval-scale 0.01 --timeout 50 2>&1 | tee $OUT/profile.log
cp /tmp/workload_profiles/workload_profiles_raw.json $OUT/ 2>/dev/null
tar czf $OUT/workload_profiles.tgz -C /tmp workload_profiles
python3 tools/workload_profiles/collate.py $OUT/workload_profiles_raw.json --print-only
