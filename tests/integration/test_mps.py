"""The private MPS daemon's lifecycle, with a stand-in control program at the process boundary."""
import stat
import sys

import pytest
from support.helpers import mps_processes

from pytest_gpu_pairs.run import mps
from pytest_gpu_pairs.run.mps import MpsDaemon, MpsUnavailable, live_daemons, stop_all_daemons


def test_daemon_runs_in_private_dirs_and_stops_with_its_server(fake_mps_control, tmp_path):
    daemon = MpsDaemon([str(fake_mps_control)], tmp_path / "log").start()
    try:
        pipe = daemon.pipe_dir
        assert stat.S_IMODE(pipe.stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "log").stat().st_mode) == 0o700
        assert str(pipe) != mps.SYSTEM_PIPE_DIRECTORY and daemon in live_daemons()
        probe = daemon.probe()
        assert probe["control_pid"] == daemon.pid and len(probe["server_pids"]) == 1
        assert len(mps_processes(pipe)) == 2  # the control daemon and its server
        assert daemon.client_env() == {"CUDA_MPS_PIPE_DIRECTORY": str(pipe),
                                       "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "log")}
    finally:
        problem = daemon.stop()
    assert problem is None
    assert mps_processes(pipe) == [] and not pipe.exists()
    assert daemon not in live_daemons() and not daemon.running
    assert "command 'quit'" in (tmp_path / "log" / "control.log").read_text()


def test_failed_start_gives_the_reason_and_leaves_nothing(fake_mps_control, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAIL", "1")
    daemon = MpsDaemon([str(fake_mps_control)], tmp_path / "log")
    with pytest.raises(MpsUnavailable) as info:
        daemon.start()
    message = str(info.value)
    assert "exited with code 1" in message and "cannot start the daemon" in message
    assert "no CUDA-capable device" in message  # the tail of control.log
    assert not daemon.running and live_daemons() == [] and not daemon.pipe_dir.exists()


def test_a_daemon_that_ignores_quit_is_killed_and_said_so(fake_mps_control, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_IGNORE_QUIT", "1")
    daemon = MpsDaemon([str(fake_mps_control)], tmp_path / "log", stop_timeout_s=1.0).start()
    pipe = daemon.pipe_dir
    problem = daemon.stop()
    assert "did not quit" in problem and "killed" in problem
    assert mps_processes(pipe) == []


def test_stop_all_daemons_reaches_every_running_daemon(fake_mps_control, tmp_path):
    daemons = [MpsDaemon([str(fake_mps_control)], tmp_path / f"log{i}").start() for i in range(2)]
    pipes = [d.pipe_dir for d in daemons]
    assert stop_all_daemons() == 2
    assert all(mps_processes(p) == [] for p in pipes) and live_daemons() == []


def _client_refused_until(attempt: int, counter) -> list[str]:
    """A stand-in CUDA client refused with error 807 until its ``attempt``-th start."""
    code = (f"import pathlib, sys; c = pathlib.Path({str(counter)!r}); n = int(c.read_text() or 0) + 1 "
            f"if c.exists() else 1; c.write_text(str(n)); "
            f"sys.exit('cuCtxCreate failed with CUresult 807') if n < {attempt} else None; "
            "print('ok', flush=True); sys.stdin.read()")
    return [sys.executable, "-c", code]


def test_a_round_waits_until_the_server_accepts_clients_again(fake_mps_control, tmp_path):
    daemon = MpsDaemon([str(fake_mps_control)], tmp_path / "log").start()
    try:
        waited = daemon.wait_ready(_client_refused_until(3, tmp_path / "n"), timeout_s=20, pause_s=0.05)
    finally:
        daemon.stop()
    assert waited["mps_ready_attempts"] == 3 and "mps_not_ready" not in waited
    assert "CUresult 807" in waited["mps_refused"]  # why the round had to wait stays on record
    assert waited["mps_check_start_t"] <= waited["mps_ready_t"]


def test_a_server_that_never_gets_ready_ends_the_wait_with_its_error(fake_mps_control, tmp_path):
    daemon = MpsDaemon([str(fake_mps_control)], tmp_path / "log").start()
    try:
        waited = daemon.wait_ready(_client_refused_until(10**6, tmp_path / "n"), timeout_s=1.0, pause_s=0.1)
    finally:
        daemon.stop()
    assert waited["mps_ready_t"] is None and waited["mps_ready_attempts"] >= 1
    assert "CUresult 807" in waited["mps_not_ready"]
    assert int((tmp_path / "n").read_text()) == waited["mps_ready_attempts"]


def test_a_pinned_workers_daemon_and_its_server_see_its_gpu_alone(fake_mps_control, tmp_path):
    """Under pytest-xdist each worker's daemon manages the worker's GPU only, as its jobs see it."""
    import psutil

    daemon = MpsDaemon([str(fake_mps_control)], tmp_path / "log",
                       device_env={"CUDA_VISIBLE_DEVICES": "GPU-worker-1"}).start()
    try:
        processes = mps_processes(daemon.pipe_dir)
        assert len(processes) == 2 and daemon.pid in [p.pid for p in processes]
        assert all(p.environ().get("CUDA_VISIBLE_DEVICES") == "GPU-worker-1" for p in processes)
        assert "CUDA_VISIBLE_DEVICES" not in daemon.client_env()  # the jobs get it from the session
    finally:
        assert daemon.stop() is None
    assert all(not psutil.pid_exists(p.pid) or p.status() == psutil.STATUS_ZOMBIE for p in processes)
