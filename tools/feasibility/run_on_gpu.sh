# Issue 2's GPU proof: feasibility groups (and the slice pair s01) at full scale on the device, one
# pytest session per call so that solo baselines shared by several groups are measured once.
# Usage: bash scripts/device/issue2_full_scale.sh PART "-k expression" TIME_LIMIT_S
# Out: $OUT/issue2_PART.json (pytest-benchmark JSON) and $OUT/issue2_PART.tgz (run folder + pytest log).
# Then, here: python scripts/issue2_reference.py <files_at>/issue2_*.json (writes reports/reference/).
source scripts/device/setup.sh
PART=$1; SELECT=$2; LIMIT=${3:-500}
R=/tmp/issue2_$PART
timeout -s TERM -k 20 "$LIMIT" python3 -m pytest benchmarks --gpu-pairs-device cuda \
  --gpu-pairs-settings settings/parallel_feasibility_test.json --gpu-pairs-settings settings/slice_pairs.json \
  -k "$SELECT" --gpu-pairs-out "$R" --benchmark-json "$OUT/issue2_$PART.json" -p no:cacheprovider -rA \
  > /tmp/issue2_$PART.log 2>&1
echo "pytest exit code: $? (124 = stopped at the time limit)"
cp /tmp/issue2_$PART.log "$R/pytest.log" 2>/dev/null
tar czf "$OUT/issue2_$PART.tgz" -C /tmp "issue2_$PART"
sed -n '/gpu-pairs results/,$p' /tmp/issue2_$PART.log | head -40
