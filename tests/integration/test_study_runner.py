"""``gpu-pairs study run`` on a small checkout of its own: one real pytest process per session,
resumed where it stopped, skipped once done, and ended with everything it started whatever happens."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
from support.helpers import H100_DATA, REPO, XDIST_WORKER_VARS, jobs_started_under, pair, write_settings

from pytest_gpu_pairs.studies.declaration import Study, find_study
from pytest_gpu_pairs.studies.runner import (
    Request,
    StudyRunError,
    narrowed,
    plan_sessions,
    run_study,
    run_to_the_end,
    sessions_left,
    study_status,
)

PASSING = "def test_ok():\n    pass\n"
SLEEPING = """import os, subprocess, sys, time
def test_sleeps():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["PIDS_FILE"], "w") as handle:
        handle.write(f"{os.getpid()} {child.pid}")
    time.sleep(600)
"""


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    for name in XDIST_WORKER_VARS:  # the sessions are pytest runs of their own, not workers of this one
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_suite.py").write_text(PASSING)
    write_settings(tmp_path / "s.json", [pair()])
    return tmp_path


def _study(**changes) -> Study:
    return Study.model_validate({"name": "tiny", "about": "a test", "reference": "reports/reference/tiny",
                                 "suite": "suite", "settings": ["s.json"], "collate": "verdicts",
                                 "variants": [{"name": "main", "folder": "session-{n}", "sessions": 2}], **changes})


def test_sessions_run_once_and_a_second_run_skips_them(checkout):
    out, said = checkout / "out", []
    assert run_study(_study(), checkout, out, Request(device="cpu"), say=said.append) == 0
    runs = json.loads((out / "runs.json").read_text())
    assert sorted(runs) == ["session-1", "session-2"] and all(r[0]["exit"] == 0 for r in runs.values())
    assert "1 passed" in (out / runs["session-1"][0]["log"]).read_text()
    said.clear()
    assert run_study(_study(), checkout, out, Request(device="cpu"), say=said.append) == 0
    assert said == ["session-1: done earlier, skipped", "session-2: done earlier, skipped"]
    assert [s.state for s in study_status(_study(), checkout, out, Request(device="cpu"))] == ["done (pytest exit 0)"] * 2


def test_a_quick_try_with_k_completes_only_what_it_selected_and_the_whole_run_is_resumed(checkout):
    (checkout / "suite" / "test_suite.py").write_text(PASSING + "\ndef test_other():\n    pass\n")
    out, said = checkout / "out", []
    study = _study(variants=[{"name": "main", "folder": "session-{n}", "sessions": 1}])
    assert run_study(study, checkout, out, Request(device="cpu", select="test_ok"), say=said.append) == 0
    assert "1 passed, 1 deselected" in (out / json.loads((out / "runs.json").read_text())["session-1"][0]["log"]).read_text()
    state = study_status(study, checkout, out, Request(device="cpu"))[0].state
    assert state.startswith("partly done (its last run selected -k 'test_ok')")
    assert sessions_left(study_status(study, checkout, out, Request(device="cpu"))) == 1
    assert study_status(study, checkout, out, Request(device="cpu", select="test_ok"))[0].state == "done (pytest exit 0)"
    said.clear()
    assert run_study(study, checkout, out, Request(device="cpu"), say=said.append) == 0
    runs = json.loads((out / "runs.json").read_text())["session-1"]
    assert len(runs) == 2 and "-k" not in runs[1]["argv"] and not any("done earlier" in s for s in said)
    said.clear()
    assert run_study(study, checkout, out, Request(device="cpu", select="test_other"), say=said.append) == 0
    assert said == ["session-1: done earlier, skipped"]  # the whole selection ran to the end: nothing narrower is left
    assert sessions_left(study_status(study, checkout, out, Request(device="cpu"))) == 0


def test_a_session_that_stopped_short_stops_the_run_and_is_resumed_next_time(checkout):
    out, said = checkout / "out", []
    (checkout / "suite" / "test_suite.py").write_text("def test_broken(:\n")
    assert run_study(_study(), checkout, out, Request(device="cpu"), say=said.append) == 2
    assert "session-2" not in json.loads((out / "runs.json").read_text())
    assert study_status(_study(), checkout, out, Request(device="cpu"))[0].state.startswith("stopped short (pytest exit 2)")
    (checkout / "suite" / "test_suite.py").write_text(PASSING)
    assert run_study(_study(), checkout, out, Request(device="cpu"), say=said.append) == 0
    runs = json.loads((out / "runs.json").read_text())
    assert [a["exit"] for a in runs["session-1"]] == [2, 0] and [a["exit"] for a in runs["session-2"]] == [0]
    assert "--gpu-pairs-resume" in runs["session-1"][1]["argv"]


class _Stop(Exception):
    """Stands for whatever ends the runner early (Ctrl-C, SIGTERM, an error) in the middle of a session."""


def test_an_interrupted_run_ends_its_pytest_and_everything_that_started(checkout, monkeypatch):
    (checkout / "suite" / "test_suite.py").write_text(SLEEPING)
    pids_file = checkout / "pids"
    monkeypatch.setenv("PIDS_FILE", str(pids_file))
    session = plan_sessions(_study(), checkout, checkout / "out", Request(device="cpu"))[0]
    previous = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()

    def stop_once_started(signum, frame):
        if pids_file.exists() or time.monotonic() - started > 120:
            raise _Stop()
        signal.setitimer(signal.ITIMER_REAL, 0.2)

    signal.signal(signal.SIGALRM, stop_once_started)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(_Stop):
            run_to_the_end(list(session.argv), checkout, checkout / "log.txt")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 2
    assert [p for p in pids if _alive(p)] == []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_on_the_cpu_gpu_options_are_dropped_and_said_and_gpu_only_variants_not_run(checkout):
    study = _study(gpu_options=["--gpu-pairs-gpu-memory-mb", "10240"], variants=[
        {"name": "timeslice", "folder": "session-1"},
        {"name": "mps", "folder": "mps", "gpu_options": ["--gpu-pairs-sharing", "mps"], "needs_gpu": "MPS needs a GPU"}])
    on_cpu = plan_sessions(study, checkout, checkout / "out", Request(device="cpu", scale=0.01, select="g01"))
    assert "--gpu-pairs-gpu-memory-mb" not in on_cpu[0].argv and on_cpu[0].dropped == ("--gpu-pairs-gpu-memory-mb", "10240")
    assert on_cpu[1].not_here == "MPS needs a GPU"
    argv = on_cpu[0].argv
    assert argv[argv.index("--gpu-pairs-scale") + 1] == "0.01" and argv[argv.index("-k") + 1] == "g01"
    on_gpu = plan_sessions(study, checkout, checkout / "out", Request(device="cuda"))
    assert "10240" in on_gpu[0].argv and "mps" in on_gpu[1].argv and on_gpu[1].not_here is None


def test_a_users_selection_narrows_the_variants_and_collects_only_its_cases(tmp_path):
    """``--variant hp02 -k lr_min`` once replaced the variant's own selection, so hp01's and hp03's
    lr_min cases ran into hp02's folder."""
    session = plan_sessions(find_study("hp_study"), REPO, tmp_path, Request(device="cpu", variant="hp02", select="lr_min"))[0]
    argv = list(session.argv)
    assert argv[argv.index("-k") + 1] == "(hp02) and (lr_min)"
    settings = argv[argv.index("--gpu-pairs-settings") + 1]
    collected = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--collect-only",
                                "-q", "--gpu-pairs-settings", settings, "-k", argv[argv.index("-k") + 1]],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert ids and all("[hp02-" in i and "lr_min" in i for i in ids), collected.stdout[-2000:]


@pytest.mark.parametrize("declared, asked, expected", [
    ("hp02", None, "hp02"), (None, "g01", "g01"), (None, None, None), ("a or b", "c", "(a or b) and (c)")])
def test_narrowed_keeps_either_alone_and_joins_both(declared, asked, expected):
    assert narrowed(declared, asked) == expected


def test_a_checkout_without_the_suite_or_an_unknown_variant_is_one_clear_line(checkout, tmp_path):
    with pytest.raises(StudyRunError, match="suite is not under"):
        plan_sessions(_study(), tmp_path / "elsewhere", tmp_path / "out", Request())
    with pytest.raises(StudyRunError, match="no variant 'nope'; its variants: main"):
        plan_sessions(_study(), checkout, tmp_path / "out", Request(variant="nope"))


def test_a_study_that_is_not_run_here_says_why(checkout):
    study = _study(not_run="its steps measure the harness itself", settings=[])
    with pytest.raises(StudyRunError, match="its steps measure the harness itself"):
        run_study(study, checkout, checkout / "out", Request())
    assert not (checkout / "out").exists()


def test_no_process_is_left_behind_by_a_run(checkout):
    before = {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}
    assert run_study(_study(), checkout, checkout / "out", Request(device="cpu"), say=lambda _: None) == 0
    after = {p.pid for p in psutil.Process(os.getpid()).children(recursive=True) if _alive(p.pid)}
    assert after - before == set()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_study_run_says_how_to_resume_in_one_line_and_leaves_nothing_running(sig, tmp_path):
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in XDIST_WORKER_VARS}
    runner = subprocess.Popen([sys.executable, "-m", "pytest_gpu_pairs.cli", "study", "run", "verdicts", "--device",
                               "cpu", "--scale", "0.01", "-k", "g01", "--sessions", "1", "--out", str(out)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in runner.stdout:
            if "pytest started" in line:
                break
        time.sleep(2)
        runner.send_signal(sig)
        _, err = runner.communicate(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    assert runner.returncode == 130
    assert err.strip().splitlines() == ["gpu-pairs study: verdicts stopped; run the same command again to resume"]
    assert jobs_started_under(out) == []


def test_status_says_running_while_a_pytest_session_holds_the_folder(checkout):
    """A session whose end is not yet in runs.json but whose folder is locked by a live session is running."""
    out = checkout / "out"
    folder = out / "session-1"
    folder.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\nfrom pathlib import Path\nfrom pytest_gpu_pairs.run.outdir import OutputFolder\n"
        f"held = OutputFolder(Path({str(folder)!r}))\nheld.claim()\nprint('held', flush=True)\ntime.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        state = study_status(_study(), checkout, out, Request(device="cpu"))[0].state
        assert state.startswith(f"running (pid {holder.pid} since ")
    finally:
        holder.kill()
        holder.wait()
    assert study_status(_study(), checkout, out, Request(device="cpu"))[0].state == "not started"


def test_status_says_a_session_whose_records_were_copied_in_without_its_runs_was_begun_elsewhere(checkout):
    """A results folder carried from another machine holds records but no attempt of this runner's."""
    out = checkout / "out"
    shutil.copytree(H100_DATA / "run", out / "session-1")
    state = study_status(_study(), checkout, out, Request(device="cpu"))[0]
    assert state.state == "begun elsewhere (records here, no attempt in runs.json); run again to resume"
    assert state.complete == 2 and sessions_left([state]) == 1


LEFT_OUT_FOR_THE_LIMIT = """import os, pytest
def test_left_out(request):
    with open(os.environ["LIMITS_FILE"], "a") as handle:
        handle.write(f"{request.config.getoption('gpu_pairs_time_limit')}\\n")
    pytest.exit("left out for the time limit", returncode=2)
"""


def test_each_session_is_given_what_is_left_of_the_time_limit_and_a_stop_for_it_does_not_end_the_run(checkout, monkeypatch):
    (checkout / "suite" / "test_suite.py").write_text(LEFT_OUT_FOR_THE_LIMIT)
    monkeypatch.setenv("LIMITS_FILE", str(checkout / "limits.txt"))
    out, said = checkout / "out", []
    assert run_study(_study(), checkout, out, Request(device="cpu", time_limit_s=3600.0), say=said.append) == 2
    limits = [float(line) for line in (checkout / "limits.txt").read_text().split()]
    assert len(limits) == 2 and 3000 < limits[1] <= limits[0] <= 3600  # the second session was given what was left
    assert said[-1] == "gpu-pairs study: tiny stopped at its time limit; run the same command again to resume"
    states = study_status(_study(), checkout, out, Request(device="cpu"))
    assert [s.state for s in states] == ["stopped short (pytest exit 2); run again to resume"] * 2


def test_no_session_starts_once_the_time_limit_has_passed(checkout):
    out, said = checkout / "out", []
    assert run_study(_study(), checkout, out, Request(device="cpu", time_limit_s=0.5), say=said.append) == 2
    assert said[:2] == ["session-1: not started, the time limit has passed",
                        "session-2: not started, the time limit has passed"]
    assert not (out / "runs.json").exists()


@pytest.mark.parametrize("option", ["--gpu-pairs-plan", "--collect-only", "--co"])
def test_a_session_option_that_measures_nothing_is_refused_before_anything_runs(tmp_path, option):
    """Such a session would end with exit 0 and be taken as done, its cases never measured."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.cli", "study", "run", "verdicts", "--out", str(out),
                           "--device", "cpu", f"--pytest-arg={option}"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.strip().startswith(f"gpu-pairs study: error: --pytest-arg={option}: a study's sessions measure")
