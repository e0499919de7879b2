#!/usr/bin/env bash
# One device session's studies in sequence, in the background of one GPU machine (a machine is
# held at most 30 minutes, one command at most 10). STEPS names them, in order:
#   probe        the idle probe of pairs that read an efficiency above 2
#   STEPS="probe" bash tools/device/studies.sh start     # then: status, collect
# Declared studies (feasibility_10g, hp_pilot, estimates, ...) run through the adapter: bash tools/device/study.sh start NAME
WORK=/tmp/studies
STEPS=${STEPS:-probe}
PROBES=("mnist_ff resnet20" "resnet20 mnist_ff" "mnist_rnn mrt_oast")

step() {
  case "$1" in
    probe)
      mkdir -p "$WORK/probe"
      for pair in "${PROBES[@]}"; do
        set -- $pair
        python3 -m tools.feasibility_10g.idle_probe --target "$1" --peer "$2" --out "$WORK/probe/$1-vs-$2.json" >> "$WORK/probe/probe.txt" 2>&1
      done ;;
  esac
}

case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    STEPS="$STEPS" setsid nohup bash tools/device/studies.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!): $STEPS" ;;
  run)
    source tools/device/setup.sh
    for name in $STEPS; do echo "$(date +%T) $name"; step "$name"; done
    echo "$(date +%T) all done" ;;
  status)
    tail -2 "$WORK/driver.log"
    cat "$WORK/probe/probe.txt" 2>/dev/null ;;
  collect)
    cp -r "$WORK"/. "$OUT/" 2>/dev/null; echo "collected" ;;
  *) echo "usage: studies.sh start|status|collect"; exit 2 ;;
esac
