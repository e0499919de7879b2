# Issue 5: solo profile of every built-in workload on the device (about 6 minutes of wall time).
# Each workload: build, evaluate untrained, 2 s warm-up, 8 s timed training, evaluate; NVML sampled
# from outside at 10 Hz. Everything goes to $OUT (raw JSON, per-workload logs in one .tgz, table).
source scripts/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
timeout 420 python3 scripts/device/profile_workloads.py --out /tmp/issue5 --seconds 8 --warmup 2 \
  --eval-scale 0.01 --timeout 50 2>&1 | tee $OUT/profile.log
cp /tmp/issue5/workload_profiles_raw.json $OUT/ 2>/dev/null
tar czf $OUT/issue5_profiles.tgz -C /tmp issue5
python3 scripts/issue5_reports.py $OUT/workload_profiles_raw.json --print-only
