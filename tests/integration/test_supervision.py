"""Faults end to end: real pytest runs (pytester subprocesses) of command workloads that run out of
memory, crash in a loop, hang, ignore SIGTERM, and pytest runs interrupted by SIGINT and SIGTERM.

Each run starts with a case that passes; every test checks that its result survived intact, that
the failing case says why in its result.json, and that no process of any job is left, counted
twice: by the pid files of tests/support/fake_job.py and by the environment scan.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import FAKE_JOB, SUITE, alive_pids, jobs_started_under, wait_for

from pytest_gpu_pairs.experiment.cases import KEPT_SOLO_RUNS

OK_CASE = "g00-trainer+loader-default-concurrent"
HP_TYPES = {"steps": "int", "step_s": "float", "protocol": "bool", "fault": "str", "fault_runs": "str",
            "ignore_term": "bool", "state": "str", "pool": "str", "mem_mb": "int", "capacity_mb": "int",
            "children": "int", "setsid_grandchild": "bool", "pids": "str", "accuracy": "float"}


def workload(tmp: Path, ready_pattern=None) -> dict:
    """tests/support/fake_job.py as a user's train script: flags from hyperparameters."""
    hps = {name: {"type": kind, "flag": "--" + name.replace("_", "-")} for name, kind in HP_TYPES.items()}
    hps["pids"]["default"] = str(tmp / "pids")
    spec = {"command": [sys.executable, str(FAKE_JOB)], "hyperparameters": hps,
            "log_patterns": {"accuracy": r"Accuracy: ([0-9.]+)"}}
    if ready_pattern:
        spec["ready_pattern"] = ready_pattern
    return spec


def pair(group: str, fg: dict, bg: dict) -> dict:
    return {"group": group, "foreground": {"model": "trainer", "hyperparameters": fg},
            "background": {"model": "loader", "hyperparameters": bg}}


LONG_BG = {"protocol": True, "steps": 20, "step_s": 0.05}  # 1 s: its solo baseline runs it to the end, and it outlasts a 5-step foreground
OK_PAIR = pair("g00", {"steps": 5, "accuracy": 0.75}, LONG_BG)
# a background run that ends on its own and still counts as a run, not towards the crash loop, however
# slowly a loaded host starts it: it trains at least run/background.py's FINISHED_RUN_MIN_S (2 s) after
# it is ready (a shorter one counts when it trained for less time than it took to start)
FULL_RUN_BG = {"protocol": True, "steps": 45, "step_s": 0.05}


def write_settings(tmp: Path, name: str, pairs: list, **defaults) -> Path:
    path = tmp / f"{name}.json"
    data = {"name": name, "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 600, **defaults},
            "workloads": {"trainer": workload(tmp, r"^Epoch 1"), "loader": workload(tmp)}, "pairs": pairs}
    path.write_text(json.dumps(data))
    return path


def cli_args(tmp: Path, *settings: Path) -> list[str]:
    args = ["--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(tmp / "out"), "-p", "no:cacheprovider", "-rA"]
    for path in settings:
        args += ["--gpu-pairs-settings", str(path)]
    return args


def run(pytester, *settings: Path, extra=()):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess(*cli_args(pytester.path, *settings), *extra, timeout=600)


def result(tmp: Path, case_id: str) -> dict:
    return json.loads((tmp / "out" / case_id / "result.json").read_text())


def assert_ok_case_intact(tmp: Path) -> None:
    ok = result(tmp, OK_CASE)
    assert ok["complete"] is True and ok["failure"] is None and ok["oom"] is False
    assert ok["perf"] == {"accuracy": 0.75} and ok["fg_duration_s"] > 0  # perf from the log_patterns
    timeline = ok["timeline"]["rounds"][0]
    # the foreground starts when the background reports its first step: no fixed sleep (the predecessor's was 30 s)
    assert 0 <= timeline["fg_start_t"] - timeline["bg_ready_t"] < 10


def assert_no_leftovers(tmp: Path) -> None:
    assert alive_pids(tmp / "pids") == [], "processes of fake jobs are still alive"
    assert jobs_started_under(tmp / "out") == [], "job processes still run"


def test_oom_in_the_foreground_and_in_the_background(pytester):
    tmp = pytester.path
    pool = {"pool": str(tmp / "device"), "capacity_mb": 1000}
    settings = write_settings(tmp, "oom", [
        OK_PAIR,
        # each fits alone (solo baselines pass); together they do not: the foreground starts second
        pair("g01", {"steps": 5, "mem_mb": 600, **pool}, {**LONG_BG, "mem_mb": 600, **pool}),
        # background runs from the 3rd invocation on run out of memory (the 1st is its solo baseline)
        pair("g02", {"steps": 60, "step_s": 0.05},
             {"protocol": True, "steps": 5, "fault": "oom", "fault_runs": "3-", "state": str(tmp / "g02-bg")}),
    ], crash_loop_failures=1000)
    outcome = run(pytester, settings)
    outcome.assert_outcomes(passed=1, failed=2)
    outcome.stdout.fnmatch_lines(["*g01-trainer+loader-default-concurrent: OOM: foreground trainer out of memory "
                                  "(torch.OutOfMemoryError: CUDA out of memory*",
                                  "*g02-trainer+loader-default-concurrent: OOM: background loader run 2 out of memory*"])
    fg_oom = result(tmp, "g01-trainer+loader-default-concurrent")
    assert fg_oom["complete"] and fg_oom["oom"] and fg_oom["fg_exit_code"] == 1
    assert fg_oom["fg_duration_s"] is None and "did not finish" in fg_oom["notes"]["fg_duration_s"]
    bg_oom = result(tmp, "g02-trainer+loader-default-concurrent")
    assert bg_oom["complete"] and bg_oom["oom"] and bg_oom["fg_exit_code"] == 0 and bg_oom["bg_failures"] >= 1
    runs = [json.loads(line) for line in (tmp / "out" / bg_oom["case_id"] / "bg-runs.jsonl").read_text().splitlines()]
    ended_alone = [r for r in runs[1:] if not r["stopped_by_harness"]]
    assert runs[0]["oom"] is False and ended_alone and all(r["oom"] and r["exit_code"] == 1 for r in ended_alone)
    assert_ok_case_intact(tmp)
    assert_no_leftovers(tmp)


def test_a_crash_looping_background_fails_the_case_before_or_during_the_foreground(pytester):
    tmp = pytester.path
    settings = write_settings(tmp, "crash", [
        OK_PAIR,
        pair("g01", {"steps": 5}, {"fault": "crash", "fault_runs": "2-", "state": str(tmp / "g01-bg")}),
        pair("g02", {"steps": 5, "fault": "hang", "fault_runs": "2", "state": str(tmp / "g02-fg")},
             {**FULL_RUN_BG, "fault": "crash", "fault_runs": "3-", "state": str(tmp / "g02-bg")}),
    ])
    outcome = run(pytester, settings)
    outcome.assert_outcomes(passed=1, failed=2)
    outcome.stdout.fnmatch_lines(["*g01-*: background loader crash-looped: 3 consecutive runs that failed or ended "
                                  "before they were ready within 300 s, last: exited with code 1*"])
    before = result(tmp, "g01-trainer+loader-default-concurrent")
    assert before["complete"] and before["bg_runs"] == 3 and before["bg_failures"] == 3
    assert not (tmp / "out" / before["case_id"] / "fg.log").exists()
    during = result(tmp, "g02-trainer+loader-default-concurrent")
    assert during["failure"].startswith("foreground stopped: background loader crash-looped")
    assert during["fg_duration_s"] is None and during["bg_failures"] == 3
    fg_log = (tmp / "out" / during["case_id"] / "fg.log").read_text()
    assert "stopped_by_harness=True" in fg_log  # it hangs: only the crash loop's reaction ends it
    assert_ok_case_intact(tmp)
    assert_no_leftovers(tmp)


def test_hangs_past_the_timeout_and_jobs_that_ignore_sigterm_are_killed(pytester):
    tmp = pytester.path
    ignoring_bg = {"protocol": True, "ignore_term": True, "children": 2, "setsid_grandchild": True,
                   "fault": "hang", "fault_runs": "2-", "state": str(tmp / "g01-bg")}  # the solo baseline ends
    relaxed = write_settings(tmp, "relaxed", [OK_PAIR, pair("g01", {"steps": 5}, ignoring_bg)])
    strict = write_settings(tmp, "strict", [
        pair("g02", {"steps": 5, "fault": "hang", "fault_runs": "2", "ignore_term": True, "children": 1,
                     "state": str(tmp / "g02-fg")}, {"protocol": True, "steps": 10, "step_s": 0.05})],
        timeout_s=3)
    outcome = run(pytester, relaxed, strict)
    outcome.assert_outcomes(passed=2, failed=1)
    outcome.stdout.fnmatch_lines(["*g02-trainer+loader-default-concurrent: foreground trainer timed out (limit 3 s) "
                                  "and was killed*"])
    ignored = result(tmp, "g01-trainer+loader-default-concurrent")
    assert ignored["complete"] and ignored["failure"] is None
    bg_log = (tmp / "out" / ignored["case_id"] / "bg-run-001.log").read_text()
    assert "exit=-9" in bg_log and "stopped_by_harness=True" in bg_log  # SIGTERM ignored: SIGKILL after the grace
    hung = result(tmp, "g02-trainer+loader-default-concurrent")
    assert hung["complete"] and hung["fg_exit_code"] == -9 and not hung["oom"]
    assert_ok_case_intact(tmp)
    assert_no_leftovers(tmp)


INTERRUPTED_CASE = "g01-trainer+loader-default-concurrent"


def start_pytest(tmp: Path, *extra: str) -> subprocess.Popen:
    """pytest as an operator starts it, with Ctrl-C handling in place even where the shell that
    started this test ignores SIGINT (a CI runner's background job)."""
    (tmp / "test_suite.py").write_text(SUITE)
    settings = write_settings(tmp, "interrupt", [
        OK_PAIR,
        pair("g01", {"steps": 5, "fault": "hang", "fault_runs": "2", "protocol": True, "children": 1,
                     "state": str(tmp / "g01-fg")}, {**LONG_BG, "children": 1})])
    code = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "sys.exit(pytest.console_main())")
    with open(tmp / "pytest.log", "ab") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-c", code, *cli_args(tmp, settings), *extra], cwd=tmp,
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def interrupt_mid_case(tmp: Path, signum: int, *extra: str) -> tuple[bytes, str]:
    """Run until the first case is recorded and the second case's foreground trains, then signal."""
    pytest_process = start_pytest(tmp, *extra)
    try:
        ok_path = tmp / "out" / OK_CASE / "result.json"
        fg_progress = tmp / "out" / INTERRUPTED_CASE / "fg.progress.jsonl"
        wait_for(lambda: pytest_process.poll() is None and ok_path.exists() and fg_progress.exists()
                 and '"ready"' in fg_progress.read_text(), timeout_s=300, what="the second case's foreground")
        recorded = ok_path.read_bytes()
        pytest_process.send_signal(signum)
        assert pytest_process.wait(timeout=120) == 2  # pytest's exit code for an interrupted run
    finally:
        if pytest_process.poll() is None:
            pytest_process.kill()
    return recorded, (tmp / "pytest.log").read_text()


def assert_interrupted_cleanly(tmp: Path, recorded: bytes) -> None:
    assert (tmp / "out" / OK_CASE / "result.json").read_bytes() == recorded
    assert_ok_case_intact(tmp)
    cut = result(tmp, INTERRUPTED_CASE)
    assert cut["complete"] is False and "interrupted by Ctrl-C or SIGTERM" in cut["interrupted"]
    assert_no_leftovers(tmp)


def test_sigint_mid_case_then_resume_skips_the_finished_case(pytester):
    tmp = pytester.path
    recorded, log = interrupt_mid_case(tmp, signal.SIGINT)
    assert "KeyboardInterrupt" in log
    assert_interrupted_cleanly(tmp, recorded)
    assert f"interrupted (incomplete result.json): {INTERRUPTED_CASE}" in log
    assert "to finish the rest without repeating finished cases: pytest " in log and "--gpu-pairs-resume" in log
    assert "Benchmark fixture was not used" not in log

    resumed = start_pytest(tmp, "--gpu-pairs-resume")
    assert resumed.wait(timeout=300) == 0
    log = (tmp / "pytest.log").read_text()
    assert "SKIPPED [1] " in log and f"complete result in {tmp / 'out' / OK_CASE}" in log
    assert "1 passed, 1 skipped" in log
    assert "resumed (recorded earlier, not run again): " + OK_CASE in log
    assert "Benchmark fixture was not used" not in log
    assert (tmp / "out" / OK_CASE / "result.json").read_bytes() == recorded
    assert result(tmp, INTERRUPTED_CASE)["complete"] is True
    assert_no_leftovers(tmp)


def test_sigterm_mid_case_tears_everything_down(pytester):
    tmp = pytester.path
    recorded, log = interrupt_mid_case(tmp, signal.SIGTERM, "--benchmark-json", str(tmp / "bench.json"))
    assert "signal 15" in log
    assert_interrupted_cleanly(tmp, recorded)
    # the case cut mid-round has no timing: it is left out, and the finished case is written
    saved = json.loads((tmp / "bench.json").read_text())
    assert [b["extra_info"]["case_id"] for b in saved["benchmarks"]] == [OK_CASE]
    assert "Traceback" not in log


def test_a_run_its_background_covered_too_little_of_is_refused_as_a_data_point(pytester):
    """A background that ends early and restarts leaves most of the foreground's run alone: under a
    coverage rule the case holds no data point and fails saying how to give it one, while a pair whose
    background outlasts the foreground passes and counts."""
    tmp = pytester.path
    settings = write_settings(tmp, "coverage", [
        pair("g00", {"steps": 40, "step_s": 0.05, "accuracy": 0.75}, {"protocol": True, "steps": 120, "step_s": 0.05}),
        pair("g01", {"steps": 60, "step_s": 0.05}, FULL_RUN_BG),
    ], min_coverage=0.95, restart_delay_s=1.0)
    outcome = run(pytester, settings)
    outcome.assert_outcomes(passed=1, failed=1)
    outcome.stdout.fnmatch_lines(["*g01-trainer+loader-default-concurrent: the background covered * % of the "
                                  "foreground's run, below the 95 % a run's outcome needs: give the background a run "
                                  "at least as long as the foreground's*"])
    short = result(tmp, "g01-trainer+loader-default-concurrent")
    assert short["bg_coverage"] < 0.95 and short["min_coverage"] == 0.95 and short["rounds_refused"] == 1
    assert short["repeats"] == 0 and "below the 95 %" in short["coverage_refused"]
    ok = result(tmp, OK_CASE)
    assert ok["bg_coverage"] >= 0.95 and ok["rounds_refused"] == 0 and ok.get("coverage_refused") is None
    assert_no_leftovers(tmp)


def test_a_kept_running_builtin_background_shares_the_whole_run_in_one_process(pytester):
    """Kept running, a built-in background whose run is far shorter than the foreground's trains it
    again in its process: one process, no restart gap, the whole run covered, and each of its runs
    that overlapped the foreground's on record with its accuracy. Its progress ratio is taken against
    its pace alone in its own process, warm, in the windows around the foreground's run (the
    foreground held at its gate before, ended after), so the host's drift between its solo case and
    the shared run stays out of it."""
    tmp = pytester.path
    kept = {"group": "g00", "foreground": {"model": "trainer", "hyperparameters": {"steps": 60, "step_s": 0.1}},
            "background": {"model": "mnist", "hyperparameters": {"epochs": 1, "batch_size": 8}}}
    settings = write_settings(tmp, "kept", [kept], min_coverage=0.95, keep_background=True, background_alone_s=2)
    outcome = run(pytester, settings, extra=("--gpu-pairs-scale", "0.002"))
    outcome.assert_outcomes(passed=1)
    case = result(tmp, "g00-trainer+mnist-default-concurrent")
    assert case["bg_runs"] == 1 and case["bg_coverage"] >= 0.95 and case["rounds_refused"] == 0
    cycles = case["bg_cycle_perf"]
    assert len(cycles) >= 2 and all(0 < c["shared"] <= 1 for c in cycles)
    assert all(0 <= c["metrics"]["test_accuracy"] <= 1 for c in cycles)
    assert not list((tmp / "out" / "g00-trainer+mnist-default-concurrent").glob("bg-run-002*"))
    [reference] = [json.loads(p.read_text()) for p in (tmp / "out" / "_solo").glob("mnist-*/result.json")]
    assert reference["fg_runs"] == KEPT_SOLO_RUNS  # A alone as it runs beside B: warm, in one process
    assert case["bg_solo_steps_per_s"] == reference["fg_solo_steps_per_s"]
    [round_] = case["timeline"]["rounds"]
    before, after = round_["bg_alone"]
    assert before[1] - before[0] >= 2.0 and after[1] - after[0] >= 2.0
    assert before[1] <= round_["fg_go_t"] and after[0] >= round_["fg_end_t"]
    assert case["bg_alone_steps_per_s"] > 0 and case["bg_alone_drift"] is not None
    assert case["bg_progress_ratio"] == pytest.approx(
        case["bg_steps_in_window"] / (case["fg_duration_s"] * case["bg_alone_steps_per_s"]), rel=0.02)
    assert "bg_alone_steps_per_s" in case["notes"]["bg_progress_ratio"]
    assert_no_leftovers(tmp)

