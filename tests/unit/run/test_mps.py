"""The MPS helpers that start nothing: finding the control program, seeing the system daemon, and
the client limits (integration/test_mps.py runs the daemon's lifecycle)."""
import os

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


def test_system_daemon_is_seen_only_while_alive(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert mps.system_daemon_pid() is None
    (tmp_path / mps.PID_FILE).write_text(f"{os.getpid()}\n")
    assert mps.system_daemon_pid() == os.getpid()
    (tmp_path / mps.PID_FILE).write_text("999999999\n")
    assert mps.system_daemon_pid() is None


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
