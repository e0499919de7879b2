# The feasibility study on the GPU machine: the groups of settings/parallel_feasibility_test.json (and
# the slice pair s01) at full scale, one pytest session per call so that solo baselines shared by
# several groups are measured once.
# Usage, from the repository root: bash tools/feasibility/run_on_gpu.sh PART "-k expression" TIME_LIMIT_S
# Out: $OUT/feasibility_PART.json (pytest-benchmark JSON) and $OUT/feasibility_PART.tgz (run folder + pytest log).
# Then, on your own machine: python tools/feasibility/collate.py FETCHED/feasibility_*.json
#   (writes reports/reference/feasibility/; --keep that folder's JSON to add groups to the cases already there).
source tools/device/setup.sh
PART=$1; SELECT=$2; LIMIT=${3:-500}
R=/tmp/feasibility_$PART
timeout -s TERM -k 20 "$LIMIT" python3 -m pytest benchmarks --gpu-pairs-device cuda \
  --gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings settings/slice_pairs.json \
  -k "$SELECT" --gpu-pairs-out "$R" --benchmark-json "$OUT/feasibility_$PART.json" -p no:cacheprovider -rA \
  > /tmp/feasibility_$PART.log 2>&1
echo "pytest exit code: $? (124 = stopped at the time limit)"
cp /tmp/feasibility_$PART.log "$R/pytest.log" 2>/dev/null
tar czf "$OUT/feasibility_$PART.tgz" -C /tmp "feasibility_$PART"
sed -n '/gpu-pairs results/,$p' /tmp/feasibility_$PART.log | head -40
