#!/usr/bin/env bash
# The whole study on one warm GPU machine, sessions one after another in the background, because
# together they outlast one device command; later calls look in and collect:
#   bash tools/reproducibility/study.sh start      # sessions 1, 2, 3 (pinned), heavy, then 'unpinned'
#   bash tools/reproducibility/study.sh status
#   bash tools/reproducibility/study.sh collect    # everything to $OUT/reproducibility/study.tgz
# SESSIONS overrides the list (default "1 2 3 heavy unpinned"); MAX_CASE_S passes through (default 180).
# 'heavy' is g01 with its background twice as heavy; 'unpinned' is sessions 1-3 with --gpu-pairs-pin-cpus off,
# the same machine's comparison for the CPU pinning.
WORK=/tmp/reproducibility
case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    SESSIONS=${SESSIONS:-"1 2 3 heavy unpinned"} MAX_CASE_S=${MAX_CASE_S:-180} \
      setsid nohup bash tools/reproducibility/study.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    for session in $SESSIONS; do
      heavy=; pin=auto
      [ "$session" = heavy ] && heavy=1
      [ "$session" = unpinned ] && pin=off
      start=$(date +%s)
      HEAVY=$heavy PIN=$pin SESSION=$session RESULTS=$WORK MAX_CASE_S=$MAX_CASE_S \
        bash tools/reproducibility/run_on_gpu.sh > "$WORK/session-$session.out" 2>&1
      echo "{\"session\": \"$session\", \"wall_s\": $(( $(date +%s) - start ))}" >> "$WORK/walls.jsonl"
    done
    echo done > "$WORK/done" ;;
  status)
    cat "$WORK/walls.jsonl" 2>/dev/null; [ -f "$WORK/done" ] && echo "all done"
    for f in "$WORK"/session-*.out; do [ -f "$f" ] && { echo "== $f"; tail -4 "$f"; }; done ;;
  collect)  # one tarball: the device brings back only a few files per call
    mkdir -p "$OUT/reproducibility"
    (cd "$WORK" && tar -czf "$OUT/reproducibility/study.tgz" --exclude=driver.log ./*)
    echo "collected into $OUT/reproducibility/study.tgz" ;;
  *) echo "usage: study.sh start|status|collect"; exit 2 ;;
esac
