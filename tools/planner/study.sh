#!/usr/bin/env bash
# The planner study on one warm GPU machine, its steps one after another in the background, because
# together they outlast one device command; later calls look in and collect:
#   bash tools/planner/study.sh start      # STEPS (default "profiles minfit pairs pairs-full pairs-8g pairs-long"), in order
#   bash tools/planner/study.sh status
#   bash tools/planner/study.sh collect    # what is there so far, as tools/planner/run_on_gpu.sh collect
# A min-fit state from an earlier machine is resumed: .carry/planner/min_fit.json (git-ignored, named
# in the call's carry) if there is one, else the committed reports/reference/planner/min_fit.json.
# MINFIT_S bounds the min-fit step; MINFIT_MODELS orders it (largest first: they decide what fits on
# a 10 GB card). PRECISION and MAX_CASE_S pass through to the pairs.
WORK=/tmp/planner
case "${1:-status}" in
  start)
    mkdir -p "$WORK"; rm -f "$WORK/done" "$WORK/steps.jsonl"
    for state in .carry/planner/min_fit.json reports/reference/planner/min_fit.json; do
      [ -f "$state" ] && [ ! -f "$WORK/min_fit.json" ] && cp "$state" "$WORK/"
    done
    STEPS=${STEPS:-"profiles minfit pairs pairs-full pairs-8g pairs-long"} setsid nohup bash tools/planner/study.sh run \
      > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    for step in $STEPS; do
      start=$(date +%s)
      LIMIT_S=${LIMIT_S:-3600} bash tools/planner/run_on_gpu.sh "$step" > "$WORK/$step.out" 2>&1
      echo "{\"step\": \"$step\", \"wall_s\": $(( $(date +%s) - start ))}" >> "$WORK/steps.jsonl"
    done
    echo done > "$WORK/done" ;;
  status)
    cat "$WORK/steps.jsonl" 2>/dev/null; [ -f "$WORK/done" ] && echo "all done"
    for f in "$WORK"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -3 "$f"; }; done
    ls "$WORK"/pairs-10g 2>/dev/null | wc -l ;;
  collect) bash tools/planner/run_on_gpu.sh collect ;;
  *) echo "usage: study.sh start|status|collect"; exit 2 ;;
esac
