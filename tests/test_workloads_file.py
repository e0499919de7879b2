"""Workloads files: the seed's models_config.json as it is, or native command workloads, turned
into command workloads that run a user's own repository."""
import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.experiment.load import load_experiment, load_workloads_file, parse_workloads_file

from conftest import pair
from helpers import SUITE, jobs_started_under


def test_seed_models_config_loads_as_it_is(seed_dir):
    workloads = load_workloads_file(seed_dir / "models_config.json")
    assert len(workloads) == 16
    vb = workloads["VulBERTa_mlp"]
    assert vb.command == ["./train.sh", "-n", "mlp", "-d", "d2a"]
    assert vb.cwd == str((seed_dir / "repos" / "VulBERTa").resolve())
    assert vb.hyperparameters["learning_rate"].flag == "--learning_rate"
    assert vb.defaults()["learning_rate"] == 0.00003
    assert "eval_loss" in vb.log_patterns
    assert workloads["MRT-OAST_default"].command == ["./train.sh"]
    assert workloads["pytorch_resnet_cifar10_resnet56"].command == ["./train.sh", "-n", "resnet56"]
    assert workloads["Person_reID_baseline_pytorch_pcb"].hyperparameters["epochs"].flag == "--total_epoch"


def test_experiment_uses_a_workloads_file_relative_to_itself(tmp_path, seed_dir):
    (tmp_path / "models_config.json").write_text((seed_dir / "models_config.json").read_text())
    settings = tmp_path / "exp.json"
    settings.write_text(json.dumps({"name": "x", "workloads_file": "models_config.json",
                                    "pairs": [pair(fg="examples_mnist", bg="VulBERTa_mlp",
                                                   fg_hp={"epochs": 1, "batch_size": 64}, bg_hp={"epochs": 1})]}))
    experiment = load_experiment(settings)
    assert experiment.workloads["examples_mnist"].cwd == str(tmp_path / "repos" / "examples")
    assert experiment.pairs[0].background.model == "VulBERTa_mlp"


@pytest.mark.parametrize("data, where, expected", [
    ({"modles": {}}, "$", "expected a workloads file"),
    ({"models": {"r": {"path": "p", "train_script": "t", "models": []}}}, "$.models.r.models", "at least 1"),
    ({"models": {"r": {"path": "p", "train_script": "t", "models": ["m"],
                       "supported_hyperparams": {"lr": {"type": "double"}}}}},
     "$.models.r.supported_hyperparams.lr.type", "input should be"),
    ({"models": {"r": {"path": "p", "train_script": "t", "models": ["m"],
                       "performance_metrics": {"log_patterns": {"acc": "no group"}}}}},
     "$.models.r", "capturing group"),
    ({"models": {"r": {"path": "p", "train_script": "t", "models": ["m"], "required_args": {"d": "-d 'open"}}}},
     "$.models.r.required_args", "expected shell-like arguments"),
    ({"workloads": {"w": {"command": []}}}, "$.workloads.w.command", "at least 1"),
])
def test_bad_workloads_file_gives_one_line_with_its_json_path(tmp_path, data, where, expected):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SettingsError) as info:
        load_workloads_file(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: {where}: ") and expected in message


def test_missing_or_clashing_workloads_file_is_refused(tmp_path):
    settings = tmp_path / "exp.json"
    settings.write_text(json.dumps({"name": "x", "workloads_file": ["nope.json"], "pairs": [pair()]}))
    with pytest.raises(SettingsError, match=r"\$\.workloads_file\[0\]: expected an existing workloads file"):
        load_experiment(settings)
    (tmp_path / "w.json").write_text(json.dumps({"workloads": {"mine": {"command": ["python", "t.py"]}}}))
    settings.write_text(json.dumps({"name": "x", "workloads_file": "w.json", "pairs": [pair()],
                                    "workloads": {"mine": {"command": ["python", "u.py"]}}}))
    with pytest.raises(SettingsError, match="workload 'mine' is also defined elsewhere"):
        load_experiment(settings)


@hsettings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["models", "path", "train_script", "models", "model_flag", "required_args",
                                         "supported_hyperparams", "flag", "type", "x"]), c, max_size=4),
                    max_leaves=12))
def test_any_workloads_file_is_either_valid_or_one_settings_error(data):
    try:
        parse_workloads_file(data, "w.json")
    except SettingsError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("w.json: $")


TRAIN_SCRIPT = """#!/usr/bin/env python3
import argparse, time
p = argparse.ArgumentParser()
p.add_argument("-n"); p.add_argument("-e", type=int, default=1); p.add_argument("--lr", type=float)
a = p.parse_args()
for epoch in range(a.e):
    print(f"Epoch {epoch + 1}", flush=True)
    time.sleep(1.0)
print(f"Test Accuracy: {90 + a.e}.5%", flush=True)
"""


def test_a_users_repository_from_a_seed_style_models_config_runs_as_a_pair(pytester):
    repo = pytester.path / "repos" / "toy"
    repo.mkdir(parents=True)
    script = repo / "train.sh"
    script.write_text(TRAIN_SCRIPT)
    script.chmod(0o755)
    (pytester.path / "models_config.json").write_text(json.dumps({"models": {"toy": {
        "path": "repos/toy", "train_script": "./train.sh", "models": ["small"], "model_flag": "-n",
        "supported_hyperparams": {"epochs": {"flag": "-e", "type": "int", "default": 2},
                                  "learning_rate": {"flag": "--lr", "type": "float", "default": 0.1}},
        "performance_metrics": {"log_patterns": {"test_accuracy": "Test Accuracy[:\\s]+([0-9.]+)"}}}}}))
    settings = pytester.path / "exp.json"
    settings.write_text(json.dumps({"name": "exp", "workloads_file": "models_config.json",
                                    "defaults": {"restart_delay_s": 0.2, "timeout_s": 60},
                                    "pairs": [pair("g01", "toy_small", "toy_small", {"epochs": 3}, {"epochs": 8})]}))
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "results"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "--benchmark-json", pytester.path / "b.json")
    result.assert_outcomes(passed=1)
    info = json.loads((pytester.path / "b.json").read_text())["benchmarks"][0]["extra_info"]
    assert info["perf"]["test_accuracy"] == 93.5
    assert info["fg_model"] == "toy_small" and info["bg_runs"] >= 1
    assert jobs_started_under(out) == []
