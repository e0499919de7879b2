#!/usr/bin/env bash
# Does a workload's accuracy move with the learning rate and the epochs at a given scale? Solo
# runs of one built-in, one per variant, each printing its final metrics: the check to run before
# spending a pilot's device time on a scale (MRT-OAST never left 0.5112 at scale 0.25).
#   MODEL=mrt_oast SCALE=1.0 VARIANTS="--learning_rate=2e-05 --learning_rate=0.0001 --learning_rate=0.0005" \
#     bash tools/hp_pilot/accuracy_check.sh          # on the GPU machine; prints to $OUT/accuracy_check.txt
MODEL=${MODEL:-mrt_oast}; SCALE=${SCALE:-1.0}; EPOCHS=${EPOCHS:-2}
DEVICE=$(python3 -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
REPORT=${OUT:-.}/accuracy_check.txt
for variant in ${VARIANTS:---learning_rate=0.0001}; do
  echo "== $MODEL scale $SCALE --epochs=$EPOCHS $variant" >> "$REPORT"
  timeout -s TERM -k 10 300 python3 -m pytest_gpu_pairs.workloads "$MODEL" --device "$DEVICE" --scale "$SCALE" \
    "--epochs=$EPOCHS" "$variant" 2>&1 | grep -vE "^\s*$" | tail -6 >> "$REPORT"
done
cat "$REPORT"
