"""No job outlives pytest, even one a signal cut off from its registration while it started: the
signal waits until the job is known, and the last sweep ends every process carrying this pytest's
job tag."""
import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pytest_gpu_pairs.run import jobs as jobs_module
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec, kill_all_jobs, live_jobs
from pytest_gpu_pairs.run.proctree import JOB_TAG_VAR

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def test_a_signal_that_lands_while_a_job_starts_waits_until_the_job_is_known(tmp_path, monkeypatch):
    started: list[int] = []
    real_popen = subprocess.Popen

    def popen_then_interrupted(*args, **kwargs):
        process = real_popen(*args, **kwargs)
        started.append(process.pid)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between the fork and the job's registration
        return process

    monkeypatch.setattr(jobs_module.subprocess, "Popen", popen_then_interrupted)
    spec = JobSpec("fg", "sleeper", SLEEPER, dict(os.environ), None, 60.0)
    job = JobProcess(spec, tmp_path / "fg.log", tmp_path / "fg.progress.jsonl")
    try:
        with pytest.raises(KeyboardInterrupt):
            job.start()
        monkeypatch.undo()
        assert len(started) == 1 and job in live_jobs()  # registered before the interrupt was delivered
        kill_all_jobs(grace_s=1.0)
        assert _wait_gone(started[0])
    finally:
        monkeypatch.undo()
        for pid in started:  # whatever failed above, nothing this test started outlives it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_process_with_this_pytests_job_tag_is_ended_by_the_last_sweep_and_no_other():
    mine = subprocess.Popen(SLEEPER, env={**os.environ, JOB_TAG_VAR: f"{os.getpid()}:untracked"},
                            start_new_session=True)
    other = subprocess.Popen(SLEEPER, env={**os.environ, JOB_TAG_VAR: "1:someone-else"}, start_new_session=True)
    try:
        time.sleep(0.5)  # both have read their environment
        assert kill_all_jobs(grace_s=1.0) >= 1
        assert _wait_gone(mine.pid)
        assert not _gone(other.pid)
    finally:
        for process in (mine, other):
            process.kill()
            process.wait()
