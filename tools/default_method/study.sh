#!/usr/bin/env bash
# The default-method study on one GPU machine, sessions one after another in the background (together
# they outlast one device command); later calls look in and collect:
#   SESSIONS="1 2 heavy" bash tools/default_method/study.sh start
#   SESSIONS="3" bash tools/default_method/study.sh more   # further sessions beside the ones there
#   bash tools/default_method/study.sh status
#   bash tools/default_method/study.sh collect     # everything to $OUT/default_method/study.tgz
# With IN_SESSION_COMPARE=1 every session saves its pytest-benchmark run into one storage and each
# one after the first compares against the first with --benchmark-compare-fail=mean:5%.
WORK=/tmp/default_method
case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    SESSIONS=${SESSIONS:-"1 2 heavy"} setsid nohup bash tools/default_method/study.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  more)
    rm -f "$WORK/done"
    setsid nohup bash tools/default_method/study.sh run >> "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    first=
    for session in $SESSIONS; do
      heavy=; [ "$session" = heavy ] && heavy=1
      start=$(date +%s)
      store=; [ -n "$IN_SESSION_COMPARE" ] && store=$WORK/benchmarks
      HEAVY=$heavy SESSION=$session RESULTS=$WORK BENCH_STORE=$store BENCH_COMPARE=$first \
        bash tools/default_method/run_on_gpu.sh > "$WORK/session-$session.out" 2>&1
      echo "{\"session\": \"$session\", \"wall_s\": $(( $(date +%s) - start ))}" >> "$WORK/walls.jsonl"
      [ -z "$first" ] && first=0001
    done
    echo done > "$WORK/done" ;;
  status)
    cat "$WORK/walls.jsonl" 2>/dev/null; [ -f "$WORK/done" ] && echo "all done"
    for f in "$WORK"/session-*.out; do [ -f "$f" ] && { echo "== $f"; tail -3 "$f"; }; done ;;
  collect)
    mkdir -p "$OUT/default_method"
    (cd "$WORK" && tar -czf "$OUT/default_method/study.tgz" --exclude=driver.log ./*)
    echo "collected into $OUT/default_method/study.tgz" ;;
  *) echo "usage: study.sh start|status|collect"; exit 2 ;;
esac
