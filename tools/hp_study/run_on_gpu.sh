# Issue 6: one whole pair of the hyperparameter study on the GPU: pair hp06 (MNIST+ResNet20, B = resnet20
# varied in the foreground, A = mnist as the background load), all 11 runs, from settings/hp_study_quick.json
# (2-epoch defaults) at a reduced scale. Allotment: 4 minutes wall; pytest is stopped at 190 s whatever happens
# (SIGTERM: every job is torn down), and whatever finished is still packed and summarised.
# Out: hp_pair_benchmark.json, pytest.log, hp_results.tgz, hp_study_mnist_resnet20.{json,md}.
# Then, here: python scripts/hp_study_reference.py <files_at>/hp_results.tgz   (writes reports/reference/)
source scripts/device/setup.sh
SCALE=${GPU_PAIRS_HP_SCALE:-0.5}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv,noheader
timeout -s TERM -k 20 190 python3 -m pytest benchmarks --gpu-pairs-device cuda --gpu-pairs-scale "$SCALE" \
  --gpu-pairs-settings settings/hp_study_quick.json --gpu-pairs-out /tmp/hp_results \
  --benchmark-json "$OUT/hp_pair_benchmark.json" -p no:cacheprovider -rs > "$OUT/pytest.log" 2>&1
echo "pytest exit code: $? (124 = stopped at the time limit)"
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -n 3
tar czf "$OUT/hp_results.tgz" -C /tmp hp_results
python3 scripts/hp_study_reference.py /tmp/hp_results --out-dir "$OUT"
