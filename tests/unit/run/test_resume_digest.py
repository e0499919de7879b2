"""--gpu-pairs-resume takes a case's record only where it measured what this session would: the
record keeps digests of each job as it runs and of how it is measured, and any change to either
measures the case again; a change of a threshold alone does not (the record is judged anew)."""
from __future__ import annotations

import copy
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import Overrides, describe, expand
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.record.store import load_result, save_result
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.session import GpuPairsSession

WORKLOAD = {"command": [sys.executable, "train.py", "--data", "d"], "cwd": "repo", "env": {"SEED": "1"},
            "hyperparameters": {"lr": {"type": "float", "default": 0.1, "flag": "--lr"}},
            "log_patterns": {"accuracy": r"acc (\d+\.\d+)"}, "ready_pattern": "ready",
            "progress_pattern": r"step (?P<step>\d+)"}
SETTINGS = {"name": "s", "defaults": {"method": "interleaved", "phase_s": 0.5, "settle_s": 0.1, "warmup_s": 1.0,
                                      "runs_per_config": 3, "timeout_s": 600, "min_efficiency": 1.0},
            "workloads": {"fg": WORKLOAD, "bg": {**WORKLOAD, "env": {}}},
            "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]}


def session(tmp_path, **options) -> GpuPairsSession:
    values = {"settings": (), "device": "cpu", "scale": 0.5, "vram_budget_mb": None, "min_efficiency": None,
              "sample_hz": 10.0, "out_dir": tmp_path / "out", "resume": True, **options}
    return GpuPairsSession(GpuPairsOptions(**values))


def case(data: dict, overrides: Overrides = Overrides()):
    return expand(parse_experiment(data, "s.json"), overrides)[0]


def recorded(tmp_path, data: dict = SETTINGS, **options) -> GpuPairsSession:
    """A session whose results folder holds the case of ``data`` measured with ``options``."""
    first = session(tmp_path, **options)
    measured = case(data)
    save_result(first.case_dir(measured), {**json.loads(json.dumps(describe(measured))), "scale": 0.5,
                                           "device": "cpu", "failure": None,
                                           "settings_digest": first.settings_digest(measured)})
    return first


def changed(path: str, value) -> dict:
    data = copy.deepcopy(SETTINGS)
    *parents, last = path.split(".")
    target = data
    for part in parents:
        target = target[part]
    target[last] = value
    return data


@pytest.mark.parametrize("path, value, part", [
    ("workloads.fg.command", [sys.executable, "train.py", "--data", "other"], "fg"),
    ("workloads.fg.cwd", "elsewhere", "fg"),
    ("workloads.fg.env", {"SEED": "2"}, "fg"),
    ("workloads.fg.ready_pattern", "started", "fg"),
    ("workloads.fg.progress_pattern", r"it (?P<step>\d+)", "fg"),
    ("workloads.fg.log_patterns", {"accuracy": r"accuracy (\d+)"}, "fg"),
    ("workloads.fg.hyperparameters", {"lr": {"type": "float", "default": 0.1, "flag": "--learning-rate"}}, "fg"),
    ("workloads.bg.env", {"SEED": "1"}, "bg"),
    ("defaults.phase_s", 1.0, "measurement"),
    ("defaults.settle_s", 0.2, "measurement"),
    ("defaults.warmup_s", 2.0, "measurement"),
    ("defaults.runs_per_config", 5, "measurement"),
    ("defaults.timeout_s", 900, "measurement"),
    ("defaults.method", "epoch", "measurement"),
    ("defaults.starts", 2, "measurement"),
    ("defaults.card_mb", 8192, "measurement"),
])
def test_a_changed_job_or_measurement_setting_is_measured_again(tmp_path, path, value, part):
    first = recorded(tmp_path)
    assert first.resumable(case(SETTINGS)) is not None
    again = case(changed(path, value))
    assert first.resumable(again) is None
    assert first.changed_since(again, first.resumable(case(SETTINGS))) == [part]


@pytest.mark.parametrize("options", [{"precision": 0.05}, {"max_case_s": 60.0}, {"max_rounds": 7}, {"sample_hz": 20.0},
                                     {"scale": 0.25}])
def test_a_changed_measurement_option_is_measured_again(tmp_path, options):
    recorded(tmp_path)
    again = session(tmp_path, **options)
    assert again.resumable(case(SETTINGS, again.overrides)) is None


def test_mps_limits_are_part_of_an_mps_case_only(tmp_path):
    recorded(tmp_path)
    assert session(tmp_path, mps_threads=50).resumable(case(SETTINGS)) is not None  # a time-sliced case


def test_a_changed_threshold_keeps_the_record_and_judges_it_anew(tmp_path):
    recorded(tmp_path)
    later = session(tmp_path, min_efficiency=1.5, vram_budget_mb=100.0)
    assert later.resumable(case(changed("defaults.min_efficiency", 1.2))) is not None


def test_a_record_that_does_not_say_what_it_measured_is_measured_again(tmp_path):
    first = session(tmp_path)
    measured = case(SETTINGS)
    save_result(first.case_dir(measured), {**json.loads(json.dumps(describe(measured))), "scale": 0.5,
                                           "device": "cpu", "failure": None})
    assert first.resumable(measured) is None


@settings(max_examples=40)
@given(env=st.dictionaries(st.sampled_from(["A", "B", "SEED"]), st.sampled_from(["1", "2", ""]), max_size=3),
       args=st.lists(st.sampled_from(["--x", "1", "--y"]), max_size=3))
def test_resume_takes_the_record_exactly_when_the_job_is_the_same(tmp_path_factory, env, args):
    tmp = tmp_path_factory.mktemp("digest")
    first = recorded(tmp)
    data = changed("workloads.fg.env", env)
    data["workloads"]["fg"]["command"] = WORKLOAD["command"] + args
    same = env == WORKLOAD["env"] and not args
    assert (first.resumable(case(data)) is not None) == same


def test_a_group_resumes_unchanged_and_is_measured_again_when_its_third_job_changes(tmp_path):
    group = copy.deepcopy(SETTINGS)
    entry = group["pairs"][0]
    entry["backgrounds"] = [entry.pop("background"), {"model": "bg", "hyperparameters": {"lr": 0.2}}]
    recorded(tmp_path, group)
    later = session(tmp_path)
    assert later.resumable(case(group)) is not None
    assert set(later.settings_digest(case(group))) == {"fg", "bg", "bg2", "measurement"}
    entry["backgrounds"][1]["hyperparameters"]["lr"] = 0.3
    earlier = load_result(later.case_dir(case(group)))
    assert later.changed_since(case(group), earlier) == ["bg2"] and later.resumable(case(group)) is None
