"""The sharing dimension with a stand-in MPS control program: the manager that brings MPS up and
down, and the plugin's options, skips and exits (failure, Ctrl-C, SIGTERM)."""
import json
import sys
from dataclasses import replace

import pytest
from support.helpers import mps_processes, pair

from pytest_gpu_pairs.experiment.cases import MpsLimits, expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.run.sharing import SharingManager, SharingUnavailable

# A stand-in CUDA client: it must be handed the daemon's pipe directory, then holds on until stdin closes.
FAKE_CLIENT = [sys.executable, "-c", "import os, sys; assert os.environ['CUDA_MPS_PIPE_DIRECTORY']; "
                                     "print('ok', flush=True); sys.stdin.read()"]


def _experiment(pairs=None, **defaults):
    return parse_experiment({"name": "x", "defaults": defaults, "pairs": pairs or [pair()]}, "s.json")


def _cases():
    """A time-sliced case and the same pair under MPS."""
    return expand_all([_experiment([pair()], sharing=["timeslice", "mps"])])


def test_mps_case_gets_a_private_daemon_that_a_timeslice_case_stops(fake_mps_control, tmp_path):
    manager = SharingManager(tmp_path, str(fake_mps_control), mps_threads=30, client_check=FAKE_CLIENT)
    timeslice, mps_case = _cases()
    mps_case = replace(mps_case, bg=replace(mps_case.bg, mps=MpsLimits(80, 1024)))
    sharing = manager.prepare(mps_case, "cuda")
    try:
        pipe = manager.daemon.pipe_dir
        for role in ("fg", "bg"):
            assert sharing.job_env[role]["CUDA_MPS_PIPE_DIRECTORY"] == str(pipe)
            assert sharing.job_env[role]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"  # command line wins
        assert sharing.job_env["bg"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1024M"
        assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in sharing.job_env["fg"]
        probe = sharing.probe()
        assert probe["limits"]["bg"] == {"active_thread_percentage": 30, "pinned_mem_limit_mb": 1024}
        assert probe["server_pids"]
        assert manager.prepare(mps_case, "cuda").job_env == sharing.job_env  # the same daemon, not a new one
        assert manager.starts == 1 and len(mps_processes(pipe)) == 2
        assert sharing.ready_for_round()["mps_ready_attempts"] == 1  # every MPS round checks a client first
    finally:
        manager.prepare(timeslice, "cuda")
    assert mps_processes(pipe) == [] and not manager.daemon.running
    assert manager.prepare(timeslice, "cuda").ready_for_round() == {}
    manager.prepare(mps_case, "cuda")
    assert manager.starts == 2
    manager.close()
    assert not manager.daemon.running


def test_a_failed_daemon_start_is_the_skip_reason_of_every_mps_case(fake_mps_control, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_FAIL", "1")
    manager = SharingManager(tmp_path, str(fake_mps_control), client_check=FAKE_CLIENT)
    _, mps_case = _cases()
    with pytest.raises(SharingUnavailable, match="MPS unavailable: MPS control daemon did not start") as first:
        manager.prepare(mps_case, "cuda")
    with pytest.raises(SharingUnavailable) as second:
        manager.check(mps_case, "cuda")
    assert str(second.value) == str(first.value)
    assert (tmp_path / "_mps" / "control.log").read_text().count("startup failed") == 1  # tried once


def test_the_daemon_stops_right_after_the_last_of_a_run_of_mps_cases(fake_mps_control, tmp_path):
    from pytest_gpu_pairs.run.options import GpuPairsOptions
    from pytest_gpu_pairs.run.session import GpuPairsSession

    options = GpuPairsOptions((), "cpu", 1.0, None, None, 10.0, tmp_path, mps_control=str(fake_mps_control))
    session = GpuPairsSession(options)
    session.sharing.client_check = FAKE_CLIENT
    cases = expand_all([_experiment([pair("a"), pair("b")], sharing=["timeslice", "mps"])])
    session._cases = cases
    session.plan([c.id for c in cases[1:]] + [cases[0].id])  # order: a-mps, b, b-mps, a
    try:
        session.sharing.prepare(cases[1], "cuda")
        session.after_case(cases[1])
        assert not session.sharing.daemon.running  # the next case (b) is time-sliced
        session.sharing.prepare(cases[3], "cuda")
        session.plan([cases[3].id, cases[1].id])
        session.after_case(cases[3])
        assert session.sharing.daemon.running  # a-mps comes next: keep it
        session.after_case(cases[1])
        assert not session.sharing.daemon.running  # nothing follows
    finally:
        session.close()


@pytest.mark.parametrize("client, env, reason", [
    ([sys.executable, "-c", "import sys; sys.exit('cuCtxCreate failed with CUresult 805')"], {},
     "a CUDA client could not start under the MPS daemon: cuCtxCreate failed with CUresult 805"),
    (FAKE_CLIENT, {"FAKE_MPS_NO_SERVER": "1"}, "a CUDA client ran but no MPS server appeared"),
])
def test_a_daemon_that_cannot_serve_a_client_is_the_skip_reason_and_is_stopped(
        fake_mps_control, tmp_path, monkeypatch, client, env, reason):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    manager = SharingManager(tmp_path, str(fake_mps_control), client_check=client)
    _, mps_case = _cases()
    with pytest.raises(SharingUnavailable, match=f"MPS unavailable: {reason}.*control.log: .*control daemon started"):
        manager.prepare(mps_case, "cuda")
    assert not manager.daemon.running and mps_processes(manager.daemon.pipe_dir) == []


# --- through pytest: collection, options, skips and every way out ----------------------------

SUITE = "def test_pair(gpu_pair_case, pair_run):\n    pair_run().check()\n"


def _settings(pytester, pairs, **defaults):
    path = pytester.path / "exp.json"
    path.write_text(json.dumps({"name": "exp", "defaults": defaults, "pairs": pairs}))
    return path


def test_sharing_option_doubles_the_cases_and_k_mps_selects_the_mps_ones(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair("g01"), pair("g02", "mnist", "densenet121")])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-sharing", "timeslice,mps",
                                           "--collect-only", "-q", "-k", "mps")
    result.stdout.fnmatch_lines(["*[[]g01-mnist_ff+resnet20-default-concurrent-mps[]]",
                                 "*[[]g02-mnist+densenet121-default-concurrent-mps[]]", "2/4 tests collected*"])


def test_sharing_options_are_documented_in_help(pytester):
    result = pytester.runpytest_subprocess("--help")
    for option in ("--gpu-pairs-sharing", "--gpu-pairs-mps-threads", "--gpu-pairs-mps-mem-limit-mb",
                   "gpu_pairs_mps_control"):
        result.stdout.fnmatch_lines([f"*{option}*"])


def test_bad_sharing_option_is_a_usage_error(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--gpu-pairs-sharing", "mps,gang", "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--gpu-pairs-sharing*expected timeslice, mps or timeslice,mps, got 'mps,gang'*"])
    result = pytester.runpytest_subprocess("--gpu-pairs-mps-threads", "0", "--collect-only")
    assert result.ret == 4


def test_mps_case_without_a_gpu_is_skipped_with_the_reason(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair()], sharing="mps")
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu", "-rs",
                                           "--gpu-pairs-out", pytester.path / "out")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*g01-mnist_ff+resnet20-default-concurrent-mps: sharing mps needs an NVIDIA GPU*"])
    assert not (pytester.path / "out" / "_solo").exists()  # skipped before any baseline was spent


STARTS_MPS_THEN = """
import atexit, os, signal
from pathlib import Path
from pytest_gpu_pairs.run import mps

def test_mps_daemon(gpu_pairs):
    daemon = gpu_pairs.sharing.start_mps()
    atexit.unregister(mps.stop_all_daemons)  # only the session's own exit path may stop it
    Path("pipe_dir.txt").write_text(str(daemon.pipe_dir))
    {exit}
"""


@pytest.mark.parametrize("exit", ["os.kill(os.getpid(), signal.SIGTERM)", "raise KeyboardInterrupt",
                                  "assert False, 'the case failed'", "pass"])
def test_the_daemon_is_gone_after_every_way_out_of_pytest(pytester, fake_mps_control, exit):
    pytester.makepyfile(test_it=STARTS_MPS_THEN.format(exit=exit))
    pytester.makeini(f"[pytest]\ngpu_pairs_mps_control = {fake_mps_control}\n")
    result = pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", pytester.path / "out")
    pipe = (pytester.path / "pipe_dir.txt").read_text()
    assert result.ret == {"pass": 0, "assert": 1}.get(exit.split()[0], 2)
    assert mps_processes(pipe) == []
    assert "command 'quit'" in (pytester.path / "out" / "_mps" / "control.log").read_text()
