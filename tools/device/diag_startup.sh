# Where a built-in workload's startup goes on the GPU machine: timestamps of the job's own events and a
# stack dump (faulthandler, SIGUSR1) if it has not finished after LIMIT seconds.
# Usage: bash tools/device/diag_startup.sh MODEL SCALE LIMIT_S
source tools/device/setup.sh
MODEL=$1; SCALE=${2:-0.01}; LIMIT=${3:-60}
P=/tmp/diag_$MODEL.progress.jsonl; rm -f $P
START=$(date +%s.%N)
GPU_PAIRS_PROGRESS=$P timeout -s USR1 -k 10 "$LIMIT" python3 -c "
import faulthandler, signal, sys, runpy
faulthandler.register(signal.SIGUSR1, all_threads=True)
sys.argv = ['workloads', '$MODEL', '--device', 'cuda', '--scale', '$SCALE', '--epochs', '1']
runpy.run_module('pytest_gpu_pairs.workloads', run_name='__main__')
" 2>&1 | tail -40
echo "exit: ${PIPESTATUS[0]}"
python3 -c "
import json, sys
start = float(sys.argv[1])
for line in open(sys.argv[2]):
    e = json.loads(line)
    if e['event'] != 'step': print(f\"{e['t'] - start:8.2f} s  {e['event']}\")
" "$START" "$P"
