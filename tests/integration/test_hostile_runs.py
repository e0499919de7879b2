"""Hostile jobs and clocks in real pytest sessions (pytester subprocesses, command workloads of
tests/support/fake_job.py): a background that restarts in a storm, progress files and logs made
sparse files of terabytes, a wall clock stepped back an hour mid-case, progress counted in epochs,
and a case cap that holds inside a phase. Each session must end, and end every job."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from support.helpers import jobs_started_under

from integration.test_hostile import command, record, run

LONG = ["--protocol", "--steps", "100000", "--step-s", "0.02"]
BG = ["--protocol", "--steps", "40", "--step-s", "0.05"]  # runs of 2 s: long enough not to count as a restart storm


def settings(tmp: Path, fg: dict, bg: dict, **defaults) -> Path:
    path = tmp / "runs.json"
    path.write_text(json.dumps({
        "name": "runs", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 300, **defaults},
        "workloads": {"fg": fg, "bg": bg},
        "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]}))
    return path


INTERLEAVED = {"method": "interleaved", "phase_s": 0.5, "settle_s": 0.1, "warmup_s": 0.3, "runs_per_config": 3}


def test_a_background_that_trains_a_moment_and_exits_0_is_a_crash_loop_not_a_restart_storm(pytester):
    path = settings(pytester.path, command("--protocol", "--steps", "60", "--step-s", "0.05"),
                    command("--protocol", "--steps", "2", "--step-s", "0.01"), restart_delay_s=0)
    result = run(pytester, path)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*background bg crash-looped: 3 consecutive runs that failed or ended before they were "
                                 "ready within 300 s, last: exited with code 0 * s after it was ready, less than 2 s "
                                 "and less than the * s it took to start: each run trains too little*"])
    saved = record(pytester.path)
    # three short runs in a row end it; on a loaded host one run can outlast its own start-up, which
    # the rule does not count as short, so a run or two more may come first: a handful, not a storm
    assert saved["complete"] is True and 3 <= saved["bg_runs"] <= 6
    assert jobs_started_under(pytester.path / "out") == []


def test_a_background_that_trains_long_enough_between_restarts_is_no_storm(pytester):
    path = settings(pytester.path, command("--protocol", "--steps", "60", "--step-s", "0.05"), command(*BG),
                    restart_delay_s=0)
    run(pytester, path).assert_outcomes(passed=1)
    assert record(pytester.path)["bg_runs"] >= 2


def test_progress_files_and_logs_made_sparse_terabytes_end_their_cases(pytester):
    """Each file goes sparse after the job's first step; the rest of the run is read past its 8 TiB."""
    sparse_log = {**command("--print-steps", "--steps", "15", "--step-s", "0.05", "--sparse", "log"),
                  "progress_pattern": r"step (?P<step>\d+)", "log_patterns": {"accuracy": r"Accuracy: ([0-9.]+)"}}
    short_bg = command("--protocol", "--steps", "20", "--step-s", "0.05")  # outlasts the 15-step foregrounds
    quick_phases = {**INTERLEAVED, "phase_s": 0.3, "settle_s": 0.05}  # what the 0.02 s steps' reports allow
    for fg, bg, defaults in ((command("--protocol", "--steps", "15", "--step-s", "0.05", "--sparse", "progress"),
                              short_bg, {}),
                             (sparse_log, short_bg, {}),
                             (command(*LONG, "--sparse", "progress"), command(*LONG, "--sparse", "log"), quick_phases)):
        result = run(pytester, settings(pytester.path, fg, bg, **defaults))
        result.assert_outcomes(passed=1)
        saved = record(pytester.path)
        notes = " ".join(saved["notes"].values())
        assert "bytes of progress file skipped unread" in notes or "bytes of log skipped unread" in notes, notes
        if fg is sparse_log:
            assert saved["perf"] == {"accuracy": 0.5}  # read from the log's end, not through its terabytes
        assert jobs_started_under(pytester.path / "out") == []


CLOCK_STEPS_BACK = """
import time

_real = time.time
_started = _real()


def _stepped():
    now = _real()
    return now - 3600 if now - _started > {after} else now  # an hour back, {after} s into the session


time.time = _stepped
"""


def test_a_wall_clock_set_back_an_hour_mid_case_neither_hangs_it_nor_moves_its_steps(pytester):
    pytester.makeconftest(CLOCK_STEPS_BACK.format(after=3))
    back = ["--clock-step-s", "-3600"]
    for defaults, fg, bg in ((INTERLEAVED, command(*LONG, *back), command(*LONG, *back)),
                             ({}, command("--protocol", "--steps", "80", "--step-s", "0.05", *back), command(*BG, *back))):
        result = run(pytester, settings(pytester.path, fg, bg, **defaults), "--gpu-pairs-min-efficiency", "0")
        result.assert_outcomes(passed=1)
        saved = record(pytester.path)
        assert saved["notes"].get("duration_basis", "").count("malformed") == 0
        if defaults:
            assert saved["n_rounds"] == 3 and saved["rounds_excluded"] == 0
            phases = [p for r in saved["rounds"] for p in r["phases"]]
            assert all(a["end"] <= b["switched_t"] for a, b in zip(phases, phases[1:]))
        timeline = saved["timeline"]
        assert timeline["case_end_t"] - timeline["case_start_t"] < 600  # not an hour in either direction
        assert jobs_started_under(pytester.path / "out") == []


HF_TRAINER = """
import itertools, sys, time
print("***** Running training *****", flush=True)
for i in itertools.count(1):
    time.sleep(0.05)
    print({"loss": 0.69, "learning_rate": 5e-05, "epoch": round(i * 0.0005, 4)}, flush=True)
"""


def test_progress_counted_in_epochs_settles_for_steps_not_for_epochs(pytester):
    fg = {"command": [sys.executable, "-c", HF_TRAINER], "progress_pattern": r"'epoch': (?P<epoch>[0-9.]+)"}
    result = run(pytester, settings(pytester.path, fg, command(*LONG), **INTERLEAVED), "--gpu-pairs-max-case-s", "60")
    result.assert_outcomes(passed=1)
    saved = record(pytester.path)
    assert saved["n_rounds"] == 3 and saved["stop_reason"] == "fixed 3 round(s)"
    assert saved["settle_s"] < 5  # two reports of the job, not two epochs (200 s at its pace)


RARE_REPORTS = ["--protocol", "--steps", "100000", "--step-s", "1.5"]


def test_the_case_cap_holds_inside_a_phase(pytester):
    """A job reporting every 1.5 s cannot hold a round in an 8 s cap: the case ends within the cap,
    whether the cap ends a phase or the phases the job needs are seen not to fit, and, having
    measured no round, it fails saying so instead of passing without a figure."""
    cap = 8
    result = run(pytester, settings(pytester.path, command(*RARE_REPORTS), command(*LONG), **INTERLEAVED),
                 "--gpu-pairs-max-case-s", str(cap))
    result.assert_outcomes(failed=1)
    saved = record(pytester.path)
    said = f"{saved['stop_reason']} {saved['failure']}"
    assert f"time cap {cap} s reached after " in said or "steps too slowly here for the case's time cap" in said
    assert saved["gpu_seconds"] <= cap + 1  # measured from the jobs' start to the last phase's end
    assert saved["concurrency_efficiency"] is None
    assert jobs_started_under(pytester.path / "out") == []
