# The estimate check on the GPU machine: --gpu-pairs-plan for a selection of the default suite, then
# the selection itself, compared case by case and in total.
# Usage, from the repository root: bash tools/estimates/run_on_gpu.sh ["-k expression"] [TIME_LIMIT_S]
# Out: $OUT/estimates/estimates.json, estimates.md and pytest.log; copy them to reports/reference/estimates/.
source tools/device/setup.sh
SELECT=${1:-densenet}; LIMIT=${2:-560}
timeout -s TERM -k 20 "$LIMIT" python3 -m tools.estimates.check -k "$SELECT" --dest "$OUT/estimates" -- \
  --gpu-pairs-device cuda
echo "exit code: $? (124 = stopped at the time limit)"
