#!/usr/bin/env bash
# On the GPU machine: each host-bound job of the default-method study beside a keeper that keeps the
# card a little busy (tools/default_method/awake.json), default method; its foreground slowdown says
# whether the job steps faster when the card is not left idle between its kernels.
#   bash tools/default_method/awake_probe.sh        # results in $OUT
source tools/device/setup.sh
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader \
  > "$OUT/awake.gpu.txt" 2>&1
python3 -m pytest benchmarks -k "a01 or a02" --gpu-pairs-settings tools/default_method/awake.json \
  --gpu-pairs-out /tmp/awake --benchmark-json "$OUT/awake.json" -p no:cacheprovider -q -rA > "$OUT/awake.pytest.txt" 2>&1
echo "pytest exit code: $?" >> "$OUT/awake.pytest.txt"
tail -25 "$OUT/awake.pytest.txt"
