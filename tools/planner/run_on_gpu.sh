# The planner study on the GPU machine, in pieces of under 600 s each; every piece resumes where a cut
# run stopped (its state lives under /tmp/planner on the warm machine), and `collect` copies all to $OUT.
#   bash tools/planner/run_on_gpu.sh profiles [MODELS]   extended solo profiles (memory-bandwidth and GPM
#                                                        utilisation, host share), about 15 s per workload
#   bash tools/planner/run_on_gpu.sh minfit              min-fit bisection of the GPU built-ins and one pair,
#                                                        about 540 s per call: call it again until it says done
#   bash tools/planner/run_on_gpu.sh pairs [-k EXPR]     the 28 pairs of tools/planner/pairs.json, interleaved,
#                                                        on an emulated 10 GB card (fit and efficiency at once)
#   bash tools/planner/run_on_gpu.sh pairs-full          the pairs that ran out of memory at 10 GB, on the full card
#   bash tools/planner/run_on_gpu.sh pairs-8g [-k EXPR]  pcb's pairs on an emulated 8 GB card, where the planner
#                                                        says four of the six do not fit (fit evidence only)
#   bash tools/planner/run_on_gpu.sh pairs-long [-k EXPR] the six pairs with the widest intervals at 32 s, again
#                                                        with a 75 s cap (LONG_CASE_S), beside the same predictions
#   bash tools/planner/run_on_gpu.sh collect             profiles (min fits merged), records -> $OUT/planner
# then, here: tar -xzf FETCHED/planner/records.tgz -C FETCHED/planner
#             python -m tools.planner.validate FETCHED/planner (writes reports/reference/planner/).
# LIMIT_S (default 590) bounds each piece; tools/planner/study.sh runs them all in the background.
# PRECISION (default 0.05) and MAX_CASE_S (default 45, warm-up included) keep each pair short: warm-up
# takes 15-54 s on an H100 (densenet121's cuDNN autotuning the longest), a round about 7 s.
source tools/device/setup.sh
WORK=/tmp/planner
mkdir -p "$WORK"
MODE=${1:-collect}
PAIRS=(--gpu-pairs-settings tools/planner/pairs.json --gpu-pairs-method interleaved
       --gpu-pairs-precision "${PRECISION:-0.05}" --gpu-pairs-max-case-s "${MAX_CASE_S:-45}" -p no:cacheprovider -q)
case "$MODE" in
  profiles)
    MODELS=${2:-$(python3 -c "from pytest_gpu_pairs.catalog import BUILTINS; print(','.join(m for m, b in BUILTINS.items() if b.implemented))")}
    timeout ${LIMIT_S:-570} python3 tools/workload_profiles/profile.py --out "$WORK/profiles" --seconds 4 --warmup 2 \
      --eval-scale 0.01 --timeout 60 --models "$MODELS" --resume 2>&1 | tail -20 ;;
  minfit)
    timeout ${LIMIT_S:-590} python3 -m tools.planner.min_fit --state "$WORK/min_fit.json" \
      --profiles reports/reference/workload_profiles/workload_profiles.json --budget-s "${MINFIT_S:-520}" \
      ${MINFIT_MODELS:+--models "$MINFIT_MODELS"}
    code=$?; [ $code -eq 0 ] && echo "min fit: done" || echo "min fit: not done (exit $code), call again" ;;
  pairs)
    timeout ${LIMIT_S:-590} python3 -m pytest benchmarks "${PAIRS[@]}" ${2:+-k "$2"} --gpu-pairs-gpu-memory-mb 10240 \
      --gpu-pairs-out "$WORK/pairs-10g" --gpu-pairs-resume 2>&1 | tail -30 ;;
  pairs-full)
    OOM=$(python3 -c "
import json, pathlib
ids = [p.parent.name for p in pathlib.Path('$WORK/pairs-10g').glob('*/result.json') if json.loads(p.read_text()).get('oom')]
print(' or '.join(i.split('-')[0] for i in ids))")
    [ -z "$OOM" ] && { echo "no pair ran out of memory at 10 GB"; exit 0; }
    timeout ${LIMIT_S:-590} python3 -m pytest benchmarks "${PAIRS[@]}" -k "$OOM" --gpu-pairs-out "$WORK/pairs-full" \
      --gpu-pairs-resume 2>&1 | tail -30 ;;
  pairs-8g)
    timeout ${LIMIT_S:-590} python3 -m pytest benchmarks "${PAIRS[@]}" -k "${2:-p19 or p20 or p25 or p26 or p27 or p28}" \
      --gpu-pairs-gpu-memory-mb 8192 --gpu-pairs-out "$WORK/pairs-8g" --gpu-pairs-resume 2>&1 | tail -30 ;;
  pairs-long)
    timeout ${LIMIT_S:-590} python3 -m pytest benchmarks "${PAIRS[@]}" --gpu-pairs-max-case-s "${LONG_CASE_S:-75}" \
      -k "${2:-p12 or p13 or p16 or p17 or p19 or p24}" --gpu-pairs-gpu-memory-mb 10240 \
      --gpu-pairs-out "$WORK/pairs-10g-long" --gpu-pairs-resume 2>&1 | tail -30 ;;
  collect)
    mkdir -p "$OUT/planner"
    cp "$WORK/profiles/workload_profiles_raw.json" "$OUT/planner/" 2>/dev/null
    [ -f "$WORK/min_fit.json" ] && cp "$WORK/min_fit.json" "$OUT/planner/" && \
      python3 -m tools.planner.min_fit --state "$WORK/min_fit.json" --profiles x --merge "$OUT/planner/workload_profiles_raw.json"
    # case folders' names hold '+', which the device does not bring back: the records travel in a tarball
    (cd "$WORK" && find pairs-10g pairs-full pairs-8g pairs-10g-long \( -name result.json -o -name session.json \) -not -path "*/round-*" \
      2>/dev/null | tar -czf "$OUT/planner/records.tgz" -T -)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/planner/gpu.txt"
    echo "collected into $OUT/planner" ;;
  *) echo "usage: run_on_gpu.sh profiles|minfit|pairs|pairs-full|pairs-8g|pairs-long|collect"; exit 2 ;;
esac
