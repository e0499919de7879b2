# The hyperparameter study on the GPU machine: one whole pair, hp06 (MNIST+ResNet20, B = resnet20
# varied in the foreground, A = mnist as the background load), all 11 runs, from
# settings/hp_study_quick.json (2-epoch defaults) at a reduced scale (GPU_PAIRS_HP_SCALE, default 0.5).
# Allotment: 4 minutes wall; pytest is stopped at 190 s whatever happens (SIGTERM: every job is torn
# down), and whatever finished is still packed and summarised.
# Usage, from the repository root: bash tools/hp_study/run_on_gpu.sh
# Out: hp_pair_benchmark.json, pytest.log, hp_results.tgz, hp_study_mnist_resnet20.{json,md}.
# Then, on your machine: python tools/hp_study/collate.py FETCHED/hp_results.tgz
#   (writes reports/reference/hp_study/).
source tools/device/setup.sh
SCALE=${GPU_PAIRS_HP_SCALE:-0.5}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
timeout -s TERM -k 20 190 python3 -m pytest benchmarks --gpu-pairs-device cuda --gpu-pairs-scale "$SCALE" \
  --gpu-pairs-settings settings/hp_study_quick.json --gpu-pairs-out /tmp/hp_results \
  --benchmark-json "$OUT/hp_pair_benchmark.json" -p no:cacheprovider -rs > "$OUT/pytest.log" 2>&1
echo "pytest exit code: $? (124 = stopped at the time limit)"
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -n 3
tar czf "$OUT/hp_results.tgz" -C /tmp hp_results
python3 tools/hp_study/collate.py /tmp/hp_results --out-dir "$OUT"
