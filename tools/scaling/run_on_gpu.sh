# The scaling study on a machine with two GPUs (the nvidia-h200-x2 kind), in one device command:
# settings/scaling_study.json's two workloads (resnet20; vulberta_mlp at one sample per GPU) trained
# data-parallel on 1 and 2 GPUs. A pilot case first runs vulberta_mlp on two whole cards, and the
# study then runs on an emulated card sized so that the pilot's fullest GPU fills 93.5 % of it, the
# predecessor's figure (tools/scaling/card_size.py). gpu-pairs scale fits the ring model to 1 and 2
# GPUs, predicts 4 and 6, and answers the predecessor's 4-versus-6 question (4 GPUs, 2.6 s per
# iteration, 9 days left, 93.5 % of each card, RESTART_MIN minutes per restart, default 30) with its
# thresholds and with the memory criterion at the whole card; tools/scaling/collate.py writes
# summary.json and README.md. Everything lands in $OUT/scaling, packed at the end into $OUT/scaling.tgz
# (the device tool brings back only a few files of a command; results.tgz inside holds the case folders).
#   bash tools/scaling/run_on_gpu.sh                          the study on the GPUs (about 5 minutes)
#   DEVICE=cpu bash tools/scaling/run_on_gpu.sh               the same on the CPU at SCALE 0.02 (no card
#                                                             emulation there), to check the script end to end
# CARD_MB=N skips the pilot and emulates N MB; CARD_MB=none runs on the whole cards. SCALE (default 1.0
# on GPUs) shortens every stretch of steps; COMMIT names the commit where the copy has no .git. A study
# case that runs out of memory on the emulated card is left out of the predictions: run again with a
# larger CARD_MB. NO_INSTALL=1 skips tools/device/setup.sh (wheels and `pip install -e .`), for a
# machine whose environment must stay as it is: set PYTHONPATH to the checkout instead. NCCL_* variables
# pass through to the ranks (NCCL_SHM_DISABLE=1 where a container's /dev/shm is too small for NCCL).
# Then, here: tar -xzf FETCHED/scaling.tgz -C DIR; python -m tools.scaling.collate DIR/scaling --out reports/reference/scaling
if [ -z "${NO_INSTALL:-}" ]; then source tools/device/setup.sh; else export PYTHONUNBUFFERED=1; fi
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then SCALE=${SCALE:-0.02}; CARD_MB=${CARD_MB:-none}; else SCALE=${SCALE:-1.0}; fi
DEST=${OUT:-/tmp/scaling-out}/scaling
WORK=${WORK:-/tmp/scaling}
SETTINGS=${SETTINGS:-settings/scaling_study.json}
RESTART_MIN=${RESTART_MIN:-30}
STUDY=(benchmarks --gpu-pairs-settings "$SETTINGS" --gpu-pairs-device "$DEVICE" --gpu-pairs-scale "$SCALE"
       -p no:cacheprovider -q -rA)
rm -rf "$WORK" "$DEST"; mkdir -p "$WORK" "$DEST"
echo "${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}" > "$DEST/commit.txt"
echo "$RESTART_MIN" > "$DEST/restart_min.txt"
if [ "$DEVICE" = cpu ]; then
  echo "cpu ($(nproc) CPUs), gloo" > "$DEST/device.txt"
else
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader > "$DEST/device.txt" 2>&1
  nvidia-smi topo -m > "$DEST/topology.txt" 2>&1
fi

if [ -z "${CARD_MB:-}" ]; then
  python3 -m pytest "${STUDY[@]}" -k "sc02 and gpus2" --gpu-pairs-out "$WORK/pilot" > "$DEST/pilot.pytest.txt" 2>&1
  tail -5 "$DEST/pilot.pytest.txt"
  CARD_MB=$(python3 -m tools.scaling.card_size "$WORK/pilot" 2>> "$DEST/pilot.pytest.txt") || CARD_MB=none
fi
echo "$CARD_MB" > "$DEST/card.txt"
CARD=()
[ "$CARD_MB" != none ] && CARD=(--gpu-pairs-gpu-memory-mb "$CARD_MB")
echo "emulated card: $CARD_MB MB"

python3 -m pytest "${STUDY[@]}" "${CARD[@]}" --gpu-pairs-out "$WORK/results" --benchmark-json "$DEST/study.json" \
  > "$DEST/study.pytest.txt" 2>&1
tail -25 "$DEST/study.pytest.txt"

python3 -m pytest_gpu_pairs.cli scale "$WORK/results" --gpus 4,6 --json > "$DEST/scale.json" 2> "$DEST/scale.err"
python3 -m pytest_gpu_pairs.cli scale "$WORK/results" --gpus 4,6 > "$DEST/scale.txt" 2>> "$DEST/scale.err"
PREDECESSOR=(--current-gpus 4 --gpus 6 --remaining-hours 216 --step-time-s 2.6 --memory-fraction 0.935
             --card-memory-mb 32768 --restart-cost-min "$RESTART_MIN")
python3 -m pytest_gpu_pairs.cli scale "$WORK/results" "${PREDECESSOR[@]}" --json > "$DEST/predecessor.json" 2>> "$DEST/scale.err"
python3 -m pytest_gpu_pairs.cli scale "$WORK/results" "${PREDECESSOR[@]}" > "$DEST/predecessor.txt" 2>> "$DEST/scale.err"
python3 -m pytest_gpu_pairs.cli scale "$WORK/results" "${PREDECESSOR[@]}" --memory-threshold 1.0 --json > "$DEST/predecessor_fits.json" \
  2>> "$DEST/scale.err"
cat "$DEST/predecessor.txt"

tar -czf "$DEST/results.tgz" -C "$WORK" results $( [ -d "$WORK/pilot" ] && echo pilot )
python3 -m tools.scaling.collate "$DEST" | tail -12
tar -czf "$DEST.tgz" -C "$(dirname "$DEST")" scaling && rm -rf "$DEST"
