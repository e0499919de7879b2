"""The MPS helpers that start nothing: finding the control program, seeing the system daemon, and
the client limits (integration/test_mps.py runs the daemon's lifecycle)."""
import os
import signal
import stat
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import MpsLimits
from pytest_gpu_pairs.run import mps
from pytest_gpu_pairs.run.mps import MpsUnavailable, find_control


def test_a_missing_control_program_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    with pytest.raises(MpsUnavailable, match="not an executable file"):
        find_control(str(tmp_path / "nope"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(mps, "KNOWN_LOCATIONS", (str(tmp_path),))
    with pytest.raises(MpsUnavailable, match="nvidia-cuda-mps-control not found on PATH"):
        find_control(None)


@pytest.fixture
def control_daemon(tmp_path):
    """A live process that is an MPS control daemon as far as its name goes."""
    program = tmp_path / "bin" / mps.CONTROL_NAME
    program.parent.mkdir()
    program.write_text("#!/bin/sh\nsleep 600\nexit 0\n")
    program.chmod(0o755)
    process = subprocess.Popen([str(program)], start_new_session=True)
    yield process.pid
    os.killpg(process.pid, signal.SIGKILL)  # the shell and its sleep: killing the shell alone orphans the sleep
    process.wait()


def test_system_daemon_is_seen_only_while_alive(tmp_path, monkeypatch, control_daemon):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert mps.system_daemon_pid() is None
    (tmp_path / mps.PID_FILE).write_text(f"{control_daemon}\n")
    assert mps.system_daemon_pid() == control_daemon
    (tmp_path / mps.PID_FILE).write_text("999999999\n")
    assert mps.system_daemon_pid() is None


@pytest.mark.parametrize("pid", [1, os.getpid()], ids=["init", "a process that is no daemon"])
def test_a_stale_pid_file_naming_another_process_is_no_daemon(tmp_path, monkeypatch, pid):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    (tmp_path / mps.PID_FILE).write_text(f"{pid}\n")
    assert mps.system_daemon_pid() is None


def test_a_pid_file_that_is_a_symlink_is_not_followed(tmp_path, monkeypatch, control_daemon):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    (tmp_path / "elsewhere").write_text(f"{control_daemon}\n")
    (tmp_path / mps.PID_FILE).symlink_to(tmp_path / "elsewhere")
    assert mps.system_daemon_pid() is None


def test_the_log_folder_is_created_0700_in_one_step(tmp_path):
    folder = mps._private_dir(tmp_path / "out" / "_mps")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 & ~_umask()
    assert mps._private_dir(folder) == folder  # the folder this user made is used again


def _umask() -> int:
    from pytest_gpu_pairs.record.store import _umask

    return _umask() & 0o077


@pytest.mark.parametrize("plant", ["symlink", "open mode", "planted control.log link", "a file"])
def test_a_log_folder_this_user_did_not_make_private_is_refused(tmp_path, plant):
    folder = tmp_path / "out" / "_mps"
    folder.parent.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    mode_before = stat.S_IMODE(target.stat().st_mode)
    if plant == "symlink":
        folder.symlink_to(target)
    elif plant == "a file":
        folder.write_text("")
    else:
        folder.mkdir(mode=0o700)
        if plant == "open mode":
            folder.chmod(0o777)
        else:
            (folder / "control.log").symlink_to(target / "victim")
    with pytest.raises(MpsUnavailable, match="refusing the MPS log folder"):
        mps._private_dir(folder)
    assert stat.S_IMODE(target.stat().st_mode) == mode_before and list(target.iterdir()) == []


def test_client_limits_use_the_documented_variables():
    assert MpsLimits(50, 4096).env() == {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
                                         "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4096M"}
    assert MpsLimits().env() == {}


@given(cli=st.tuples(st.none() | st.integers(1, 100), st.none() | st.integers(1, 10**6)),
       job=st.none() | st.tuples(st.none() | st.integers(1, 100), st.none() | st.integers(1, 10**6)))
def test_command_line_limits_beat_the_job_settings_one_by_one(cli, job):
    merged = MpsLimits(*cli).merged_over(MpsLimits(*job) if job else None)
    for index, key in enumerate(("active_thread_percentage", "pinned_mem_limit_mb")):
        expected = cli[index] if cli[index] is not None else (job[index] if job else None)
        assert getattr(merged, key) == expected


SERVER_LINES = [  # as an H200's MPS server wrote them when one client faulted
    "[2026-11-30 07:18:14.098 Server   980] Client {PID: 1481, Context ID: 1} exiting. Number of active client contexts is 4.\n",
    "[2026-11-30 07:18:14.309 Server   980] Client {PID: 1484, Context: 1} encountered a fatal GPU error.\n",
    "[2026-11-30 07:18:14.309 Server   980] Server is handling a fatal GPU error.\n",
    "[2026-11-30 07:18:14.309 Server   980] Client {PID: 1482, Context ID: 1} on device 0 to be torn down\n",
]


def test_a_fatal_gpu_error_is_read_from_the_server_log_written_since_the_case_began(tmp_path):
    daemon = mps.MpsDaemon(["nvidia-cuda-mps-control"], tmp_path)
    log = tmp_path / "server.log"
    log.write_text("[2026-11-30 07:10:00.000 Server   980] Client encountered a fatal GPU error.\n")
    offset = daemon.server_log_size()
    assert daemon.fatal_errors_since(offset) == []
    with log.open("a") as handle:
        handle.writelines(SERVER_LINES)
    assert daemon.fatal_errors_since(offset) == [SERVER_LINES[1].strip(), SERVER_LINES[2].strip()]
    end = daemon.server_log_size()
    log.write_text(SERVER_LINES[2])  # a new log, shorter than where the old one ended: read from its start
    assert daemon.fatal_errors_since(end) == [SERVER_LINES[2].strip()]


def test_a_server_log_that_is_a_symlink_or_missing_says_nothing(tmp_path):
    daemon = mps.MpsDaemon(["nvidia-cuda-mps-control"], tmp_path)
    assert daemon.server_log_size() == 0 and daemon.fatal_errors_since(0) == []
    elsewhere = tmp_path / "elsewhere.log"
    elsewhere.write_text("".join(SERVER_LINES))
    (tmp_path / "server.log").symlink_to(elsewhere)
    assert daemon.fatal_errors_since(0) == []


def test_a_failed_mps_case_names_the_servers_fault_and_a_time_sliced_one_names_nothing():
    from pytest_gpu_pairs.run.sharing import CaseSharing

    faulted = CaseSharing("mps", faults=lambda: [line.strip() for line in SERVER_LINES[1:3]])
    cause = faulted.failure_cause()
    assert cause.startswith("the MPS server reported a fatal GPU error while the case ran and tore down its clients")
    assert "(2 line(s) in the daemon's server.log, the first: " in cause and "PID: 1484" in cause
    assert CaseSharing("mps", faults=lambda: []).failure_cause() is None
    assert CaseSharing("timeslice").failure_cause() is None
