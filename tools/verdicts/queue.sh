#!/usr/bin/env bash
# The verdicts study on the GPU machine, as much of it as one device call holds: each pair of PAIRS in
# sessions 1, 2, 3 (in that order), one pytest session per case with the default method and no other
# options, resumed where the last call stopped. A case starts only while BUDGET_S leaves room for it.
# The fit profiles are measured once, by the first case that needs them, and every session's results
# folder starts with them (.carry/verdicts/_fit): the product reuses a results folder's profiles.
# Carry in: .carry/verdicts (what the last call left); out: $OUT/verdicts.tgz, $OUT/peek.txt.
source tools/device/setup.sh
END=$(( $(date +%s) + ${BUDGET_S:-540} ))
PAIRS=${PAIRS:-"g01 g06 g07 g09 g10 g12"}
WORK=/tmp/verdicts
rm -rf $WORK; mkdir -p $WORK/_fit
[ -d .carry/verdicts ] && cp -r .carry/verdicts/. $WORK/
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,power.limit --format=csv,noheader >> $WORK/gpus.txt
for session in 1 2 3; do
  dir=$WORK/session-$session
  mkdir -p $dir/_fit && cp -r --update=none $WORK/_fit/. $dir/_fit/
  for group in $PAIRS; do
    if grep -qs '"complete": true' $dir/$group-*/result.json; then continue; fi
    need=$([ $session = 1 ] && echo 140 || echo 100)  # the first session measures the fit profiles it lacks
    if [ $(( $(date +%s) + need )) -gt $END ]; then break 2; fi
    start=$(date +%s)
    echo "$(date +%T) session $session $group: start"
    timeout -s TERM -k 20 $(( END - start )) python3 -m pytest benchmarks -k "$group" --gpu-pairs-out $dir \
      --benchmark-json $dir/bench-$group.json -p no:cacheprovider -q > $dir/pytest-$group.txt 2>&1
    echo "{\"session\": $session, \"group\": \"$group\", \"wall_s\": $(( $(date +%s) - start ))}" >> $WORK/walls.jsonl
    cp -r --update=none $dir/_fit/. $WORK/_fit/
    python3 -m tools.verdicts.peek $dir | grep -E "^case $group|^fit" | cut -c1-400
    tar czf $OUT/verdicts.tgz -C $WORK .
  done
done
for session in 1 2 3; do [ -d $WORK/session-$session ] && python3 -m tools.verdicts.peek $WORK/session-$session; done > $OUT/peek.txt
tar czf $OUT/verdicts.tgz -C $WORK .
