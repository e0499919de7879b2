# The teardown study on the GPU machine (allotment: 2 minutes wall): after a foreground that runs out
# of CUDA memory, and after SIGTERM to pytest in the middle of a case, no process of the case is left
# and the card's memory is back to idle, read from NVML (tools/device/nvml_state.py; the jobs are
# tools/device/gpu_hog.py). Prints the evidence table last. Typical wall time 70-90 s; time boxes:
# part 1 55 s, part 2 45 s until the case trains, then SIGTERM (worst case ~2 min).
# Usage, from the repository root: bash tools/teardown/run_on_gpu.sh
# Out: $OUT/teardown_evidence.jsonl, $OUT/teardown_results.tgz, part1_fg_oom.log, part2_sigterm.log.
# Then, on your machine: copy teardown_evidence.jsonl to reports/reference/teardown/evidence.jsonl and
#   gpu-pairs study collect teardown --out reports/reference/teardown
source tools/device/setup.sh
R=/tmp/teardown
rm -rf $R && mkdir -p $R
EVIDENCE=$R/evidence.jsonl
python3 tools/device/nvml_state.py --label idle_before | tee $EVIDENCE
IDLE_MB=$(python3 -c "import json; print(json.loads(open('$EVIDENCE').readline())['mem_used_mb'] + 64)")

python3 - "$R" "$PWD" <<'PY'
import json, sys
r, repo = sys.argv[1], sys.argv[2]
hps = {"mem_frac": {"type": "float", "flag": "--mem-frac"}, "steps": {"type": "int"},
       "step_s": {"type": "float", "flag": "--step-s"}, "hang_run": {"type": "int", "flag": "--hang-run"},
       "state": {"type": "str"}}
hog = {"command": ["python3", f"{repo}/tools/device/gpu_hog.py"], "hyperparameters": hps}
def job(frac, steps, tag, **extra):
    return {"model": "hog", "hyperparameters": {"mem_frac": frac, "steps": steps, "state": f"{r}/state-{tag}", **extra}}
settings = {"name": "teardown", "defaults": {"restart_delay_s": 0.5, "timeout_s": 90, "ready_timeout_s": 60},
            "workloads": {"hog": hog},
            "pairs": [
                # each fits alone, together they do not: the foreground (second to allocate) runs out of memory;
                # a job's second invocation (the first is its solo baseline) holds on until it is killed
                {"group": "t01", "foreground": job(0.45, 20, "t01-fg"), "background": job(0.6, 20, "t01-bg", hang_run=2)},
                {"group": "t02", "foreground": job(0.2, 20, "t02-fg", hang_run=2),
                 "background": job(0.3, 20, "t02-bg", hang_run=2)}]}
open(f"{r}/teardown.json", "w").write(json.dumps(settings, indent=1))
PY
ARGS="benchmarks --gpu-pairs-settings $R/teardown.json --gpu-pairs-device cuda --gpu-pairs-out $R/out -p no:cacheprovider -rA"

echo "== part 1: foreground out of memory"
timeout -s TERM 55 python3 -m pytest $ARGS -k t01 > $OUT/part1_fg_oom.log 2>&1
echo "{\"label\": \"pytest_exit_part1\", \"exit\": $?}" >> $EVIDENCE
python3 tools/device/nvml_state.py --label after_fg_oom --wait-idle $IDLE_MB | tee -a $EVIDENCE

echo "== part 2: SIGTERM to pytest while the case trains"
python3 -m pytest $ARGS -k t02 > $OUT/part2_sigterm.log 2>&1 &
PYTEST=$!
FG=$R/out/t02-hog+hog-default-concurrent/fg.progress.jsonl
for _ in $(seq 1 225); do grep -qs '"ready"' $FG && break; kill -0 $PYTEST 2>/dev/null || break; sleep 0.2; done
python3 tools/device/nvml_state.py --label during_case_t02 | tee -a $EVIDENCE
kill -TERM $PYTEST
wait $PYTEST
echo "{\"label\": \"pytest_exit_part2\", \"exit\": $?}" >> $EVIDENCE
python3 tools/device/nvml_state.py --label after_sigterm --wait-idle $IDLE_MB | tee -a $EVIDENCE

for case in t01-hog+hog-default-concurrent t02-hog+hog-default-concurrent; do
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({'label': 'result_' + r['case_id'], 'complete': r['complete'], 'oom': r.get('oom'), 'failure': r.get('failure'), 'interrupted': r.get('interrupted')}))" \
    $R/out/$case/result.json >> $EVIDENCE 2>/dev/null || echo "{\"label\": \"result_$case\", \"missing\": true}" >> $EVIDENCE
done
cp $EVIDENCE $OUT/teardown_evidence.jsonl
tar czf $OUT/teardown_results.tgz -C $R out teardown.json evidence.jsonl
# anything the harness left would be a finding: it is in the evidence above; end it so the machine is clean
python3 - <<'PY'
import psutil
for p in psutil.process_iter():
    try:
        if "GPU_PAIRS_JOB" in p.environ():
            print(f"LEFTOVER job process {p.pid}: {p.cmdline()}"); p.kill()
    except psutil.Error:
        pass
PY
mkdir -p $OUT/teardown && cp $EVIDENCE $OUT/teardown/evidence.jsonl
python3 -m pytest_gpu_pairs.cli study collect teardown --out $OUT/teardown
