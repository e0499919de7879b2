# Run-to-run noise of the gated metrics on the GPU machine: two identical runs of the slice (g01 and
# s01 at full scale), back to back, the second gated against the first (--gpu-pairs-compare), then
# `gpu-pairs report` and `gpu-pairs compare` on both. The noise is what a --fail threshold must stay
# above. About 5 minutes. RUN_TO_RUN_SELECT (a -k expression, default "g01 or s01") picks other
# groups of settings/parallel_feasibility_test.json; every group at full scale outlasts one command.
# Its results are not committed yet: reports/reference/measurement/ has no run_to_run/ folder.
# Usage, from the repository root: bash tools/measurement/run_to_run_on_gpu.sh
# Leaves in $OUT: a.json, b.json (benchmark JSON), pytest-a.log, pytest-b.log, compare.txt, results.tgz.
# Then, on your machine: bash tools/measurement/collect_run_to_run.sh FETCHED_DIR
source tools/device/setup.sh
SETTINGS="--gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings settings/slice_pairs.json"
SELECT=${RUN_TO_RUN_SELECT:-g01 or s01}
LIMITS="gpu_energy_j:5%,gpu_energy_above_idle_j:5%,fg_gpu_energy_j:5%,peak_vram_mb:3%,concurrency_efficiency:5%,fg_slowdown:5%"
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
python3 -m pytest benchmarks --gpu-pairs-device cuda --gpu-pairs-out /tmp/results/a $SETTINGS -k "$SELECT" \
  --benchmark-json $OUT/a.json -rs -p no:cacheprovider > $OUT/pytest-a.log 2>&1
echo "run a: exit $?"
# run b is gated against run a inside pytest (--gpu-pairs-compare); exit 1 here means the noise
# between two identical runs exceeded a limit, which is a finding, not a crash
python3 -m pytest benchmarks --gpu-pairs-device cuda --gpu-pairs-out /tmp/results/b $SETTINGS -k "$SELECT" \
  --benchmark-json $OUT/b.json --gpu-pairs-compare $OUT/a.json --gpu-pairs-compare-fail $LIMITS \
  -rs -p no:cacheprovider > $OUT/pytest-b.log 2>&1
echo "run b (gated against a): exit $?"
python3 -m pytest_gpu_pairs.cli report $OUT/a.json $OUT/b.json -o /tmp/results/report-h100 \
  --title "H100 slice, two identical runs back to back" > /tmp/results/report.log 2>&1
echo "report: exit $?"
cp $OUT/a.json $OUT/b.json /tmp/results/ 2>/dev/null
tar czf $OUT/results.tgz -C /tmp results
python3 -m pytest_gpu_pairs.cli compare $OUT/a.json $OUT/b.json --fail $LIMITS \
  --metrics fg_duration_s,bg_progress_ratio,gpu_power_avg_w > $OUT/compare.txt 2>&1
echo "compare a -> b: exit $?"
cat $OUT/compare.txt
