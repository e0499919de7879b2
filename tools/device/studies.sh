#!/usr/bin/env bash
# One device session's studies in sequence, in the background of one GPU machine (a machine is
# held at most 30 minutes, one command at most 10). STEPS names them, in order:
#   feasibility  the 10 GB feasibility groups not yet measured (resumes from .carry/feasibility_10g)
#   probe        the idle probe of pairs that read an efficiency above 2
#   phase2       the groups that read above 2, again with 2 s phases instead of 0.5 s
#   estimates    a third-party script profiled once, its case estimated, then measured
#   mps          the feasibility groups with the RTX 3080's compute emulated by MPS (52 % of the SMs)
#   hp_pilot     the hyperparameter pilot (resumes from .carry/hp_pilot)
#   STEPS="estimates phase2 mps" bash tools/device/studies.sh start     # then: status, collect
WORK=/tmp/studies
STEPS=${STEPS:-feasibility probe hp_pilot}
PROBES=("mnist_ff resnet20" "resnet20 mnist_ff" "mnist_rnn mrt_oast")

carried() {  # $1: the study's folder under /tmp, $2: what was carried in for it
  rm -rf "/tmp/$1"; mkdir -p "/tmp/$1/results"
  [ -d "$2" ] && cp -r "$2"/. "/tmp/$1/results/"
  rm -rf "/tmp/$1/results/_mps"  # an earlier MPS daemon's logs: a copy is no longer private (0700), so MPS would refuse it
  return 0
}

step() {
  case "$1" in
    feasibility) carried feasibility_10g .carry/feasibility_10g; bash tools/feasibility_10g/study.sh run ;;
    probe)
      mkdir -p "$WORK/probe"
      for pair in "${PROBES[@]}"; do
        set -- $pair
        python3 -m tools.feasibility_10g.idle_probe --target "$1" --peer "$2" --out "$WORK/probe/$1-vs-$2.json" >> "$WORK/probe/probe.txt" 2>&1
      done ;;
    phase2)
      python3 -c "import json; d = json.load(open('settings/parallel_feasibility_test.json')); d['defaults']['phase_s'] = 2.0; json.dump(d, open('/tmp/phase2.json', 'w'))"
      carried feasibility_10g_phase2 .carry/feasibility_10g_phase2
      WORK=/tmp/feasibility_10g_phase2 SETTINGS=/tmp/phase2.json SELECT="g01 or g05" bash tools/feasibility_10g/study.sh run ;;
    estimates)
      timeout -s TERM -k 20 600 python3 -m tools.estimates.check -k c01 --dest "$WORK/estimates" \
        --profile tools/default_method/scripts.json -- --gpu-pairs-settings tools/default_method/scripts.json \
        --gpu-pairs-device cuda > "$WORK/estimates.txt" 2>&1 ;;
    mps)
      carried feasibility_10g_mps .carry/feasibility_10g_mps
      WORK=/tmp/feasibility_10g_mps EXTRA="--gpu-pairs-sharing mps --gpu-pairs-mps-threads 52" bash tools/feasibility_10g/study.sh run ;;
    hp_pilot) carried hp_pilot .carry/hp_pilot; SCALE=${SCALE:-0.25} bash tools/hp_pilot/study.sh run ;;
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
    for study in /tmp/feasibility_10g*/ /tmp/hp_pilot/; do
      [ -f "$study/pytest.txt" ] && { echo "$study"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$study/pytest.txt" | tail -4; }
    done
    tail -4 "$WORK/estimates.txt" 2>/dev/null; cat "$WORK/probe/probe.txt" 2>/dev/null ;;
  collect)
    for study in /tmp/feasibility_10g*/; do
      [ -d "$study/results" ] && WORK=${study%/} bash tools/feasibility_10g/study.sh collect
    done
    [ -d /tmp/hp_pilot/results ] && bash tools/hp_pilot/study.sh collect
    cp -r "$WORK"/. "$OUT/" 2>/dev/null; echo "collected" ;;
  *) echo "usage: studies.sh start|status|collect"; exit 2 ;;
esac
