#!/usr/bin/env bash
# The parallel feasibility test on the predecessor's card: all 12 groups of
# settings/parallel_feasibility_test.json with the default method on an emulated 10 GB card
# (--gpu-pairs-gpu-memory-mb 10240), in the background of one GPU machine, resumable across
# device sessions: a results folder carried in as $CARRIED (the earlier sessions' case folders)
# is copied in first and --gpu-pairs-resume skips every case it holds complete.
#   CARRIED=.carry/feasibility_10g bash tools/feasibility_10g/study.sh start
#   bash tools/feasibility_10g/study.sh status
#   bash tools/feasibility_10g/study.sh collect   # stops a running case (SIGTERM), then $OUT/feasibility_10g/results.tgz
# EXTRA passes further options (e.g. the MPS compute emulation: --gpu-pairs-sharing mps --gpu-pairs-mps-threads 52),
# WORK names another folder for such a variant, SETTINGS another experiment file, SELECT a -k expression.
WORK=${WORK:-/tmp/feasibility_10g}
NAME=$(basename "$WORK")
SETTINGS=${SETTINGS:-settings/parallel_feasibility_test.json}
case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK/results"
    [ -n "$CARRIED" ] && [ -d "$CARRIED" ] && cp -r "$CARRIED"/. "$WORK/results/"
    setsid nohup bash tools/feasibility_10g/study.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    source tools/device/setup.sh
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
      --format=csv,noheader >> "$WORK/results/gpu.txt" 2>&1
    # shellcheck disable=SC2086
    python3 -m pytest benchmarks --gpu-pairs-settings "$SETTINGS" \
      --gpu-pairs-gpu-memory-mb 10240 --gpu-pairs-out "$WORK/results" --gpu-pairs-resume ${SELECT:+-k "$SELECT"} $EXTRA \
      --benchmark-json "$WORK/results/bench-$(date +%s).json" -p no:cacheprovider -q -rA > "$WORK/pytest.txt" 2>&1
    echo "pytest exit code: $?" >> "$WORK/pytest.txt"
    echo done > "$WORK/done" ;;
  status)
    [ -f "$WORK/done" ] && echo "done"
    ls "$WORK/results" 2>/dev/null | tr '\n' ' '; echo
    grep -E "PASSED|FAILED|ERROR" "$WORK/pytest.txt" 2>/dev/null | tail -14 ;;
  collect)
    if [ ! -f "$WORK/done" ]; then
      if pkill -TERM -f "pytest benchmarks --gpu-pairs-settings $SETTINGS"; then
        for _ in $(seq 60); do [ -f "$WORK/done" ] && break; sleep 1; done
      fi
    fi
    cp "$WORK/pytest.txt" "$WORK/results/pytest-$(date +%s).txt" 2>/dev/null
    mkdir -p "$OUT/$NAME"
    tar -czf "$OUT/$NAME/results.tgz" --exclude='*samples.csv' --exclude='*.progress.jsonl' -C "$WORK" results
    echo "collected into $OUT/$NAME/results.tgz" ;;
  *) echo "usage: study.sh start|status|collect"; exit 2 ;;
esac
