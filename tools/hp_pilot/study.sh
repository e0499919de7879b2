#!/usr/bin/env bash
# The hyperparameter pilot (settings/hp_pilot.json: three pairs, 11 runs each, every run to
# completion and repeated three times) in the background of one GPU machine, resumable across
# device sessions: a results folder carried in as $CARRIED is copied in first and
# --gpu-pairs-resume skips every case it holds complete. With two GPUs, WORKERS=2 runs one
# pytest-xdist worker per GPU; SELECT is a -k expression naming the cases to run.
#   CARRIED=.carry/hp_pilot SCALE=1.0 bash tools/hp_pilot/study.sh start
#   bash tools/hp_pilot/study.sh status
#   bash tools/hp_pilot/study.sh collect    # stops a running case (SIGTERM), then $OUT/hp_pilot/results.tgz
# Then, here: python -m tools.hp_pilot.collate FOLDER... --out reports/reference/hp_pilot
#             gpu-pairs report FOLDER... -o reports/reference/hp_pilot/report
WORK=/tmp/hp_pilot
case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK/results"
    [ -n "$CARRIED" ] && [ -d "$CARRIED" ] && cp -r "$CARRIED"/. "$WORK/results/"
    SCALE=${SCALE:-1.0} WORKERS=${WORKERS:-} SELECT=${SELECT:-} setsid nohup bash tools/hp_pilot/study.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    source tools/device/setup.sh
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
      --format=csv,noheader >> "$WORK/results/gpu.txt" 2>&1
    xdist=(); [ -n "$WORKERS" ] && xdist=(-n "$WORKERS")
    select=(); [ -n "$SELECT" ] && select=(-k "$SELECT")
    python3 -m pytest benchmarks --gpu-pairs-settings settings/hp_pilot.json --gpu-pairs-scale "$SCALE" \
      --gpu-pairs-out "$WORK/results" --gpu-pairs-resume "${xdist[@]}" "${select[@]}" \
      --benchmark-json "$WORK/results/bench-$(date +%s).json" -p no:cacheprovider -q -rA > "$WORK/pytest.txt" 2>&1
    echo "pytest exit code: $?" >> "$WORK/pytest.txt"
    echo done > "$WORK/done" ;;
  status)
    [ -f "$WORK/done" ] && echo "done"
    ls "$WORK/results" 2>/dev/null | wc -l
    grep -E "PASSED|FAILED|ERROR" "$WORK/pytest.txt" 2>/dev/null | tail -8 ;;
  collect)
    if [ ! -f "$WORK/done" ]; then
      if pkill -TERM -f "pytest benchmarks --gpu-pairs-settings settings/hp_pilot.json"; then
        for _ in $(seq 60); do [ -f "$WORK/done" ] && break; sleep 1; done
      fi
    fi
    cp "$WORK/pytest.txt" "$WORK/results/pytest-$(date +%s).txt" 2>/dev/null
    mkdir -p "$OUT/hp_pilot"
    tar -czf "$OUT/hp_pilot/results.tgz" --exclude='*samples.csv' --exclude='*.progress.jsonl' -C "$WORK" results
    echo "collected into $OUT/hp_pilot/results.tgz" ;;
  *) echo "usage: study.sh start|status|collect"; exit 2 ;;
esac
