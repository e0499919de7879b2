"""One Ctrl-C ends the session in every phase of a case: a solo baseline, the background's
readiness wait, an epoch round, an interleaved case's warm-up and its rounds, and under pytest-xdist.

pytest is started with SIGINT ignored, as a script that puts it in the background starts it (and as
the CI runner starts this suite): the plugin must make the first SIGINT count there too. Each test
waits until the phase is reached (read from the files and processes the case leaves, never from a
clock), counts the jobs' processes, sends one SIGINT, and checks that pytest ended as interrupted
with the command that resumes, that the case's result.json says it was cut, and that no process
of any job is left.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from support.helpers import SUITE, alive_pids, jobs_started_under, wait_for

from integration.test_supervision import cli_args, pair, workload

CASE = "g01-trainer+loader-default-concurrent"
QUICK = {"protocol": True, "steps": 5, "step_s": 0.05, "children": 1}
LONG = {"protocol": True, "steps": 100000, "step_s": 0.05, "children": 1}


def hangs_after_its_first_run(tmp: Path, role: str, protocol: bool = True) -> dict:
    """A job whose first run (its solo baseline) ends, and whose later runs hang after step 1;
    without the protocol it is ready only at its ready_pattern."""
    return {**QUICK, "protocol": protocol, "fault": "hang", "fault_runs": "2-", "state": str(tmp / f"{role}-state")}


@pytest.fixture(autouse=True)
def _standalone(standalone_pytest):
    """pytest started here runs as a user's would, not as a worker of this suite's xdist."""


def start(tmp: Path, fg: dict, bg: dict, bg_ready_pattern=None, **defaults) -> subprocess.Popen:
    (tmp / "test_suite.py").write_text(SUITE)
    for hps in (fg, bg):
        hps["pids"] = str(tmp / "pids")
    settings = tmp / "s.json"
    settings.write_text(json.dumps({
        "name": "s", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 600, **defaults},
        "workloads": {"trainer": workload(tmp), "loader": workload(tmp, bg_ready_pattern)},
        "pairs": [pair("g01", fg, bg)]}))
    code = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "sys.exit(pytest.console_main())")
    with open(tmp / "pytest.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-c", code, *cli_args(tmp, settings)], cwd=tmp, stdout=log,
                                stderr=subprocess.STDOUT)


def has(path: Path, text: str) -> bool:
    return path.is_file() and text in path.read_text(errors="replace")


def paused_job(out: Path) -> bool:
    """A job stopped by SIGSTOP: an interleaved case is in the solo phase of the other job."""
    for process in jobs_started_under(out):
        try:
            if process.status() == psutil.STATUS_STOPPED:
                return True
        except psutil.Error:
            continue
    return False


def interrupt_when(tmp: Path, pytest_process: subprocess.Popen, reached, what: str) -> str:
    """One SIGINT once ``reached()``; pytest's output after it ended."""
    out = tmp / "out"
    try:
        wait_for(lambda: pytest_process.poll() is None and reached(out), timeout_s=300, what=what)
        running = jobs_started_under(out)
        assert len(running) >= 2, f"{what}: expected a job and its helper to interrupt, found {running}"
        pytest_process.send_signal(signal.SIGINT)
        assert pytest_process.wait(timeout=120) == pytest.ExitCode.INTERRUPTED, (tmp / "pytest.log").read_text()
    finally:
        end_what_is_left(pytest_process, out)
    return (tmp / "pytest.log").read_text()


def end_what_is_left(pytest_process: subprocess.Popen, out: Path) -> None:
    """A test that failed leaves nothing running: pytest, then any job it left behind."""
    if pytest_process.poll() is None:
        pytest_process.kill()
        pytest_process.wait()
    for process in jobs_started_under(out):
        for member in [process, *process.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                member.kill()


def assert_ended_with_the_resume_command(tmp: Path, log: str) -> None:
    assert f"interrupted (incomplete result.json): {CASE}" in log
    assert "to finish the rest without repeating finished cases: pytest " in log and "--gpu-pairs-resume" in log
    record = json.loads((tmp / "out" / CASE / "result.json").read_text())
    assert record["complete"] is False and "interrupted by Ctrl-C or SIGTERM" in record["interrupted"]
    assert alive_pids(tmp / "pids") == [], "processes of fake jobs are still alive"
    assert jobs_started_under(tmp / "out") == [], "job processes still run"


def test_one_sigint_during_a_solo_baseline(tmp_path):
    process = start(tmp_path, dict(LONG), dict(QUICK))
    log = interrupt_when(tmp_path, process, lambda out: any(has(p, '"step"') for p in out.glob("_solo/*/fg.progress.jsonl")),
                         "the foreground's solo baseline to train")
    assert_ended_with_the_resume_command(tmp_path, log)


def test_one_sigint_while_the_background_is_awaited(tmp_path):
    bg = hangs_after_its_first_run(tmp_path, "bg", protocol=False)  # alive after its solo baseline, never ready
    process = start(tmp_path, dict(QUICK), bg, bg_ready_pattern=r"^never printed")
    log = interrupt_when(tmp_path, process, lambda out: has(out / CASE / "bg-run-001.log", "Epoch 1 started"),
                         "the background's first run of the round")
    assert not has(tmp_path / "out" / CASE / "fg.progress.jsonl", '"step"')  # held at its gate: bg never ready
    assert_ended_with_the_resume_command(tmp_path, log)


def test_one_sigint_during_an_epoch_round(tmp_path):
    process = start(tmp_path, hangs_after_its_first_run(tmp_path, "fg"), hangs_after_its_first_run(tmp_path, "bg"))
    log = interrupt_when(tmp_path, process, lambda out: has(out / CASE / "fg.progress.jsonl", '"ready"'),
                         "the foreground of the round to train")
    assert_ended_with_the_resume_command(tmp_path, log)


def test_one_sigint_during_an_interleaved_warm_up(tmp_path):
    process = start(tmp_path, dict(LONG), dict(LONG), method="interleaved", warmup_s=3600)
    log = interrupt_when(tmp_path, process,
                         lambda out: all(has(out / CASE / f"{role}.progress.jsonl", '"step"') for role in ("fg", "bg")),
                         "both jobs of the interleaved case to train")
    assert_ended_with_the_resume_command(tmp_path, log)


def test_one_sigint_during_interleaved_rounds(tmp_path):
    process = start(tmp_path, dict(LONG), dict(LONG), method="interleaved", warmup_s=0.5, runs_per_config=1000)
    log = interrupt_when(tmp_path, process, paused_job, "a solo phase of the interleaved rounds")
    assert_ended_with_the_resume_command(tmp_path, log)


@pytest.mark.parametrize("signal_to", [lambda p: os.killpg(p.pid, signal.SIGINT), lambda p: p.send_signal(signal.SIGINT)],
                         ids=["terminal-ctrl-c", "controller-only"])
def test_ctrl_c_under_xdist_ends_every_worker_and_job(tmp_path, signal_to):
    """A terminal's Ctrl-C reaches the whole foreground process group, the controller and the xdist
    workers (the jobs run in sessions of their own); a ``kill -INT`` reaches the controller alone.
    Either way the worker's case is recorded as cut and every job of it is ended."""
    (tmp_path / "test_suite.py").write_text(SUITE)
    fg, bg = dict(LONG), dict(LONG)
    for hps in (fg, bg):
        hps["pids"] = str(tmp_path / "pids")
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps({
        "name": "s", "defaults": {"method": "interleaved", "warmup_s": 0.5, "runs_per_config": 1000,
                                  "restart_delay_s": 0.1, "timeout_s": 600},
        "workloads": {"trainer": workload(tmp_path), "loader": workload(tmp_path)},
        "pairs": [pair("g01", fg, bg)]}))
    with open(tmp_path / "pytest.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "pytest", *cli_args(tmp_path, settings), "-n", "2"],
                                   cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    out = tmp_path / "out"
    try:
        wait_for(lambda: process.poll() is None and paused_job(out), timeout_s=300,
                 what="a solo phase of the interleaved rounds in a worker")
        assert len(jobs_started_under(out)) >= 2
        signal_to(process)
        assert process.wait(timeout=120) == pytest.ExitCode.INTERRUPTED, (tmp_path / "pytest.log").read_text()
    finally:
        end_what_is_left(process, out)
    record = json.loads((out / CASE / "result.json").read_text())
    assert record["complete"] is False and "interrupted by Ctrl-C or SIGTERM" in record["interrupted"]
    assert alive_pids(tmp_path / "pids") == [], "processes of fake jobs are still alive"
    assert jobs_started_under(out) == [], "job processes still run"
