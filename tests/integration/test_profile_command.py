"""`gpu-pairs profile` on the CPU: a user's command workloads run alone for seconds, their profiles
stored in the results folder, read back by `--gpu-pairs-plan` and `gpu-pairs plan` (basis "profile
(measured here)"), and every process started is ended, whether the job trained, ended by itself or
failed before its first step. Nothing here asserts a duration."""
from __future__ import annotations

import json
import sys
import time

import pytest
from support.fake_nvml import FakeNvml, FakeProcess
from support.helpers import FAKE_JOB, SUITE, jobs_started_under

from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.devices.nvml import Gpu
from pytest_gpu_pairs.planning import profile_command
from pytest_gpu_pairs.planning.own_profiles import BASIS, read_own_profiles
from pytest_gpu_pairs.run.cpus import plan_job_cpus

SHORT = ["--warmup", "0.5", "--seconds", "1.5"]


def _job(*extra: str) -> dict:
    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--step-s", "0.02", *extra]}


def _settings(path, trainer=None, loader=None):
    path.write_text(json.dumps({
        "name": "mine", "defaults": {"method": "interleaved", "min_efficiency": 0.0},
        "workloads": {"trainer": trainer or _job("--steps", "100000"), "loader": loader or _job("--steps", "100000")},
        "pairs": [{"group": "p1", "foreground": {"model": "trainer"}, "background": {"model": "loader"}}]}))
    return str(path)


def test_a_command_workload_profiled_on_the_cpu_is_what_the_plans_rest_on(pytester, capsys):
    settings, out = _settings(pytester.path / "mine.json"), pytester.path / "out"
    assert gpu_pairs(["profile", settings, "--device", "cpu", "--out", str(out), *SHORT]) == 0
    printed = capsys.readouterr().out
    assert "2 workload(s) alone on cpu" in printed and f"stored in {out / '_profiles'}" in printed
    assert jobs_started_under(out) == []
    own = read_own_profiles(out)
    assert sorted(p.workload for p in own.profiles) == ["loader", "trainer"]
    assert all(p.device == "cpu" and p.step_time_s > 0 and p.startup_s >= 0 for p in own.profiles)
    stored = json.loads((out / "_profiles" / "trainer.cpu.json").read_text())
    assert stored["steps_per_epoch"] is None and "epoch length" in stored["unmeasured"]["steps_per_epoch"]
    assert "GPU only" in stored["unmeasured"]["power_avg_w"] and "GPU only" in stored["unmeasured"]["gpm_sm_util_pct"]

    pytester.makepyfile(test_suite=SUITE)
    plan = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                         "--gpu-pairs-out", out, "--gpu-pairs-plan", "-p", "no:cacheprovider")
    plan.stdout.fnmatch_lines([f"p1-trainer+loader-default-concurrent *{BASIS}*", "profiles measured here: 2 in *"])

    capsys.readouterr()
    assert gpu_pairs(["plan", settings, "--device", "cpu", "--out", str(out), "--gpus", "1", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["bases"] == {BASIS: 1} and planned["model"]["profiled_here"] == ["loader", "trainer"]
    assert planned["pairs"][0]["rests_on"] == "solo profiles (a profile measured here)"


def test_a_run_that_ends_inside_the_profile_is_stored_with_its_length(tmp_path, capsys):
    settings = _settings(tmp_path / "mine.json", trainer=_job("--steps", "30"))
    assert gpu_pairs(["profile", settings, "-k", "p1", "--device", "cpu", "--out", str(tmp_path / "out"), *SHORT]) == 0
    trainer = json.loads((tmp_path / "out" / "_profiles" / "trainer.cpu.json").read_text())
    assert trainer["run_steps"] == 30 and trainer["run_s"] > 0 and "run_s" not in trainer["unmeasured"]
    loader = json.loads((tmp_path / "out" / "_profiles" / "loader.cpu.json").read_text())
    assert loader["run_s"] is None and "did not end" in loader["unmeasured"]["run_s"]
    assert jobs_started_under(tmp_path / "out") == []


def test_a_workload_that_fails_before_its_first_step_is_named_and_nothing_is_stored_of_it(tmp_path, capsys):
    settings = _settings(tmp_path / "mine.json", trainer=_job("--fault", "crash", "--fault-runs", "1-"))
    assert gpu_pairs(["profile", settings, "--device", "cpu", "--out", str(tmp_path / "out"), *SHORT]) == 1
    errors = [line for line in capsys.readouterr().out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "trainer" in errors[0] and "log: " in errors[0]
    assert sorted(p.name for p in (tmp_path / "out" / "_profiles").glob("*.json")) == ["loader.cpu.json"]
    assert jobs_started_under(tmp_path / "out") == []


def test_no_case_selected_is_one_line(tmp_path, capsys):
    settings = _settings(tmp_path / "mine.json")
    assert gpu_pairs(["profile", settings, "-k", "nothing_like_it", "--device", "cpu", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().out == "error: no case selected\n"


def test_a_workload_that_steps_slowly_gets_a_longer_window_and_each_one_is_said_as_it_ends(tmp_path, capsys):
    """A step of 1.2 s is longer than the window asked for: the window stretches until it holds
    several steps, and the workloads are named one by one while the profile runs."""
    slow = {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--step-s", "1.2", "--steps", "100000"]}
    settings, out = _settings(tmp_path / "mine.json", trainer=slow), tmp_path / "out"
    assert gpu_pairs(["profile", settings, "--device", "cpu", "--out", str(out), "--warmup", "0.2",
                      "--seconds", "1.0"]) == 0
    printed = capsys.readouterr().out.splitlines()
    said = [line for line in printed if line.startswith(("[", "  trainer:", "  loader:"))]
    assert said[0] == "[1/2] trainer ..." and said[2] == "[2/2] loader ..."
    assert said[1].startswith("  trainer: ") and "window stretched to" in said[1]
    assert printed.index(said[-1]) < printed.index(next(line for line in printed if line.startswith("workload ")))
    trainer = json.loads((out / "_profiles" / "trainer.cpu.json").read_text())
    assert trainer["window_s"] > 2 * 1.0 and trainer["step_time_s"] >= 1.0
    assert trainer["cpu_count"] >= 1 and "load_avg" in trainer
    assert jobs_started_under(out) == []


def test_a_workload_too_slow_even_for_the_stretched_window_names_the_option_that_gives_it_more(tmp_path, capsys):
    slow = {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--step-s", "3.0", "--steps", "100000"]}
    settings = _settings(tmp_path / "mine.json", trainer=slow)
    assert gpu_pairs(["profile", settings, "-k", "p1", "--device", "cpu", "--out", str(tmp_path / "out"),
                      "--warmup", "0.1", "--seconds", "0.2"]) == 1
    [error] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("error: ")]
    assert error.startswith("error: trainer: fewer than 2 step reports after the first") and "--seconds" in error
    assert jobs_started_under(tmp_path / "out") == []


def test_on_a_card_that_serves_gpm_the_profile_stores_its_shares_over_its_window(tmp_path, capsys,
                                                                               monkeypatch):
    """A real job process measured against a scripted card (a fake NVML on the wall clock, one process
    computing at 60 % of the SMs throughout): the two GPM samples bound the window, both are freed."""
    nvml = FakeNvml(time.time, processes=[FakeProcess(4242, -1e6, 1e6, 500.0, 60.0)], gpm_supported=True)
    monkeypatch.setattr(profile_command, "open_device_gpu", lambda device: (Gpu(0, nvml=nvml), None))
    settings = _settings(tmp_path / "mine.json")
    assert gpu_pairs(["profile", settings, "-k", "p1", "--device", "cuda", "--out", str(tmp_path / "out"), *SHORT]) == 0
    for name in ("trainer", "loader"):
        stored = json.loads((tmp_path / "out" / "_profiles" / f"{name}.cuda.json").read_text())
        assert stored["gpm_sm_util_pct"] == pytest.approx(60.0) and stored["gpm_dram_bw_pct"] == pytest.approx(30.0)
        assert stored["gpm_sm_occupancy_pct"] == pytest.approx(30.0) and stored["gpm_fp32_util_pct"] == pytest.approx(15.0)
        assert stored["gpm_tensor_util_pct"] == 0.0 and stored["gpm_fp16_util_pct"] == 0.0
        assert not set(stored["unmeasured"]) & {"gpm_sm_util_pct", "gpm_sm_occupancy_pct", "gpm_tensor_util_pct"}
    assert len(nvml.gpm_samples) == 4 and all(s.freed for s in nvml.gpm_samples)
    assert jobs_started_under(tmp_path / "out") == []
    capsys.readouterr()


@pytest.mark.parametrize("option, pinned, reason", [("auto", {"fg": "1", "harness": "0"}, None),
                                                    ("off", None, "--gpu-pairs-pin-cpus off")])
def test_a_profiled_job_runs_on_cpus_of_its_own_as_a_session_pins_it(tmp_path, capsys, monkeypatch, option, pinned,
                                                                      reason):
    """The harness's core first, then a block for each job's role, as a session plans them on a host
    with room for it (this machine may have too few cores, so the host's cores are given): the job's
    process is started pinned to the first job's block, and the stored profile says which CPUs."""
    host = [(0,), (1,), (0,)]  # core 0 for the harness, core 1 for the first job, the other job's unused
    real_plan = profile_command.host_cpu_plan
    monkeypatch.setattr(profile_command, "host_cpu_plan", lambda pin: real_plan(pin) if pin == "off" else plan_job_cpus(host))
    settings = _settings(tmp_path / "mine.json")
    seen = []
    real_profile = profile_command.profile_job
    monkeypatch.setattr(profile_command, "profile_job", lambda *a, **k: seen.append(k["cpus"]) or real_profile(*a, **k))
    assert gpu_pairs(["profile", settings, "-k", "p1", "--device", "cpu", "--out", str(tmp_path / "out"),
                      "--pin-cpus", option, *SHORT]) == 0
    stored = json.loads((tmp_path / "out" / "_profiles" / "trainer.cpu.json").read_text())
    assert stored["job_cpus"] == pinned and seen[0] == (frozenset({1}) if pinned else None)
    assert stored["unmeasured"].get("job_cpus") == (f"not pinned: {reason}" if reason else None)
    assert jobs_started_under(tmp_path / "out") == []
    capsys.readouterr()


def test_the_pinning_option_is_refused_with_what_it_expects(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu_pairs(["profile", _settings(tmp_path / "mine.json"), "--pin-cpus", "some"])
    assert "expected auto, off or a number of CPUs per job, got 'some'" in capsys.readouterr().err
