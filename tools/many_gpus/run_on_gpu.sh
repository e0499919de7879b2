# The two-GPU check, on a machine with two GPUs (the nvidia-h200-x2 kind): a selection costing at
# least 10 minutes on one GPU, run on one GPU and then on two (one pytest-xdist worker per GPU),
# with the planner's prediction beside it. One GPU alone takes longer than one device command may
# run, so the runs go on in the background on the warm machine and later calls look in on them:
#   bash tools/many_gpus/run_on_gpu.sh start ["-k expression"] [SCALE]   plan, then both runs, detached
#   bash tools/many_gpus/run_on_gpu.sh run ["-k expression"] [SCALE]     the same, in the foreground
#   bash tools/many_gpus/run_on_gpu.sh status                             what has finished so far
#   bash tools/many_gpus/run_on_gpu.sh collect                            copy everything to $OUT/many_gpus
# RUNS=one (or RUNS=two) makes only one of the runs, e.g. the one-GPU run on a one-chip machine.
# METHOD (default interleaved, so every figure has an interval) and MAX_CASE_S (default 110) pass through.
# The defaults are those of reports/reference/many_gpus/.
# then, here: python -m tools.many_gpus.collate reports/reference/many_gpus (after copying the files there).
source tools/device/setup.sh
WORK=/tmp/many_gpus
MODE=${1:-status}
case "$MODE" in
  start)
    SELECT=${2:-"g01 or g02 or g03 or g05 or g06 or g07 or g10 or s01"}; SCALE=${3:-1.0}
    rm -rf "$WORK"; mkdir -p "$WORK"
    printf '%s\n' "$SELECT" > "$WORK/selection.txt"; printf '%s\n' "$SCALE" > "$WORK/scale.txt"
    printf '%s\n' "${RUNS:-one two}" > "$WORK/runs.txt"
    setsid nohup bash tools/many_gpus/run_on_gpu.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!); look in with: bash tools/many_gpus/run_on_gpu.sh status" ;;
  run)
    if [ ! -f "$WORK/selection.txt" ]; then
      mkdir -p "$WORK"; printf '%s\n' "${2:-g01 or g02 or g03 or g05 or g06 or g07 or g10 or s01}" > "$WORK/selection.txt"
      printf '%s\n' "${3:-1.0}" > "$WORK/scale.txt"; printf '%s\n' "${RUNS:-one two}" > "$WORK/runs.txt"
    fi
    SELECT=$(cat "$WORK/selection.txt"); SCALE=$(cat "$WORK/scale.txt"); RUNS=$(cat "$WORK/runs.txt")
    SETTINGS=(settings/parallel_feasibility_test.json settings/slice_pairs.json)
    COMMON=(--gpu-pairs-settings "${SETTINGS[0]}" --gpu-pairs-settings "${SETTINGS[1]}" -k "$SELECT"
            --gpu-pairs-device cuda --gpu-pairs-scale "$SCALE" --gpu-pairs-method "${METHOD:-interleaved}"
            --gpu-pairs-max-case-s "${MAX_CASE_S:-110}" -p no:cacheprovider)
    nvidia-smi -L > "$WORK/gpus.txt"
    PLAN=(plan "${SETTINGS[@]}" -k "$SELECT" --scale "$SCALE" --method "${METHOD:-interleaved}"
          --max-case-s "${MAX_CASE_S:-110}" --gpus 1,2)
    gpu-pairs "${PLAN[@]}" --json > "$WORK/plan.json" 2> "$WORK/plan.err"
    gpu-pairs "${PLAN[@]}" > "$WORK/plan.txt" 2>> "$WORK/plan.err"
    for run in $RUNS; do
      workers=(); [ "$run" = two ] && workers=(-n 2)
      start=$(date +%s.%N)
      python3 -m pytest benchmarks "${COMMON[@]}" "${workers[@]}" --gpu-pairs-out "$WORK/$run" \
        --benchmark-json "$WORK/$run.json" > "$WORK/$run.log" 2>&1
      code=$?; end=$(date +%s.%N)
      printf '{"run": "%s", "exit": %d, "wall_s": %s}\n' "$run" "$code" "$(python3 -c "print($end - $start)")" > "$WORK/wall-$run.json"
    done
    echo done > "$WORK/done" ;;
  status)
    ls "$WORK" 2>/dev/null; cat "$WORK"/wall-*.json 2>/dev/null; [ -f "$WORK/done" ] && echo "all done"
    tail -3 "$WORK"/one.log "$WORK"/two.log 2>/dev/null ;;
  collect)
    mkdir -p "$OUT/many_gpus"
    cp "$WORK"/*.json "$WORK"/*.txt "$WORK"/*.log "$OUT/many_gpus/" 2>/dev/null
    for run in one two; do  # case folders' names hold '+': records travel in a tarball, samples stay
      [ -d "$WORK/$run" ] && tar -czf "$OUT/many_gpus/$run-results.tgz" --exclude='*.csv' --exclude='*.log' -C "$WORK" "$run"
    done
    echo "collected into $OUT/many_gpus" ;;
  *) echo "usage: run_on_gpu.sh start|run|status|collect" ; exit 2 ;;
esac
