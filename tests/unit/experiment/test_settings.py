import json

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import REPO, pair

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.load import load_experiment, parse_experiment
from pytest_gpu_pairs.inputs import SettingsError


def test_shipped_feasibility_settings_have_the_seed_groups():
    experiment = load_experiment(REPO / "settings" / "parallel_feasibility_test.json")
    assert [p.group for p in experiment.pairs] == [f"g{i:02d}" for i in range(1, 13)]
    assert (experiment.pairs[0].foreground.model, experiment.pairs[0].background.model) == ("mnist_ff", "resnet20")
    assert experiment.defaults.vram_budget_mb == 7500


def test_seed_experiment_file_loads_as_it_is_and_matches_the_native_one(seed_dir):
    seed = load_experiment(seed_dir / "parallel_feasibility_test.json")
    native = load_experiment(REPO / "settings" / "parallel_feasibility_test.json")
    assert [(p.group, p.foreground.model, p.background.model, p.foreground.hyperparameters,
             p.background.hyperparameters) for p in seed.pairs] == \
           [(p.group, p.foreground.model, p.background.model, p.foreground.hyperparameters,
             p.background.hyperparameters) for p in native.pairs]


def _error(data, tmp_path) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    with pytest.raises(SettingsError) as info:
        load_experiment(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path) + ": $")
    return message


@pytest.mark.parametrize("data, where, expected", [
    ("{not json", "$", "expected valid JSON (line 1"),
    ([1, 2], "$", "expected a JSON object"),
    ({"name": "x"}, "$.pairs", "required key is missing"),
    ({"name": "x", "pairs": []}, "$.pairs", "at least 1"),
    ({"name": "x", "pairs": [pair(fg="nosuchnet")]}, "$.pairs[0].foreground.model", "expected a built-in workload"),
    ({"name": "x", "pairs": [pair(bg_hp={"epochz": 1})]}, "$.pairs[0].background.hyperparameters.epochz",
     "expected one of resnet20's hyperparameters"),
    ({"name": "x", "pairs": [pair(fg_hp={"batch_size": 1.5})]}, "$.pairs[0].foreground.hyperparameters.batch_size",
     "expected a value of type int"),
    ({"name": "x", "pairs": [pair()], "defaults": {"vram_budget_mb": -1}}, "$.defaults.vram_budget_mb", "greater than 0"),
    ({"name": "x", "pairs": [pair()], "defualts": {}}, "$.defualts", "unexpected key"),
    ({"name": "x", "pairs": [pair(group="g 1")]}, "$.pairs[0].group", "should match pattern"),
    ({"name": "x", "pairs": [pair(fg="mine")], "workloads": {"mine": {"command": ["python", "t.py"],
                                                                       "log_patterns": {"acc": "([0-9"}}}},
     "$.workloads.mine.log_patterns", "expected a regular expression in RE2 syntax"),
])
def test_bad_settings_give_one_line_with_file_path_and_expectation(tmp_path, data, where, expected):
    message = _error(data, tmp_path)
    assert f": {where}: " in message
    assert expected in message


def test_seed_file_errors_name_the_seed_path(tmp_path, seed_dir):
    data = json.loads((seed_dir / "parallel_feasibility_test.json").read_text())
    data["experiments"][3]["background"]["repo"] = "nosuchrepo"
    message = _error(data, tmp_path)
    assert ": $.experiments[3].background: expected a known seed repo/model pair" in message


def test_command_workload_is_a_valid_model(tmp_path):
    data = {"name": "x", "workloads": {"mine": {"command": ["python", "train.py"], "cwd": "repo",
                                                 "hyperparameters": {"epochs": {"flag": "--epochs", "type": "int",
                                                                                "default": 3}},
                                                 "log_patterns": {"accuracy": "Accuracy[:\\s]+([0-9.]+)"}}},
            "pairs": [pair(fg="mine", fg_hp={"epochs": 2})]}
    experiment = parse_experiment(data, str(tmp_path / "s.json"))
    assert experiment.workloads["mine"].defaults() == {"epochs": 3}


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
                           max_leaves=10)


@hsettings(max_examples=200, deadline=None)
@given(key_path=st.lists(st.sampled_from(["pairs", 0, "foreground", "background", "model", "hyperparameters",
                                          "epochs", "defaults", "timeout_s", "group", "name"]), min_size=1, max_size=4),
       value=json_values)
def test_any_corruption_is_either_valid_or_one_settings_error(key_path, value):
    """Whatever a user types, loading yields an Experiment or one SettingsError line, never a crash."""
    data = {"name": "x", "defaults": {"timeout_s": 10}, "pairs": [pair()]}
    node = data
    for key in key_path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            break
    else:
        try:
            node[key_path[-1]] = value
        except (TypeError, IndexError):
            pass
    try:
        parse_experiment(data, "s.json")
    except SettingsError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("s.json: $")


@hsettings(max_examples=100, deadline=None)
@given(fg=st.sampled_from(sorted(BUILTINS)), bg=st.sampled_from(sorted(BUILTINS)),
       budget=st.floats(min_value=1, max_value=1e6), runs=st.integers(1, 5))
def test_every_builtin_pair_with_valid_defaults_loads(fg, bg, budget, runs):
    data = {"name": "x", "defaults": {"vram_budget_mb": budget, "runs_per_config": runs},
            "pairs": [{"group": "g1", "foreground": {"model": fg}, "background": {"model": bg}}]}
    experiment = parse_experiment(data, "s.json")
    assert experiment.defaults.runs_per_config == runs
