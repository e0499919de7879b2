#!/usr/bin/env bash
# One device session's studies in sequence, in the background of one GPU machine (a machine is
# held at most 30 minutes, one command at most 10): the feasibility groups not yet measured, the
# idle probe of the pairs that read above 2, then the hyperparameter pilot until collected.
# Each study keeps its own folder and resumes from what is carried in.
#   bash tools/device/studies.sh start       # then: status, collect
WORK=/tmp/studies
PROBES=("mnist_ff resnet20" "resnet20 mnist_ff" "mnist_rnn mrt_oast")
case "${1:-status}" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    setsid nohup bash tools/device/studies.sh run > "$WORK/driver.log" 2>&1 < /dev/null &
    echo "started (driver pid $!)" ;;
  run)
    source tools/device/setup.sh
    mkdir -p /tmp/feasibility_10g/results && cp -r .carry/feasibility_10g/. /tmp/feasibility_10g/results/
    bash tools/feasibility_10g/study.sh run
    mkdir -p "$WORK/probe"
    for pair in "${PROBES[@]}"; do
      set -- $pair
      python3 -m tools.feasibility_10g.idle_probe --target "$1" --peer "$2" --out "$WORK/probe/$1-vs-$2.json" >> "$WORK/probe/probe.txt" 2>&1
    done
    rm -rf /tmp/hp_pilot; mkdir -p /tmp/hp_pilot/results
    [ -d .carry/hp_pilot ] && cp -r .carry/hp_pilot/. /tmp/hp_pilot/results/
    SCALE=${SCALE:-0.25} bash tools/hp_pilot/study.sh run ;;
  status)
    tail -3 /tmp/feasibility_10g/pytest.txt 2>/dev/null; cat "$WORK/probe/probe.txt" 2>/dev/null
    bash tools/hp_pilot/study.sh status ;;
  collect)
    bash tools/feasibility_10g/study.sh collect
    bash tools/hp_pilot/study.sh collect
    mkdir -p "$OUT/probe"; cp -r "$WORK/probe/." "$OUT/probe/" 2>/dev/null; cp "$WORK/driver.log" "$OUT/" ;;
  *) echo "usage: studies.sh start|status|collect"; exit 2 ;;
esac
