"""The runner's steps and shared fit profiles, on the CPU and without processes: what each step and
session is given, in which order, what is skipped and why (the processes themselves are tested in
tests/integration/test_study_runner.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pytest_gpu_pairs.record.fit import FitProfile
from pytest_gpu_pairs.record.store import fit_profile_path, fit_profiles, save_fit_profile
from pytest_gpu_pairs.studies import runner
from pytest_gpu_pairs.studies.declaration import Step, Study
from pytest_gpu_pairs.studies.runner import Request, run_study


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "s.json").write_text("{}")
    return tmp_path


def _study(**changes) -> Study:
    return Study.model_validate({"name": "tiny", "about": "a test", "reference": "reports/reference/tiny",
                                 "suite": "suite", "settings": ["s.json"], "collate": "verdicts", **changes})


class Fake:
    """Stands for run_to_the_end: records each command, writes what the step or session would."""

    def __init__(self, writes=None):
        self.calls, self.writes = [], writes or (lambda argv, log: 0)

    def __call__(self, argv, cwd, log, stderr=None, env=None):
        self.calls.append(list(argv))
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        return self.writes(argv, log)


def _out_of(argv):
    return Path(argv[argv.index("--gpu-pairs-out") + 1])


def test_steps_run_before_the_sessions_and_after_their_variant_and_once(checkout, monkeypatch):
    study = _study(variants=[{"name": "pilot", "folder": "pilot"}, {"name": "main", "folder": "results"}],
                   steps=[{"name": "facts", "argv": ["gpu-pairs", "plan", "{out}/x"], "writes": "facts.txt", "stdout": True},
                          {"name": "card", "argv": ["python", "-m", "pytest_gpu_pairs.x", "{device}", "{scale}"],
                           "after": "pilot", "writes": "card.json"}])

    def writes(argv, log):
        if "pytest_gpu_pairs.x" in argv:
            (checkout / "out" / "card.json").write_text("{}")
        return 0

    fake = Fake(writes)
    monkeypatch.setattr(runner, "run_to_the_end", fake)
    said = []
    assert run_study(study, checkout, checkout / "out", Request(device="cpu", scale=0.01), said.append) == 0
    kinds = [c[2] if c[1] == "-m" else c[1] for c in fake.calls]
    assert kinds == ["pytest_gpu_pairs.cli", "pytest", "pytest_gpu_pairs.x", "pytest"]
    assert fake.calls[0][:4] == [sys.executable, "-m", "pytest_gpu_pairs.cli", "plan"]
    assert fake.calls[0][4] == f"{checkout / 'out'}/x" and fake.calls[2][3:] == ["cpu", "0.01"]
    assert (checkout / "out" / "facts.txt").exists()
    fake.calls.clear()
    assert run_study(study, checkout, checkout / "out", Request(device="cpu"), said.append) == 0
    assert fake.calls == [] and "step card: done earlier (card.json is there), skipped" in said


def test_a_step_that_fails_or_writes_nothing_stops_the_run_and_is_taken_again_next_time(checkout, monkeypatch):
    study = _study(steps=[{"name": "facts", "argv": ["gpu-pairs", "plan"], "writes": "facts.json", "stdout": True}])
    monkeypatch.setattr(runner, "run_to_the_end", Fake(lambda argv, log: 3))
    said = []
    assert run_study(study, checkout, checkout / "out", Request(device="cpu"), said.append) == 3
    assert not (checkout / "out" / "facts.json").exists() and not list((checkout / "out").glob("*.partial"))
    assert "session-1" not in json.loads((checkout / "out" / "runs.json").read_text())
    study = _study(steps=[{"name": "facts", "argv": ["gpu-pairs", "plan"], "writes": "facts.json"}])
    monkeypatch.setattr(runner, "run_to_the_end", Fake())
    assert run_study(study, checkout, checkout / "out", Request(device="cpu"), said.append) == 2
    assert said[-2] == "step facts: exited 0 without writing facts.json"
    assert [a["exit"] for a in json.loads((checkout / "out" / "runs.json").read_text())["step facts"]] == [3, 2]


def test_a_gpu_step_is_skipped_on_the_cpu_with_the_reason(checkout, monkeypatch):
    study = _study(steps=[{"name": "pilot", "argv": ["gpu-pairs", "plan"], "writes": "p", "needs_gpu": "NVML only"}])
    fake = Fake()
    monkeypatch.setattr(runner, "run_to_the_end", fake)
    said = []
    assert run_study(study, checkout, checkout / "out", Request(device="cpu"), said.append) == 0
    assert said[0] == "step pilot: not run on the CPU (NVML only)" and len(fake.calls) == 1


def test_what_a_step_decided_replaces_the_declared_settings_and_scale_and_adds_options(checkout, monkeypatch):
    study = _study(scale=0.5, variants=[{"name": "main", "options_from": "decided.json"}])
    out = checkout / "out"
    out.mkdir()
    fake = Fake()
    monkeypatch.setattr(runner, "run_to_the_end", fake)
    said = []
    assert run_study(study, checkout, out, Request(), said.append) == 0
    assert "session-1: no decided.json (its step did not run here): the declared settings" in said
    (out / "decided.json").write_text(json.dumps({"settings": ["/x/cal.json"], "scale": 0.0664,
                                                  "options": ["--gpu-pairs-gpu-memory-mb", "6272"]}))
    (out / "runs.json").unlink()
    assert run_study(study, checkout, out, Request(), said.append) == 0
    argv = fake.calls[-1]
    assert argv[argv.index("--gpu-pairs-settings") + 1] == "/x/cal.json" and argv.count("--gpu-pairs-settings") == 1
    assert argv[argv.index("--gpu-pairs-scale") + 1] == "0.0664" and argv.count("--gpu-pairs-scale") == 1
    assert argv[argv.index("--gpu-pairs-gpu-memory-mb") + 1] == "6272"
    (out / "decided.json").write_text(json.dumps({"scale": "big"}))
    (out / "runs.json").unlink()
    with pytest.raises(Exception, match=r"decided.json: \$\.scale"):
        run_study(study, checkout, out, Request(), said.append)


def _profile(key: str) -> FitProfile:
    return FitProfile(key=key, workload="resnet20", builtin=True, hyperparameters={}, device_name="NVIDIA H100",
                      card_mb=None, basis="allocator", measured_at="2026-01-01T00:00:00")


def test_the_sessions_of_a_study_share_the_fit_profiles_the_first_one_measured(checkout, monkeypatch):
    """As the product reuses a results folder's _fit/, every later session starts with the first's."""
    study = _study(share_fit_profiles=True, variants=[{"name": "main", "sessions": 3}])
    seen = []

    def session(argv, log):
        folder = _out_of(argv)
        seen.append(sorted(p.key for p in fit_profiles(folder)))
        if folder.name == "session-1":
            save_fit_profile(folder, _profile("resnet20-aaa"))
        if folder.name == "session-2":
            save_fit_profile(folder, _profile("resnet20-bbb"))  # one the first did not need
        return 0

    monkeypatch.setattr(runner, "run_to_the_end", Fake(session))
    out = checkout / "out"
    assert run_study(study, checkout, out, Request(device="cpu"), lambda _: None) == 0
    assert seen == [[], ["resnet20-aaa"], ["resnet20-aaa", "resnet20-bbb"]]
    assert sorted(p.name for p in (out / "fit-profiles").iterdir()) == ["resnet20-aaa.json", "resnet20-bbb.json"]
    assert fit_profile_path(out / "session-3", "resnet20-aaa").is_file()


def test_a_session_keeps_its_own_profile_and_an_unreadable_shared_one_is_left_out(tmp_path):
    save_fit_profile(tmp_path / "session-1", _profile("resnet20-aaa"))
    (tmp_path / "fit-profiles").mkdir()
    (tmp_path / "fit-profiles" / "resnet20-aaa.json").write_text(json.dumps(_profile("resnet20-aaa").model_dump(mode="json")
                                                                            | {"workload": "other"}))
    (tmp_path / "fit-profiles" / "broken.json").write_text("{")
    assert runner.seed_fit_profiles(tmp_path, tmp_path / "session-1") == []
    assert fit_profiles(tmp_path / "session-1")[0].workload == "resnet20"


def test_a_step_runs_the_packages_own_commands_only():
    for argv in (["bash", "tools/x.sh"], ["python", "tools/scaling/card_size.py"], ["python", "-m", "tools.x"],
                 ["gpu-pairs"]):
        with pytest.raises(ValidationError, match="expected a command of the package"):
            Step.model_validate({"name": "s", "argv": argv, "writes": "x"})
    with pytest.raises(ValidationError, match="expected one of the variants main"):
        _study(steps=[{"name": "s", "argv": ["gpu-pairs", "plan"], "writes": "x", "after": "nope"}])
    with pytest.raises(ValidationError, match="relative path inside"):
        Step.model_validate({"name": "s", "argv": ["gpu-pairs", "plan"], "writes": "../x"})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                    max_leaves=12)


@given(JSON)
@settings(max_examples=200, deadline=None)
def test_an_attempts_selection_is_read_from_any_runs_json_value_without_failing(argv):
    assert runner.selection(argv) is None or isinstance(runner.selection(argv), str)


@given(st.lists(st.text(max_size=6).filter(lambda s: s != "-k"), max_size=5), st.text(min_size=1, max_size=12),
       st.lists(st.text(max_size=6), max_size=3))
@settings(max_examples=100, deadline=None)
def test_an_attempts_selection_is_the_value_after_its_k(before, select, after):
    assert runner.selection([*before, "-k", select, *after]) == select
    assert runner.selection([*before, *(a for a in after if a != "-k")]) is None


def test_the_steps_before_the_sessions_come_before_the_plan_which_reads_their_folder(checkout, monkeypatch):
    """A profile step measures this host, the plan made before any case reads it (``{out}`` in its options)."""
    study = _study(steps=[{"name": "profiles", "argv": ["gpu-pairs", "profile", "s.json", "--out", "{out}/profiled"],
                           "writes": "profiles.txt", "stdout": True}], plan=["--out", "{out}/profiled"])

    def writes(argv, log):
        if "plan" in argv:
            log.write_text("{}")
        return 0

    fake = Fake(writes)
    monkeypatch.setattr(runner, "run_to_the_end", fake)
    assert run_study(study, checkout, checkout / "out", Request(device="cpu"), lambda _: None) == 0
    assert [c[3] for c in fake.calls[:2]] == ["profile", "plan"]
    assert fake.calls[1][fake.calls[1].index("--out") + 1] == f"{checkout / 'out'}/profiled"


@pytest.mark.parametrize("extra, env", [(("--gpu-pairs-gpus=1",), {"CUDA_VISIBLE_DEVICES": "1"}),
                                        (("-x", "--gpu-pairs-gpus", "GPU-ab12"), {"CUDA_VISIBLE_DEVICES": "GPU-ab12"}),
                                        (("--gpu-pairs-gpus=0,1",), {}), ((), {})])
def test_a_step_runs_on_the_one_gpu_the_sessions_were_named_to(checkout, monkeypatch, extra, env):
    study = _study(steps=[{"name": "profiles", "argv": ["gpu-pairs", "profile", "s.json"], "writes": "p.txt",
                           "stdout": True}], env={"CUDNN": "0"})
    seen = []

    def fake(argv, cwd, log, stderr=None, env=None):
        seen.append(env)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        return 0

    monkeypatch.setattr(runner, "run_to_the_end", fake)
    run_study(study, checkout, checkout / "out", Request(device="cuda", extra=extra), lambda _: None)
    assert seen[0] == {"CUDNN": "0", **env}
