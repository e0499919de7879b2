#!/usr/bin/env bash
# On the GPU machine: g01 with half-second phases (the settings' default) and with quarter-second
# phases, in the order A B B A, each run to the same time cap (a precision target no case reaches),
# so the two phase lengths are compared by the interval each reaches in the same device time. A
# host-bound job's pace wanders about as much over a tenth of a second as over seconds (flicker),
# so shorter phases, more rounds, may buy a narrower interval; the probe says whether they do.
# The same script measures how much whole runs differ from one another: many short runs of one
# phase length, each an independently started pair.
#   bash tools/default_method/phase_probe.sh start     # in the background; then status, collect
#   TAG=starts PHASES="0.5 0.5 0.5 0.5 0.5 0.5 0.5 0.5" CAP_S=60 bash tools/default_method/phase_probe.sh start
TAG=${TAG:-phase_probe}
WORK=/tmp/$TAG
CAP_S=${CAP_S:-120}
PHASES=${PHASES:-"0.5 0.25 0.25 0.5"}
case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    setsid nohup bash tools/default_method/phase_probe.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    source tools/device/setup.sh
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
      --format=csv,noheader > "$WORK/gpu.txt" 2>&1
    for phase in $(echo $PHASES | tr ' ' '\n' | sort -u); do
      python3 - "$phase" "$WORK/settings-$phase.json" <<'PY'
import json, sys
settings = json.load(open("settings/parallel_feasibility_test.json"))
settings["name"] = f"phase_probe_{sys.argv[1]}"
settings["defaults"]["phase_s"] = float(sys.argv[1])
json.dump(settings, open(sys.argv[2], "w"), indent=2)
PY
    done
    n=0
    for phase in $PHASES; do
      n=$((n + 1)); run="run$n-phase$phase"
      python3 -m pytest benchmarks -k g01 --gpu-pairs-settings "$WORK/settings-$phase.json" \
        --gpu-pairs-precision 0.001 --gpu-pairs-max-rounds 100000 --gpu-pairs-max-case-s "$CAP_S" \
        --gpu-pairs-out "$WORK/$run" --benchmark-json "$WORK/$run.json" -p no:cacheprovider -q \
        > "$WORK/$run.pytest.txt" 2>&1
      echo "pytest exit code: $?" >> "$WORK/$run.pytest.txt"
    done
    echo done > "$WORK/done" ;;
  status)
    ls "$WORK"; [ -f "$WORK/done" ] && echo "all done"; tail -3 "$WORK"/run*.pytest.txt 2>/dev/null ;;
  collect)
    mkdir -p "$OUT/$TAG"
    (cd "$WORK" && tar -czf "$OUT/$TAG/probe.tgz" --exclude='*samples.csv' --exclude=driver.log ./*)
    echo "collected into $OUT/$TAG/probe.tgz" ;;
  *) echo "usage: phase_probe.sh start|status|collect"; exit 2 ;;
esac
