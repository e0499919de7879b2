"""Job processes and the background loop against real misbehaving processes (tests/support/fake_job.py).

Leftovers are counted twice, independently: by the pid files every process of a fake job writes,
and by the environment scan of ``support.helpers.jobs_started_under``.
"""
import json
import os
import signal
import sys
import time

import psutil
import pytest
from support.helpers import FAKE_JOB, alive_pids, jobs_started_under, wait_for

from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.run.background import BackgroundLoop, ReadinessWatch
from pytest_gpu_pairs.run.joblog import detect_oom
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec, flag_arguments, kill_all_jobs, live_jobs
from pytest_gpu_pairs.run.proctree import deferred_signals, reap_orphans


def spec(tmp_path, *args, timeout_s=60.0, ready_pattern=None, log_patterns=None, argv=None):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return JobSpec("fg", "fake", argv or [sys.executable, str(FAKE_JOB), "--pids", str(tmp_path / "pids"), *args],
                   env, str(tmp_path), timeout_s, ready_pattern, log_patterns or {}, protocol="--protocol" in args)


def job(tmp_path, *args, name="job", **kw) -> JobProcess:
    return JobProcess(spec(tmp_path, *args, **kw), tmp_path / f"{name}.log", tmp_path / f"{name}.progress.jsonl")


def assert_nothing_left(tmp_path):
    assert alive_pids(tmp_path / "pids") == []
    assert jobs_started_under(tmp_path) == []
    assert live_jobs() == []


def test_kill_takes_helpers_an_orphaned_setsid_grandchild_and_sigterm_ignorers(tmp_path):
    process = job(tmp_path, "--fault", "hang", "--ignore-term", "--children", "2", "--setsid-grandchild",
                  "--protocol").start()
    wait_for(lambda: len(alive_pids(tmp_path / "pids")) == 4, what="the job and its 3 helpers")
    started = time.monotonic()
    process.kill_tree(grace_s=0.5)
    assert time.monotonic() - started < 60  # the kill ends: SIGKILL after the grace, not a hang
    assert process.popen.returncode == -signal.SIGKILL
    assert_nothing_left(tmp_path)


def test_leftovers_of_a_job_that_exited_are_killed_and_logged(tmp_path):
    outcome = job(tmp_path, "--steps", "2", "--children", "1", "--setsid-grandchild").run()
    assert outcome.returncode == 0 and outcome.completed
    assert outcome.leftovers_killed == 2
    assert "leftovers_killed=2" in (tmp_path / "job.log").read_text()
    assert_nothing_left(tmp_path)


def test_a_hanging_job_times_out_and_is_killed_with_its_tree(tmp_path):
    outcome = job(tmp_path, "--fault", "hang", "--children", "1", "--protocol", timeout_s=2.0).run()
    assert outcome.timed_out and outcome.failed and not outcome.oom
    assert "timed out (limit 2 s) and was killed" in outcome.reason()
    assert outcome.progress.ready_t is not None
    assert_nothing_left(tmp_path)


def test_a_command_that_cannot_start_is_a_failed_outcome_not_an_exception(tmp_path):
    outcome = job(tmp_path, argv=["/no/such/train.sh", "--epochs", "1"]).run()
    assert outcome.failed and outcome.returncode is None
    assert outcome.reason().startswith("could not start: No such file or directory")
    assert "could not start" in (tmp_path / "job.log").read_text()
    assert live_jobs() == []


def test_oom_message_in_the_log_is_detected_with_its_line(tmp_path):
    outcome = job(tmp_path, "--fault", "oom", "--mem-mb", "600").run()
    assert outcome.oom and outcome.returncode == 1
    assert outcome.oom_message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 600 MiB")
    assert "out of memory" in outcome.reason()


def test_harness_lines_quoting_the_argv_never_count_as_oom(tmp_path):
    outcome = job(tmp_path, "--steps", "1", "--note", "CUDA out of memory").run()
    assert outcome.returncode == 0 and outcome.oom  # the job itself printed it
    assert outcome.oom_message.startswith("fake job: invocation 1")
    log = tmp_path / "only_header.log"
    log.write_text("# gpu-pairs: start argv=['train.py', '--note', 'OutOfMemoryError']\nfine\n")
    assert detect_oom(str(log), Progress()) is None


def test_a_hyperparameter_value_reaches_the_job_verbatim(tmp_path):
    hostile = "$(touch pwned); rm -rf . `touch pwned2` | cat"
    argv = [sys.executable, str(FAKE_JOB), "--steps", "1"] + flag_arguments({}, {"note": hostile})
    outcome = job(tmp_path, argv=argv).run()
    assert outcome.returncode == 0
    assert f"note: {hostile}\n" in (tmp_path / "job.log").read_text()
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_readiness_from_a_ready_pattern(tmp_path):
    process = job(tmp_path, "--steps", "40", "--step-s", "0.05", ready_pattern=r"^Epoch 1\b").start()
    watch = ReadinessWatch(process)
    wait_for(lambda: watch.check() is not None, what="ready_pattern")
    assert watch.basis == "ready_pattern" and watch.ready_t >= process.start_t
    process.kill_tree()


def test_readiness_fallback_first_output_then_alive_or_exit_zero(tmp_path):
    hanging = job(tmp_path, "--fault", "hang", name="alive").start()
    watch = ReadinessWatch(hanging, fallback_s=0.5)
    wait_for(lambda: watch.check() is not None, what="fallback readiness")
    assert watch.basis == "fallback" and watch.ready_t - watch.first_output_t >= 0.5
    hanging.kill_tree()
    quick = job(tmp_path, "--steps", "1", name="quick").start()
    watch = ReadinessWatch(quick, fallback_s=60)
    quick.wait(on_tick=watch.check)
    assert watch.check() == watch.first_output_t and watch.basis == "fallback"


def test_readiness_waits_for_the_protocol_when_the_job_speaks_it(tmp_path):
    """It prints long before its first step (a built-in builds its model first): no fallback."""
    process = job(tmp_path, "--protocol", "--steps", "3", "--step-s", "0.3").start()
    watch = ReadinessWatch(process, fallback_s=0.0)
    process.wait(on_tick=watch.check)
    watch.check()
    assert watch.basis == "protocol"
    assert watch.ready_t == Progress.read(process.progress_path).ready_t


def loop(tmp_path, *args, restart_delay_s=0.0, **kw):
    return BackgroundLoop(spec(tmp_path, *args), tmp_path / "bg", restart_delay_s, **kw)


def test_background_restarts_after_each_run_and_logs_every_run(tmp_path):
    bg = loop(tmp_path, "--protocol", "--steps", "3", "--step-s", "0.05", restart_delay_s=0.2).start()
    assert bg.wait_ready(60)
    wait_for(lambda: len(bg.runs) >= 2, what="two background runs")
    bg.stop()
    lines = [json.loads(line) for line in (tmp_path / "bg" / "bg-runs.jsonl").read_text().splitlines()]
    assert [line["run"] for line in lines] == list(range(1, len(bg.runs) + 1))
    assert all(line["exit_code"] == 0 and line["ready_basis"] == "protocol" for line in lines[:2])
    assert all(line["end_t"] > line["start_t"] for line in lines)
    assert lines[1]["start_t"] - lines[0]["end_t"] >= 0.2
    for line in lines:
        assert (tmp_path / "bg" / f"bg-run-{line['run']:03d}.log").exists()
    assert bg.snapshot().last_completed_metrics() == {"accuracy": 0.5}
    assert_nothing_left(tmp_path)


def test_crash_loop_stops_the_loop_with_the_reason(tmp_path):
    bg = loop(tmp_path, "--fault", "crash", crash_loop_failures=3).start()
    assert not bg.wait_ready(60)
    bg.stop()
    assert len(bg.runs) == 3 and all(r.outcome.failed for r in bg.runs)
    assert bg.failure.startswith("background fake crash-looped: 3 consecutive runs that failed or ended before")
    assert "exited with code 1" in bg.failure
    assert "crash-looped" in bg.not_ready_reason(60)


@pytest.mark.parametrize("code, why", [("print('hi')", "exited with code 0 before it was ready"),
                                       ("pass", "exited with code 0 without training anything")],
                         ids=["one line then exit 0", "exit 0 without a word"])
def test_a_background_that_exits_0_at_once_is_a_crash_loop(tmp_path, code, why):
    looping = BackgroundLoop(spec(tmp_path, argv=[sys.executable, "-c", code]), tmp_path / "bg", 0.0,
                             crash_loop_failures=3)
    looping.start()
    wait_for(lambda: not looping.running, what="the loop to give up")
    looping.stop()
    assert len(looping.runs) == 3 and all(r.ended_unready or r.outcome.failed for r in looping.runs)
    assert "crash-looped" in looping.failure and why in looping.failure


def test_failures_spread_over_time_are_not_a_crash_loop(tmp_path):
    bg = loop(tmp_path, "--fault", "crash", crash_loop_failures=2, crash_loop_window_s=0.01,
              restart_delay_s=0.1).start()
    wait_for(lambda: len(bg.runs) >= 3, what="three crashed runs")
    bg.stop()
    assert bg.failure is None and len(bg.snapshot().failures) >= 3


def test_oom_is_detected_in_every_background_run(tmp_path):
    bg = loop(tmp_path, "--fault", "oom", "--mem-mb", "10", crash_loop_failures=2).start()
    assert not bg.wait_ready(60)
    bg.stop()
    assert len(bg.snapshot().ooms) == 2 and "out of memory" in bg.failure


def test_a_background_that_never_gets_ready_is_explained(tmp_path):
    bg = loop(tmp_path, "--fault", "hang", "--protocol", "--step-s", "30").start()
    assert not bg.wait_ready(0.5)
    reason = bg.not_ready_reason(0.5)
    bg.stop()
    assert "did not become ready within 0.5 s" in reason and "progress protocol" in reason
    assert_nothing_left(tmp_path)


def test_kill_all_jobs_ends_every_live_tree(tmp_path):
    jobs = [job(tmp_path, "--fault", "hang", "--children", "1", name=f"j{i}").start() for i in range(2)]
    wait_for(lambda: len(alive_pids(tmp_path / "pids")) == 4, what="two jobs with a helper each")
    assert kill_all_jobs(grace_s=0.5) == 2
    assert all(j.popen.returncode is not None for j in jobs)
    assert_nothing_left(tmp_path)


def test_orphans_of_a_dead_pytest_are_reaped_by_the_next_run(tmp_path):
    """A job tagged as started by a pytest that no longer exists (pid 2**22 + 1 cannot be one)."""
    orphan_env = {**os.environ, "GPU_PAIRS_JOB": f"{2**22 + 1}:dead", "GPU_PAIRS_PROGRESS": str(tmp_path / "p")}
    import subprocess
    orphan = subprocess.Popen([sys.executable, str(FAKE_JOB), "--fault", "hang", "--pids", str(tmp_path / "pids")],
                              env=orphan_env, start_new_session=True)
    wait_for(lambda: alive_pids(tmp_path / "pids"), what="the orphan")
    assert reap_orphans(tmp_path / "elsewhere") == []
    assert reap_orphans(tmp_path, grace_s=1.0) == [orphan.pid]
    orphan.wait(timeout=10)
    assert alive_pids(tmp_path / "pids") == []


def test_signals_during_a_kill_are_held_and_delivered_after():
    """``raise_signal`` runs the Python-level handler before it returns, so the signal has surely
    arrived inside the block, whatever the machine's load: no sleep, no timing assumed."""
    done = []
    with pytest.raises(KeyboardInterrupt), deferred_signals():
        signal.raise_signal(signal.SIGINT)
        done.append("the kill finished")
    assert done == ["the kill finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _orphan(tmp_path, out_dir):
    """A hanging job tagged as started by a pytest that no longer exists, writing into ``out_dir``."""
    import subprocess

    env = {**os.environ, "GPU_PAIRS_JOB": f"{2**22 + 1}:dead",
           "GPU_PAIRS_PROGRESS": str(out_dir / "case" / "fg.progress.jsonl")}
    orphan = subprocess.Popen([sys.executable, str(FAKE_JOB), "--fault", "hang", "--pids", str(tmp_path / "pids")],
                              env=env, start_new_session=True)
    wait_for(lambda: alive_pids(tmp_path / "pids"), what="the orphan")
    return orphan


def test_orphan_reaping_compares_resolved_paths_component_by_component(tmp_path):
    (tmp_path / "main").mkdir()
    orphan = _orphan(tmp_path, tmp_path / "out" / "kill2")
    try:
        assert reap_orphans(tmp_path / "out" / "kill", grace_s=1.0) == []  # a prefix, not a parent folder
        assert alive_pids(tmp_path / "pids") == [orphan.pid]
        spelled_otherwise = tmp_path / "main" / ".." / "out" / "kill2"
        assert reap_orphans(spelled_otherwise, grace_s=1.0) == [orphan.pid]
        orphan.wait(timeout=30)
    finally:
        orphan.kill()
        orphan.wait()
    assert alive_pids(tmp_path / "pids") == []


AFFINITY_PROBE = ("import os, sys, threading, time\n"
                  "seen = []\n"
                  "t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
                  "t.start(); t.join()\n"
                  "print('main', sorted(os.sched_getaffinity(0)), 'thread', seen[0], flush=True)\n"
                  "time.sleep(float(sys.argv[1]))\n")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_pinned_job_and_the_threads_it_starts_run_only_on_its_cpus(tmp_path):
    from dataclasses import replace
    mine = os.sched_getaffinity(0)
    cpu = max(mine)
    pinned = replace(spec(tmp_path, argv=[sys.executable, "-c", AFFINITY_PROBE, "0"]), cpus=frozenset({cpu}))
    outcome = JobProcess(pinned, tmp_path / "job.log", tmp_path / "job.progress.jsonl").run()
    assert outcome.returncode == 0
    assert f"main [{cpu}] thread [{cpu}]" in (tmp_path / "job.log").read_text()
    assert os.sched_getaffinity(0) == mine  # the harness itself is left where it was
    assert_nothing_left(tmp_path)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two CPUs")
def test_pinning_the_tree_again_catches_a_thread_that_got_away(tmp_path):
    from dataclasses import replace
    mine = os.sched_getaffinity(0)
    cpu = max(mine)
    pinned = replace(spec(tmp_path, argv=[sys.executable, "-c", AFFINITY_PROBE, "30"]), cpus=frozenset({cpu}))
    process = JobProcess(pinned, tmp_path / "job.log", tmp_path / "job.progress.jsonl").start()
    try:
        assert wait_for(lambda: "main" in (tmp_path / "job.log").read_text(), 20)
        os.sched_setaffinity(process.pid, mine)
        process.pin_tree()
        assert os.sched_getaffinity(process.pid) == {cpu}
    finally:
        process.stop()
    assert_nothing_left(tmp_path)


def stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def trainer_pid(tmp_path) -> int:
    found = wait_for(lambda: list((tmp_path / "pids").glob("*.main")), what="the trainer's pid file")
    return int(found[0].read_text())


def test_a_pause_reaches_a_trainer_in_a_session_of_its_own_and_nothing_stays_stopped(tmp_path):
    """As torch's elastic launcher starts its workers: the trainer is not in the job's process group."""
    process = job(tmp_path, "--protocol", "--steps", "100000", "--step-s", "0.01", "--trainer-session").start()
    trainer = trainer_pid(tmp_path)
    wait_for(lambda: Progress.read(process.progress_path).steps, what="the trainer's first step")
    assert os.getsid(trainer) != os.getsid(process.pid)
    process.pause()
    wait_for(lambda: stopped(trainer) and stopped(process.pid), what="both processes stopped")
    size = os.path.getsize(process.progress_path)
    time.sleep(0.5)  # a stopped trainer writes nothing, however long it is left
    assert os.path.getsize(process.progress_path) == size
    process.resume()
    wait_for(lambda: os.path.getsize(process.progress_path) > size, what="the trainer to train again")
    process.pause()
    wait_for(lambda: stopped(trainer), what="the trainer stopped again")
    process.kill_tree(grace_s=0.5)  # a kill of a paused job continues it, so it can act on SIGTERM
    assert not stopped(trainer)
    assert_nothing_left(tmp_path)


def test_a_job_flooding_its_log_with_progress_lines_ends_on_time_and_leaves_nothing(tmp_path):
    """Hundreds of thousands of lines a second: the log follower reads bounded chunks and skips what
    it cannot catch up with, so the timeout, the kill and the last read all end."""
    flooding = spec(tmp_path, "--flood-s", "-1", timeout_s=1.5)
    flooding.progress_pattern = r"step (?P<step>\d+)"
    process = JobProcess(flooding, tmp_path / "flood.log", tmp_path / "flood.progress.jsonl")
    started = time.monotonic()
    outcome = process.run()
    assert time.monotonic() - started < 60  # the follower's last read is bounded: no hang
    assert outcome.timed_out and outcome.progress.source == "log" and outcome.progress.steps
    assert_nothing_left(tmp_path)
    (tmp_path / "flood.log").unlink()  # hundreds of megabytes


def test_a_background_that_exits_0_after_running_a_while_is_restarted_not_a_crash_loop(tmp_path):
    """A command workload without progress reports, as docs/settings.md describes: ready when it exits
    with code 0, here after its 2.5 s of work; every such run is a finished run."""
    code = "import time; print('training', flush=True); time.sleep(2.5); print('done', flush=True)"
    looping = BackgroundLoop(spec(tmp_path, argv=[sys.executable, "-c", code]), tmp_path / "bg", 0.0,
                             crash_loop_failures=2)
    looping.start()
    assert looping.wait_ready(60)
    wait_for(lambda: len(looping.runs) >= 2, what="two finished runs")
    looping.stop()
    assert looping.failure is None
    assert all(r.outcome.returncode == 0 and not r.ended_unready for r in looping.runs[:2])
    assert_nothing_left(tmp_path)
