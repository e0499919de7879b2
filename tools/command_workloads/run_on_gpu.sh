#!/usr/bin/env bash
# The command-workload study on the GPU machine: tools/command_workloads/word_language_model.py, a
# training script in the style of pytorch/examples word_language_model that prints its own log lines
# and knows nothing of gpu-pairs (read through its progress_pattern), paired with the built-in
# resnet20 both ways (c01: script in the foreground, c02: in the background) and with itself (c03).
# One method per call (each fits one device command):
#   METHOD=epoch bash tools/command_workloads/run_on_gpu.sh
#   METHOD=interleaved MAX_CASE_S=100 bash tools/command_workloads/run_on_gpu.sh
# Writes to $OUT: <method>.json (pytest-benchmark JSON, each case's record in extra_info),
# <method>.tgz (the case folders: results, the jobs' logs and what was read from them, no samples),
# <method>.gpu.txt (the card's state at the start), <method>.pytest.txt (the session's output).
# Then, here: python -m tools.command_workloads.collate reports/reference/command_workloads/{epoch,interleaved}.json \
#   --out reports/reference/command_workloads
source tools/device/setup.sh
METHOD=${METHOD:-epoch}
RESULTS=/tmp/command-workloads-$METHOD
EXTRA=()
if [ "$METHOD" = interleaved ]; then
  EXTRA=(--gpu-pairs-max-case-s "${MAX_CASE_S:-100}")
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv,noheader \
  > "$OUT/$METHOD.gpu.txt" 2>&1
python3 -m pytest benchmarks --gpu-pairs-settings "tools/command_workloads/$METHOD.json" --gpu-pairs-method "$METHOD" \
  "${EXTRA[@]}" --gpu-pairs-out "$RESULTS" --benchmark-json "$OUT/$METHOD.json" -p no:cacheprovider -q -rA \
  > "$OUT/$METHOD.pytest.txt" 2>&1
tail -40 "$OUT/$METHOD.pytest.txt"
tar -czf "$OUT/$METHOD.tgz" --exclude='*samples.csv' -C /tmp "command-workloads-$METHOD"
python3 -m tools.command_workloads.collate "$OUT/$METHOD.json" --out "$OUT/summary-$METHOD" | tail -20
