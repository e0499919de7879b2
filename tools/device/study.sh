#!/usr/bin/env bash
# The device adapter, for the remote GPU machine of ../.library/device only (offline wheels, an $OUT
# folder, results carried back as archives): a declared study run there in the background, resumed
# from what an earlier machine left (.carry/NAME, named in the call's carry), looked in on, and
# packed into $OUT. On your own GPU run `gpu-pairs study run|status|collect NAME` directly.
#   COMMIT=<short hash> bash tools/device/study.sh start NAME [gpu-pairs study run options]
#     (COMMIT: the commit the copy holds; the machine's git reports the checkout's base, which a study's facts would record)
#   bash tools/device/study.sh status NAME
#   bash tools/device/study.sh collect NAME    # stops the run and a THEN run after it (SIGTERM to the runner's
#                                              # process group: its jobs are torn down), then $OUT/NAME.tgz
#                                              # (each case's gpu_samples.csv with it)
#                                              # (KEEP_PROGRESS=1: with the jobs' progress files)
#   PART=<label>: a second runner of the same study beside the first, in its own folder (NAME-<label>,
#   packed as NAME-<label>.tgz), e.g. one --variant on GPUs 2,3 (--pytest-arg=--gpu-pairs-gpus=2,3)
#   while the other runs on 0,1; merge the two folders' results-* after collect.
#   start runs from a copy of the tree (/tmp/gpu-pairs-src/RUN), so that later calls' copies cannot touch it.
#   LIMIT_S=<seconds> THEN="NAME2 [options]": start gives NAME --time-limit LIMIT_S, then runs NAME2
#   (resumed from .carry/NAME2) with what is left of it, so that a lease's time after the last block
#   that fits measures something else; status and collect NAME2 as any study.
source tools/device/setup.sh
ACTION=${1:?usage: study.sh start|status|collect NAME}
NAME=${2:?usage: study.sh start|status|collect NAME}
RUN=$NAME${PART:+-$PART}
WORK=/tmp/gpu-pairs-studies/$RUN
mkdir -p "$WORK"
case "$ACTION" in
  start)
    [ -d ".carry/$NAME" ] && cp -r --update=none ".carry/$NAME"/. "$WORK"/
    rm -rf "$WORK"/*/_mps  # an earlier MPS daemon's logs: a copy is no longer private (0700), so MPS would refuse it
    gpus() { nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
      --format=csv,noheader >> "$1/gpu.txt" 2>&1; }
    gpus "$WORK"
    shift 2
    # the runner and its jobs import from a copy of their own: the device tool copies the working tree
    # afresh at each call, and a module imported mid-copy was once missing (a session's last save failed)
    src=/tmp/gpu-pairs-src/$RUN
    rm -rf "$src" && mkdir -p "$src"
    tar -c --exclude=./.git --exclude=./.whl --exclude=./.carry --exclude=./.device . | tar -x -C "$src"
    repo=$PWD
    cd "$src" && export PYTHONPATH=$src${PYTHONPATH:+:$PYTHONPATH}
    if [ -n "${THEN:-}" ]; then
      : "${LIMIT_S:?THEN needs LIMIT_S, the seconds both runs share}"
      read -r -a then_args <<< "$THEN"
      then_work=/tmp/gpu-pairs-studies/${then_args[0]}
      mkdir -p "$then_work"
      [ -d "$repo/.carry/${then_args[0]}" ] && cp -r --update=none "$repo/.carry/${then_args[0]}"/. "$then_work"/
      gpus "$then_work"  # the THEN study's own record of the machine it ran on
      setsid nohup bash -c 'start=$(date +%s); limit=$1; name=$2; work=$3; then_work=$4; shift 4
        n=$1; shift; first=("${@:1:$n}"); second=("${@:$((n + 1))}")
        python3 -m pytest_gpu_pairs.cli study run "$name" --out "$work" --time-limit "$limit" "${first[@]}" >> "$work.log" 2>&1
        left=$(( limit - ($(date +%s) - start) ))
        [ "$left" -gt 60 ] && python3 -m pytest_gpu_pairs.cli study run "${second[0]}" --out "$then_work" \
          --time-limit "$left" "${second[@]:1}" >> "$then_work.log" 2>&1' \
        _ "$LIMIT_S" "$NAME" "$WORK" "$then_work" "$#" "$@" "${then_args[@]}" < /dev/null &
    else
      setsid nohup python3 -m pytest_gpu_pairs.cli study run "$NAME" --out "$WORK" "$@" >> "$WORK.log" 2>&1 < /dev/null &
    fi
    echo $! > "$WORK.pid"
    echo "started $NAME (runner pid $!)${THEN:+, then ${THEN}}" ;;
  status)
    tail -3 "$WORK.log" 2>/dev/null
    python3 -m pytest_gpu_pairs.cli study status "$NAME" --out "$WORK" ;;
  collect)
    if [ -f "$WORK.pid" ] && pgrep -g "$(cat "$WORK.pid")" >/dev/null; then  # the runner's group (a THEN run's too)
      kill -TERM -- "-$(cat "$WORK.pid")" 2>/dev/null
      for _ in $(seq 90); do pgrep -g "$(cat "$WORK.pid")" >/dev/null || break; sleep 1; done
    fi
    cp "$WORK.log" "$WORK/runner.log" 2>/dev/null
    KEEP=(--exclude='*.progress.jsonl')
    [ -n "${KEEP_PROGRESS:-}" ] && KEEP=()  # the jobs' step reports, where a study reads paces from them again
    # the card's samples (clocks, power, utilisation) travel; the per-process ones, the bulk, stay
    tar -czf "$OUT/$RUN.tgz" --exclude='*process_samples.csv' "${KEEP[@]}" -C /tmp/gpu-pairs-studies "$RUN"
    echo "collected into $OUT/$RUN.tgz" ;;
  *) echo "usage: study.sh start|status|collect NAME"; exit 2 ;;
esac
