#!/usr/bin/env bash
# One pytest session of the reproducibility study on the GPU machine: g01, s01 and g10 at full scale,
# interleaved rounds to the default 3 % precision target. Run it once per session wanted (a separate
# pytest process each time: separate sessions are what must agree).
#   SESSION=1 bash tools/reproducibility/run_on_gpu.sh            # results in $OUT/session-1/, $OUT/session-1.json
#   HEAVY=1 SESSION=h bash tools/reproducibility/run_on_gpu.sh    # g01 only, its background's batch twice as large
# MAX_CASE_S caps each case's device time (default 180 s, the product's); PIN passes --gpu-pairs-pin-cpus (default: auto).
# RESULTS (default $OUT) is where the session's files go.
source tools/device/setup.sh
SESSION=${SESSION:-1}
RESULTS=${RESULTS:-$OUT}
SETTINGS=(--gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings settings/slice_pairs.json)
SELECT="g01 or s01 or g10"
if [ -n "$HEAVY" ]; then
  SETTINGS=(--gpu-pairs-settings tools/reproducibility/heavy_background.json)
  SELECT="g01"
fi
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader \
  > "$RESULTS/session-$SESSION.gpu.txt" 2>&1
python3 -m pytest benchmarks -k "$SELECT" "${SETTINGS[@]}" --gpu-pairs-method interleaved \
  --gpu-pairs-max-case-s "${MAX_CASE_S:-180}" --gpu-pairs-pin-cpus "${PIN:-auto}" --gpu-pairs-out "/tmp/session-$SESSION" \
  --benchmark-json "$RESULTS/session-$SESSION.json" -p no:cacheprovider -q 2>&1 | tail -40
tar -czf "$RESULTS/session-$SESSION.tgz" --exclude='*.log' -C /tmp "session-$SESSION"
