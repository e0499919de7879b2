#!/usr/bin/env bash
# The device adapter, for the remote GPU machine of ../.library/device only (offline wheels, an $OUT
# folder, results carried back as archives): a declared study run there in the background, resumed
# from what an earlier machine left (.carry/NAME, named in the call's carry), looked in on, and
# packed into $OUT. On your own GPU run `gpu-pairs study run|status|collect NAME` directly.
#   COMMIT=<short hash> bash tools/device/study.sh start NAME [gpu-pairs study run options]
#     (COMMIT: the commit the copy holds; the machine's git reports the checkout's base, which a study's facts would record)
#   bash tools/device/study.sh status NAME
#   bash tools/device/study.sh collect NAME    # stops the run (SIGTERM: its jobs are torn down), then $OUT/NAME.tgz
#                                              # (KEEP_PROGRESS=1: with the jobs' progress files)
#   PART=<label>: a second runner of the same study beside the first, in its own folder (NAME-<label>,
#   packed as NAME-<label>.tgz), e.g. one --variant on GPUs 2,3 (--pytest-arg=--gpu-pairs-gpus=2,3)
#   while the other runs on 0,1; merge the two folders' results-* after collect.
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
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
      --format=csv,noheader >> "$WORK/gpu.txt" 2>&1
    shift 2
    setsid nohup python3 -m pytest_gpu_pairs.cli study run "$NAME" --out "$WORK" "$@" >> "$WORK.log" 2>&1 < /dev/null &
    echo $! > "$WORK.pid"
    echo "started $NAME (runner pid $!)" ;;
  status)
    tail -3 "$WORK.log" 2>/dev/null
    python3 -m pytest_gpu_pairs.cli study status "$NAME" --out "$WORK" ;;
  collect)
    if [ -f "$WORK.pid" ] && kill -0 "$(cat "$WORK.pid")" 2>/dev/null; then
      kill -TERM "$(cat "$WORK.pid")"
      for _ in $(seq 90); do kill -0 "$(cat "$WORK.pid")" 2>/dev/null || break; sleep 1; done
    fi
    cp "$WORK.log" "$WORK/runner.log" 2>/dev/null
    KEEP=(--exclude='*.progress.jsonl')
    [ -n "${KEEP_PROGRESS:-}" ] && KEEP=()  # the jobs' step reports, where a study reads paces from them again
    tar -czf "$OUT/$RUN.tgz" --exclude='*samples.csv' "${KEEP[@]}" -C /tmp/gpu-pairs-studies "$RUN"
    echo "collected into $OUT/$RUN.tgz" ;;
  *) echo "usage: study.sh start|status|collect NAME"; exit 2 ;;
esac
