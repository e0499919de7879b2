"""Settings written by a careless user or an attacker: every value that makes no sense is one line
naming the file, the JSON path and what was expected, before anything starts; every name ends up
as one folder inside the output folder; and a fuzzer over every field finds no traceback."""
from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import PREDECESSOR_DATA, pair

from pytest_gpu_pairs.experiment.cases import DuplicateCaseError, expand_all
from pytest_gpu_pairs.experiment.load import load_experiment, load_workloads_file
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.run.jobs import build_spec
from pytest_gpu_pairs.run.outdir import OutsideOutputFolder, folder_inside


def command_workload(**extra) -> dict:
    return {"command": [sys.executable, "train.py"], "env": {"MODE": "fast"},
            "hyperparameters": {"epochs": {"flag": "--epochs", "type": "int", "default": 2, "range": [1, 10]},
                                "lr": {"type": "float", "default": 0.1, "range": [0.01, 1.0]},
                                "tag": {"type": "str", "default": "a"}},
            "log_patterns": {"accuracy": r"Accuracy: ([0-9.]+)"}, "ready_pattern": "^Epoch", **extra}


def settings_data(**top) -> dict:
    return {"name": "hostile", "workloads": {"mine": command_workload()},
            "pairs": [pair(fg="mine", fg_hp={"epochs": 3, "lr": 0.5, "tag": "b"}, bg="mnist_ff", bg_hp={"epochs": 1})],
            **top}


def one_line_error(tmp_path: Path, data, raw: bytes | None = None) -> str:
    path = tmp_path / "bad.json"
    path.write_bytes(raw if raw is not None else json.dumps(data).encode())
    with pytest.raises(SettingsError) as info:
        expand_all([load_experiment(path)])
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: $")
    return message


def with_fg_hp(**values) -> dict:
    data = settings_data()
    data["pairs"][0]["foreground"]["hyperparameters"].update(values)
    return data


def builtin_pair(**fg_hp) -> dict:
    return {"name": "x", "pairs": [pair(fg="mnist_ff", fg_hp=fg_hp)]}


SENSELESS = {
    "epochs -1": (builtin_pair(epochs=-1), "$.pairs[0].foreground.hyperparameters.epochs", "expected a value in (0"),
    "epochs 0": (builtin_pair(epochs=0), "$.pairs[0].foreground.hyperparameters.epochs", "expected a value in (0"),
    "batch_size 0": (builtin_pair(batch_size=0), "$.pairs[0].foreground.hyperparameters.batch_size", "[1"),
    "Infinity restart_delay_s": (settings_data(defaults={"restart_delay_s": math.inf}), "$.defaults.restart_delay_s",
                                 "finite number"),
    "Infinity cool_down_s": (settings_data(defaults={"cool_down_s": math.inf}), "$.defaults.cool_down_s",
                             "finite number"),
    "NaN timeout_s": (settings_data(defaults={"timeout_s": math.nan}), "$.defaults.timeout_s", "finite number"),
    "NaN hyperparameter": (builtin_pair(learning_rate=math.nan), "$.pairs[0].foreground.hyperparameters.learning_rate",
                           "finite number"),
    "runs_per_config 1e30": (settings_data(defaults={"runs_per_config": 1e30}), "$.defaults.runs_per_config", ""),
    "command value below its range's sign": (with_fg_hp(epochs=0), "$.pairs[0].foreground.hyperparameters.epochs",
                                             "expected a value above 0, as its range [1, 10] says"),
    "command value negative": (with_fg_hp(lr=-0.5), "$.pairs[0].foreground.hyperparameters.lr", "above 0"),
    "NUL in argv": (settings_data(workloads={"mine": command_workload(command=["python", "a\x00b"])}),
                    "$.workloads.mine.command[1]", "without NUL"),
    "NUL in an env value": (settings_data(workloads={"mine": command_workload(env={"A": "\x00"})}),
                            "$.workloads.mine.env.A", "without NUL"),
    "NUL in a value": (with_fg_hp(tag="a\x00"), "$.pairs[0].foreground.hyperparameters.tag", "without NUL"),
    "NUL in a name": (settings_data(workloads={"mi\x00ne": command_workload()}), '$.workloads["mi\\u0000ne"]',
                      "one folder name"),
    "env name with =": (settings_data(workloads={"mine": command_workload(env={"A=B": "1"})}),
                        '$.workloads.mine.env["A=B"]', "environment variable name"),
    "300-character name": (settings_data(workloads={"m" * 300: command_workload()}), "$.workloads", "at most 64"),
    "300-character group": ({"name": "x", "pairs": [pair(group="g" * 300)]}, "$.pairs[0].group", "at most 64"),
    "workload key escaping the output folder": (settings_data(workloads={"x/../../../../escaped": command_workload()}),
                                                '$.workloads["x/../../../../escaped"]', "one folder name"),
    "workload key nesting folders": (settings_data(workloads={"VulBERTa/mlp": command_workload()}),
                                     '$.workloads["VulBERTa/mlp"]', "one folder name"),
    "hyperparameter name nesting folders": (
        settings_data(workloads={"mine": command_workload(hyperparameters={"a/b": {"type": "int", "default": 1}})}),
        '$.workloads.mine.hyperparameters["a/b"]', "one folder name"),
}


@pytest.mark.parametrize("data, where, expected", SENSELESS.values(), ids=SENSELESS.keys())
def test_a_senseless_value_is_one_line_naming_file_and_path(tmp_path, data, where, expected):
    message = one_line_error(tmp_path, data)
    assert f": {where}" in message and expected in message


def test_a_settings_file_that_is_not_utf8_is_one_line(tmp_path):
    message = one_line_error(tmp_path, None, b'{"name": "caf\xe9", "pairs": []}')
    assert "expected UTF-8 text, got byte 0xe9" in message


def test_json_nested_100000_deep_is_one_line(tmp_path):
    message = one_line_error(tmp_path, None, b'{"name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert "nested" in message


def test_a_number_of_5000_digits_is_one_line(tmp_path):
    message = one_line_error(tmp_path, None, b'{"name": "x", "defaults": {"timeout_s": ' + b"9" * 5000 + b"}}")
    assert "expected valid JSON" in message


def test_a_predecessor_model_name_with_a_slash_is_refused(tmp_path):
    data = json.loads((PREDECESSOR_DATA / "models_config.json").read_text())
    data["models"]["VulBERTa"]["models"] = ["mlp/../../x"]
    path = tmp_path / "models_config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SettingsError) as info:
        load_workloads_file(path)
    assert str(info.value).startswith(f"{path}: $.models.VulBERTa.models: expected a name that is one folder name")


def test_predecessor_log_patterns_are_compiled_for_re2_too(tmp_path):
    data = json.loads((PREDECESSOR_DATA / "models_config.json").read_text())
    data["models"]["examples"]["performance_metrics"]["log_patterns"]["test_accuracy"] = r"(a)\1 ([0-9.]+)"
    path = tmp_path / "models_config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SettingsError) as info:
        load_workloads_file(path)
    assert str(info.value).startswith(f"{path}: $.models.examples: expected a regular expression in RE2 syntax")


def test_a_case_folder_that_would_resolve_outside_the_output_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert folder_inside(out, "g01-a+b-default-concurrent") == out / "g01-a+b-default-concurrent"
    with pytest.raises(OutsideOutputFolder):
        folder_inside(out, "x/../../escaped")
    (out / "planted").symlink_to(tmp_path)
    with pytest.raises(OutsideOutputFolder):
        folder_inside(out, "planted")


def test_a_case_folder_linked_to_a_sibling_inside_the_output_folder_is_refused(tmp_path):
    """It resolves inside the output folder, but writing through it would overwrite the other case."""
    out = tmp_path / "out"
    (out / "g01-a+b-default-concurrent").mkdir(parents=True)
    (out / "g02-a+b-default-concurrent").symlink_to(out / "g01-a+b-default-concurrent")
    with pytest.raises(OutsideOutputFolder, match="it is a symbolic link to .*g01-a\\+b-default-concurrent"):
        folder_inside(out, "g02-a+b-default-concurrent")


# --- the fuzzer ------------------------------------------------------------------------------

def _designs() -> list[dict]:
    pairs_design = settings_data(defaults={"timeout_s": 60, "runs_per_config": 2, "restart_delay_s": 0.5,
                                           "cool_down_s": 1, "ready_timeout_s": 30, "crash_loop_failures": 3,
                                           "crash_loop_window_s": 60, "vram_budget_mb": 4000, "min_efficiency": 0.5,
                                           "phase_s": 2, "settle_s": 0.5, "warmup_s": 1})
    study = settings_data(design="hp_study", vary={"lr": [0.5, 2.0], "epochs": [0.5, 1.5]})
    mutated = settings_data(design="mutation", mutation={"seed": 3, "max_attempts": 50, "dedup": False})
    mutated["pairs"][0].update(mutate=["epochs", "lr"], mutations=2)
    return [pairs_design, study, mutated]


DESIGNS = _designs()


def leaf_paths(node, path=()) -> list[tuple]:
    """Every number and string of the settings, and every key of an object (a name), as a path."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        if isinstance(key, str):
            found.append(path + (("key", key),))
        if isinstance(child, (dict, list)):
            found += leaf_paths(child, path + (key,))
        elif not isinstance(child, bool):
            found.append(path + (key,))
    return found


HOSTILE = st.sampled_from([math.inf, -math.inf, math.nan, -1, 0, -0.0, 1e30, 10**30, -(10**30), 1e-320, 2**64,
                           "", "\x00", "a\x00b", "../x", "/", "x/y", "a\\b", ".", "..", "=", "A=B", "\n", "\u202e",
                           "é" * 300, "m" * 65, "<b>x</b>", "$(rm -rf ~)", "--flag", " ", "(a+)+$", "[", "1e309"])
VALUES = HOSTILE | st.integers() | st.floats() | st.text(max_size=20)


def set_at(data: dict, path: tuple, value) -> None:
    node = data
    for key in path[:-1]:
        node = node[key]
    last = path[-1]
    if isinstance(last, tuple):  # a key: rename it, keeping its value
        node[str(value)] = node.pop(last[1])
    else:
        node[last] = value


@st.composite
def hostile_settings(draw):
    data = json.loads(json.dumps(draw(st.sampled_from(DESIGNS))))
    for _ in range(draw(st.integers(1, 3))):
        set_at(data, draw(st.sampled_from(leaf_paths(data))), draw(VALUES))
    return data


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_settings())
def test_any_hostile_field_gives_a_valid_run_plan_or_one_line_with_file_and_path(tmp_path, data):
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as Python's JSON writes (and reads) them
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cases = expand_all([load_experiment(path)])
    except (SettingsError, DuplicateCaseError) as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"{path}: ")
        assert isinstance(exc, DuplicateCaseError) or ": $" in message
        return
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for case in cases:
        assert folder_inside(out, case.id).parent == out
        assert len(case.id.encode()) <= 200
        for role, job in (("fg", case.fg), ("bg", case.bg)):
            if job is None:
                continue
            spec = build_spec(job, role, "cpu", 1.0, case.timeout_s)
            assert not any("\x00" in part for part in spec.argv)
            assert not any("\x00" in k or "\x00" in v or "=" in k for k, v in spec.env.items())
        assert all(math.isfinite(v) for v in (case.timeout_s, case.restart_delay_s, case.cool_down_s,
                                               case.ready_timeout_s, case.crash_loop_window_s))
        assert 1 <= case.runs_per_config <= 1000
