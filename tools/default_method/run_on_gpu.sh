#!/usr/bin/env bash
# One pytest session of the default-method study on the GPU machine: g01 and g10 of the feasibility
# suite and pairs of scripts.json (a real script that ends, as foreground and background), all at
# full scale with the default method (no --gpu-pairs-method option), the product's 180 s cap.
#   SESSION=1 bash tools/default_method/run_on_gpu.sh     # results in $RESULTS (default $OUT)
#   SELECT="g01 or c01" SESSION=1 bash tools/default_method/run_on_gpu.sh   # other cases (pytest -k)
#   HEAVY=1 SESSION=heavy bash tools/default_method/run_on_gpu.sh   # g01 with its background twice as heavy
# With BENCH_STORE set, the session saves its pytest-benchmark run there (--benchmark-save) and,
# when BENCH_COMPARE names an earlier saved run, compares against it with --benchmark-compare-fail=mean:5%.
source tools/device/setup.sh
SESSION=${SESSION:-1}
RESULTS=${RESULTS:-$OUT}
SETTINGS=(--gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings tools/default_method/scripts.json)
SELECT=${SELECT:-"g01 or g10 or c03 or c04"}
if [ -n "$HEAVY" ]; then
  SETTINGS=(--gpu-pairs-settings tools/reproducibility/heavy_background.json)
  SELECT="g01"
fi
BENCH=()
if [ -n "$BENCH_STORE" ]; then
  BENCH=(--benchmark-storage "file://$BENCH_STORE" --benchmark-save "session-$SESSION")
  [ -n "$BENCH_COMPARE" ] && BENCH+=(--benchmark-compare "$BENCH_COMPARE" --benchmark-compare-fail mean:5%)
fi
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader \
  > "$RESULTS/session-$SESSION.gpu.txt" 2>&1
python3 -m pytest benchmarks -k "$SELECT" "${SETTINGS[@]}" --gpu-pairs-out "/tmp/session-$SESSION" \
  --benchmark-json "$RESULTS/session-$SESSION.json" "${BENCH[@]}" -p no:cacheprovider -q -rA \
  > "$RESULTS/session-$SESSION.pytest.txt" 2>&1
echo "pytest exit code: $?" >> "$RESULTS/session-$SESSION.pytest.txt"
tail -30 "$RESULTS/session-$SESSION.pytest.txt"
tar -czf "$RESULTS/session-$SESSION.tgz" --exclude='*samples.csv' -C /tmp "session-$SESSION"
