"""Whole-run fit profiles with real processes: a job run to its end twice while its memory is read
densely, the profile kept in the results folder and reused, every process ended."""
from __future__ import annotations

import json
import os
import sys
import time
from types import SimpleNamespace

import psutil
from support.helpers import FAKE_JOB, jobs_started_under

from pytest_gpu_pairs.experiment.cases import expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.record.store import fit_profile_path, fit_profiles
from pytest_gpu_pairs.run import fitprofile
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.fitprofile import FitProfiles


class OneJobGpu:
    """NVML as a fit profile reads it: the harness's live child processes, each holding ``mb``."""

    def __init__(self, mb: float = 800.0):
        self.mb, self.clock = mb, time.time
        self.info = SimpleNamespace(name="Fake H100", memory_total_mb=81559.0)

    def compute_processes(self):
        return [(p.pid, self.mb) for p in psutil.Process(os.getpid()).children(recursive=True)]


def _case(tmp_path, steps: int = 40):
    job = {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", str(steps), "--step-s", "0.01"]}
    experiment = parse_experiment({"name": "fit", "workloads": {"a": job, "b": job},
                                   "pairs": [{"group": "f1", "foreground": {"model": "a"},
                                              "background": {"model": "b"}}]}, str(tmp_path / "s.json"))
    return expand_all([experiment])[0]


def _env(gpu) -> Environment:
    return Environment(device="cuda", scale=1.0, sample_hz=10.0, gpu=gpu)


def test_a_command_workloads_profile_is_read_through_nvml_over_two_starts_and_every_process_ends(tmp_path):
    out = tmp_path / "out"
    fits = FitProfiles(out, None).for_case(_case(tmp_path), _env(OneJobGpu()))
    assert fits.unmeasured is None and fits.seconds > 0
    for profile in (fits.fg, fits.bg):
        assert profile.basis == "nvml" and len(profile.starts) == 2 and profile.complete
        assert profile.need_mb == 800.0 and profile.steady_mb == 800.0 and "basis" in profile.unmeasured
    assert fit_profile_path(out, fits.fg.key).is_file()
    assert jobs_started_under(out) == []


def test_a_stored_profile_is_reused_by_the_next_session_and_a_tampered_one_measured_again(tmp_path, monkeypatch):
    out, case = tmp_path / "out", _case(tmp_path)
    first = FitProfiles(out, None).for_case(case, _env(OneJobGpu()))
    measured = []
    real = fitprofile.measure_fit
    monkeypatch.setattr(fitprofile, "measure_fit", lambda *a, **k: measured.append(a[0].model) or real(*a, **k))
    again = FitProfiles(out, None).for_case(case, _env(OneJobGpu(mb=5000.0)))
    assert measured == [] and again.fg.need_mb == first.fg.need_mb and again.seconds == 0.0
    path = fit_profile_path(out, first.fg.key)
    path.write_text(json.dumps({**json.loads(path.read_text()), "basis": "guess"}))
    third = FitProfiles(out, None).for_case(case, _env(OneJobGpu(mb=5000.0)))
    assert measured == ["a"] and third.fg.need_mb == 5000.0 and third.bg.need_mb == first.bg.need_mb
    assert len(fit_profiles(out)) == 2


def _store_first_start_as(path, **start) -> None:
    stored = json.loads(path.read_text())
    stored["starts"][0].update(start)
    path.write_text(json.dumps(stored))


def test_a_stored_fit_run_that_failed_is_measured_again_and_one_out_of_memory_is_kept(tmp_path, monkeypatch):
    out, case = tmp_path / "out", _case(tmp_path)
    first = FitProfiles(out, None).for_case(case, _env(OneJobGpu()))
    _store_first_start_as(fit_profile_path(out, first.fg.key), exit_code=1, failure="exited with code 1")
    _store_first_start_as(fit_profile_path(out, first.bg.key), exit_code=3, oom=True, failure="out of memory")
    measured = []
    real = fitprofile.measure_fit
    monkeypatch.setattr(fitprofile, "measure_fit", lambda *a, **k: measured.append(a[0].model) or real(*a, **k))
    again = FitProfiles(out, None).for_case(case, _env(OneJobGpu(mb=5000.0)))
    assert measured == ["a"] and again.fg.complete and again.fg.need_mb == 5000.0
    assert again.bg.oom and again.bg.need_mb is None
    assert jobs_started_under(out) == []


def test_a_stored_profile_of_a_built_in_that_trains_on_the_cpu_is_reused_not_written_again(tmp_path):
    job = {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "40", "--step-s", "0.01"]}
    experiment = parse_experiment({"name": "fit", "workloads": {"a": job},
                                   "pairs": [{"group": "f1", "foreground": {"model": "a"},
                                              "background": {"model": "bug_localization"}}]}, str(tmp_path / "s.json"))
    out, case = tmp_path / "out", expand_all([experiment])[0]
    first = FitProfiles(out, None).for_case(case, _env(OneJobGpu()))
    stored = fit_profile_path(out, first.bg.key).read_text()
    assert first.bg.basis == "cpu" and first.bg.starts == [] and first.bg.need_mb == 0.0
    time.sleep(1.1)
    again = FitProfiles(out, None).for_case(case, _env(OneJobGpu()))
    assert again.seconds == 0.0 and again.bg.measured_at == first.bg.measured_at
    assert fit_profile_path(out, first.bg.key).read_text() == stored


def test_without_a_gpu_nothing_is_started_and_the_reason_is_given(tmp_path):
    out = tmp_path / "out"
    cpu = Environment(device="cpu", scale=1.0, sample_hz=10.0, gpu_unavailable="no NVIDIA GPU")
    fits = FitProfiles(out, None).for_case(_case(tmp_path), cpu)
    assert fits.fg is None and "no NVIDIA GPU" in fits.unmeasured and not out.exists()


def test_a_card_option_names_the_card_and_one_as_large_as_the_gpu_is_the_whole_gpu(tmp_path):
    case = _case(tmp_path)
    gpu_env = _env(OneJobGpu())
    assert FitProfiles(tmp_path, 10240.0).card_mb(case, gpu_env) == 10240.0
    assert FitProfiles(tmp_path, 90000.0).card_mb(case, gpu_env) is None
    assert FitProfiles(tmp_path, None).card_mb(case, gpu_env) is None  # the settings name no card


def test_a_changed_command_is_a_profile_of_its_own(tmp_path):
    from pytest_gpu_pairs.run.fitprofile import fit_key

    case, longer = _case(tmp_path), _case(tmp_path, steps=80)
    assert fit_key(case.fg, 10240.0, "H100", 1.0) == fit_key(_case(tmp_path).fg, 10240.0, "H100", 1.0)
    assert fit_key(case.fg, 10240.0, "H100", 1.0) != fit_key(longer.fg, 10240.0, "H100", 1.0)
    assert fit_key(case.fg, 10240.0, "H100", 1.0) != fit_key(case.fg, 8192.0, "H100", 1.0)
