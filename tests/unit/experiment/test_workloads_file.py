"""Workloads files: the predecessor's models_config.json as it is, or native command workloads, turned
into command workloads that run a user's own repository."""
import json

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import pair

from pytest_gpu_pairs.experiment.load import load_experiment, load_workloads_file, parse_workloads_file
from pytest_gpu_pairs.inputs import SettingsError


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


def test_the_seed_repositories_get_the_progress_their_logs_allow(seed_dir):
    workloads = load_workloads_file(seed_dir / "models_config.json")
    presets = {name: w.progress_preset for name, w in workloads.items()}
    assert presets["pytorch_resnet_cifar10_resnet20"] == "pytorch_imagenet"
    assert presets["examples_mnist"] == presets["examples_siamese"] == "pytorch_mnist"
    assert presets["examples_word_lm"] == "pytorch_word_language_model"
    assert presets["Person_reID_baseline_pytorch_pcb"] == "reid_baseline"
    assert presets["VulBERTa_cnn"] == "huggingface_trainer"
    assert presets["MRT-OAST_default"] is None and presets["examples_mnist_ff"] is None
    assert sum(preset is not None for preset in presets.values()) == 13


def test_a_models_config_entry_may_carry_its_own_progress_pattern(tmp_path):
    data = {"models": {"r": {"path": "p", "train_script": "./t.sh", "models": ["m"],
                             "progress_pattern": r"it (?P<step>\d+)"}}}
    assert parse_workloads_file(data, str(tmp_path / "w.json"))["r_m"].progress_regex == r"it (?P<step>\d+)"
    data["models"]["r"]["progress_pattern"] = r"it (\d+)"
    with pytest.raises(SettingsError) as info:
        parse_workloads_file(data, str(tmp_path / "w.json"))
    assert f"{tmp_path / 'w.json'}: $.models.r.progress_pattern: expected a named group" in str(info.value)
