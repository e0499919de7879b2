# The sharing study on the GPU machine: pairs under time-slicing and under MPS, 3 rounds each, plus
# solo baselines once per job. Wall time: SHARING_BUDGET_S (default 450 s) for calibration + pytest, hard-stopped
# 30 s past it (results so far stay); then the summary table. Each round costs a process startup
# (the foreground's overlaps the background's), a teardown and, under MPS, a client check.
# One command (600 s at most) does not hold all five pairs at useful windows, so a run can take
# some of them: SHARING_GROUPS="m01 m02" sizes the calibration's budget for those pairs and selects
# them with -k. A later run reuses the first run's calibration (the same epochs and scale for every
# pair): SHARING_SETTINGS=<its sharing_settings.json> SHARING_SCALE=<its scale> skips calibrating.
# SHARING_WINDOW_S fixes the foreground's solo seconds instead of deriving them from the budget.
# cudnn.benchmark is off (GPU_PAIRS_CUDNN_BENCHMARK=0) unless set: autotuning beside another job
# costs DenseNet-121 ~35 s before its first step and picks kernels for whatever the card was doing,
# so the two mechanisms could end up comparing different kernels.
# Files in $OUT (7):
#   sharing_plan.txt  sharing_settings.json  sharing_scale.txt  sharing_bench.json
#   sharing_pytest.log  sharing_results.tgz  sharing_mps.md (the table, also printed last)
# Usage, from the repository root: [SHARING_GROUPS=...] [SHARING_BUDGET_S=...] bash tools/sharing/run_on_gpu.sh
# Turn them into reports/reference/sharing/ with (on your machine, from the repository root):
#   gpu-pairs sharing-report FETCHED/sharing_bench.json FETCHED/sharing_results.tgz --out reports/reference/sharing/sharing_mps
source tools/device/setup.sh
BUDGET_S=${SHARING_BUDGET_S:-450}
TEMPLATE=${SHARING_TEMPLATE:-settings/sharing_pairs.json}
GROUPS_LIST=$(echo ${SHARING_GROUPS:-} | tr ',' ' ')
SELECT=()
[ -n "$GROUPS_LIST" ] && SELECT=(-k "$(echo $GROUPS_LIST | sed 's/ / or /g')")
export GPU_PAIRS_CUDNN_BENCHMARK=${GPU_PAIRS_CUDNN_BENCHMARK:-0}
START=$(date +%s)
{
  nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total,power.limit --format=csv
  echo "mps control: $(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)"
  echo "groups: ${GROUPS_LIST:-all}; GPU_PAIRS_CUDNN_BENCHMARK=$GPU_PAIRS_CUDNN_BENCHMARK"
  if [ -n "${SHARING_SETTINGS:-}" ]; then
    echo "calibration reused: $SHARING_SETTINGS, scale ${SHARING_SCALE:?SHARING_SCALE goes with SHARING_SETTINGS}"
    cp "$SHARING_SETTINGS" /tmp/sharing_settings.json && echo "$SHARING_SCALE" > /tmp/sharing_scale.txt
  else
    python3 tools/sharing/calibrate.py "$TEMPLATE" /tmp/sharing_settings.json /tmp/sharing_scale.txt \
      --budget-s "$BUDGET_S" --groups "$(echo $GROUPS_LIST | tr ' ' ',')" ${SHARING_WINDOW_S:+--window-s $SHARING_WINDOW_S} \
      || echo "calibration failed: running the template as it is"
  fi
} 2>&1 | tee $OUT/sharing_plan.txt
[ -s /tmp/sharing_settings.json ] || cp "$TEMPLATE" /tmp/sharing_settings.json
[ -s /tmp/sharing_scale.txt ] || echo 0.02 > /tmp/sharing_scale.txt
cp /tmp/sharing_settings.json $OUT/sharing_settings.json
cp /tmp/sharing_scale.txt $OUT/sharing_scale.txt
LEFT=$(( BUDGET_S - ($(date +%s) - START) ))
[ "$LEFT" -gt 60 ] || LEFT=60
# SIGTERM at the budget: the plugin ends like Ctrl-C (jobs killed, MPS daemon quit), results so far stay.
timeout -s TERM -k 30 "$LEFT" python3 -m pytest benchmarks -p no:cacheprovider -rs "${SELECT[@]}" \
  --gpu-pairs-device cuda --gpu-pairs-settings /tmp/sharing_settings.json \
  --gpu-pairs-scale "$(cat /tmp/sharing_scale.txt)" --gpu-pairs-out /tmp/sharing-results \
  --benchmark-json $OUT/sharing_bench.json 2>&1 | tee $OUT/sharing_pytest.log
echo "pytest wall: $(( $(date +%s) - START )) s since the script started" | tee -a $OUT/sharing_pytest.log
ps -eo pid,args | grep -i "[m]ps-" | tee -a $OUT/sharing_pytest.log   # must be empty: no daemon left behind
tar czf $OUT/sharing_results.tgz -C /tmp sharing-results
# The tgz holds every case's result.json (failed ones too); the benchmark JSON exists only if pytest finished.
INPUTS="$OUT/sharing_results.tgz"
[ -s $OUT/sharing_bench.json ] && INPUTS="$OUT/sharing_bench.json $INPUTS"
python3 -m pytest_gpu_pairs.cli sharing-report $INPUTS --out /tmp/sharing_report/sharing_mps > /dev/null \
  && cp /tmp/sharing_report/sharing_mps.md $OUT/
cat $OUT/sharing_mps.md
