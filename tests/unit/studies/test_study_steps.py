"""The steps of the scaling and estimates studies: the convergence probe's plan and the supervision of
its jobs, and estimated against measured wall time, per case and in total, from what the session left."""
import json
from pathlib import Path

from pytest_gpu_pairs.record.store import save_result
from pytest_gpu_pairs.studies.collates.estimates import markdown
from pytest_gpu_pairs.studies.steps import estimates, scaling

RUN = Path(__file__).parents[2] / "data" / "h100" / "run"


def test_the_convergence_plan_branches_every_seed_at_the_current_batch_and_both_rules():
    plan = scaling.ConvergencePlan()
    branches = plan.branches()
    assert len(branches) == 3 * len(plan.seeds)
    assert {(b.rule, b.global_batch) for b in branches} == {("current", 4), ("linear", 6), ("square_root", 6)}
    factors = {b.rule: b.lr_factor for b in branches}
    assert factors == {"current": 1.0, "linear": 1.5, "square_root": 1.5 ** 0.5}
    assert len({b.name for b in branches}) == len(branches)
    small = scaling.ConvergencePlan.for_run("cpu", 1.0)
    assert small.image_size == 64 and small.branch_samples % 12 == 0


def test_a_scaled_plan_keeps_whole_steps_of_both_batches():
    plan = scaling.ConvergencePlan.for_run("cuda", 0.1)
    assert plan.branch_samples % 12 == 0 and plan.branch_samples >= 24 and plan.checkpoint_samples >= 8


def test_jobs_run_at_most_the_parallel_count_at_once_and_none_outlives_the_call(tmp_path):
    import sys
    import time

    import psutil

    from pytest_gpu_pairs.run.jobs import JobSpec

    marker = tmp_path / "running"
    code = ("import os, sys, time; p = sys.argv[1]; open(p + str(os.getpid()), 'w').close(); "
            "n = len([f for f in os.listdir(os.path.dirname(p)) if f.startswith('running')]); "
            "time.sleep(0.5); os.remove(p + str(os.getpid())); sys.exit(n)")
    jobs = [(JobSpec(f"j{i}", "probe", [sys.executable, "-c", code, str(marker)], {}, None, 30.0), tmp_path / f"j{i}.log")
            for i in range(4)]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    codes = scaling.run_jobs(jobs, 2)
    assert set(codes) == {"j0", "j1", "j2", "j3"} and all(c is not None and 1 <= c <= 2 for c in codes.values())
    time.sleep(0.2)
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def test_a_job_past_its_time_is_ended_with_its_tree_and_has_no_exit_code(tmp_path):
    import sys

    import psutil

    from pytest_gpu_pairs.run.jobs import JobSpec

    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    codes = scaling.run_jobs([(JobSpec("slow", "probe", [sys.executable, "-c", code], {}, None, 1.0),
                               tmp_path / "slow.log")], 1)
    assert codes == {"slow": None}
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def _record(out, case_id, seconds):
    src = json.loads((RUN / case_id / "result.json").read_text())
    src.update(complete=True, timeline={"solo": [], "rounds": [], "case_start_t": 100.0, "case_end_t": 100.0 + seconds})
    save_result(out / case_id, src)


def test_the_comparison_divides_each_estimate_by_the_cases_own_wall_time(tmp_path):
    case = "g01-mnist_ff+resnet20-default-concurrent"
    _record(tmp_path, case, 50.0)
    result = estimates.compare({case: 60.0, "missing-case": 10.0}, tmp_path, session_s=80.0)
    assert result["cases"][0]["ratio"] == 60.0 / 50.0 and result["cases"][1]["measured_s"] is None
    assert result["total_estimate_s"] == 70.0 and result["cases_measured_s"] is None
    assert result["within_target"] is True  # 70 / 80 is within 25 %
    assert "| g01-mnist_ff+resnet20-default-concurrent | 60.0 | 50.0 | 1.2 |" in markdown({**result, "select": "g01"})
    assert estimates.compare({case: 200.0}, tmp_path, session_s=80.0)["within_target"] is False
    assert estimates.compare({case: 200.0}, tmp_path, session_s=None)["within_target"] is False


def test_compare_reads_the_estimate_and_the_sessions_wall_time_from_the_study_folder(tmp_path):
    case = "g01-mnist_ff+resnet20-default-concurrent"
    _record(tmp_path / "session-1", case, 50.0)
    (tmp_path / "estimate.json").write_text(json.dumps({"estimates_s": {case: 55.0}}))
    (tmp_path / "runs.json").write_text(json.dumps({"session-1": [{"exit": 2, "wall_s": 9.0}, {"exit": 0, "wall_s": 60.0}]}))
    assert estimates.main(["compare", str(tmp_path), "--select", "g01"]) == 0
    result = json.loads((tmp_path / "estimates.json").read_text())
    assert result["session_wall_s"] == 60.0 and result["pytest_exit_code"] == 0 and result["select"] == "g01"
    (tmp_path / "estimate.json").write_text(json.dumps({"estimates_s": {case: "soon"}}))
    assert estimates.main(["compare", str(tmp_path), "--select", "g01"]) == 2
