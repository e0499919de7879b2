"""Job specs and job logs without running a job: argv from hyperparameters, a command workload's
argv and cwd, metrics and OOM signatures read from logs."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.schema import HyperparameterSpec
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.run.joblog import detect_oom, parse_log_metrics
from pytest_gpu_pairs.run.jobs import flag_arguments


def test_sigkill_not_sent_by_the_harness_is_the_oom_killers_signature(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("training\n")
    assert "OOM killer" in detect_oom(str(log), Progress(), returncode=-9)
    assert detect_oom(str(log), Progress(), returncode=-9, killed_by_harness=True) is None
    assert detect_oom(str(log), Progress(), returncode=1) is None


def test_log_patterns_take_the_last_match_of_each_metric(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("# gpu-pairs: start argv=['Accuracy: 9.9']\nEpoch 1 Accuracy: 0.41 loss=2.0\n"
                   "Epoch 2 Accuracy: 0.52 loss=1.5\nbest model: resnet\n")
    found = parse_log_metrics(str(log), {"accuracy": r"Accuracy[:\s]+([0-9.]+)", "loss": r"loss=([0-9.]+)",
                                         "best": r"best model: (\w+)", "missing": r"nothing (\d+)"})
    assert found == {"accuracy": 0.52, "loss": 1.5, "best": "resnet"}


@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True),
                       st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=False), st.booleans()),
                       max_size=6))
def test_hyperparameters_become_separate_arguments_never_shell_text(values):
    specs = {name: HyperparameterSpec(flag=f"--{name}-x") for name in list(values)[::2]}
    args = flag_arguments(specs, values)
    expected = []
    for name, value in values.items():
        flag = f"--{name}-x" if name in specs else f"--{name}"
        expected += ([flag] if value else []) if isinstance(value, bool) else [flag, str(value)]
    assert args == expected


def test_a_flag_ending_in_equals_joins_its_value_into_one_argument():
    """``--epochs=3`` as one argument, Hydra's ``key=value`` overrides, and a bool spelled out."""
    specs = {"epochs": HyperparameterSpec(flag="--epochs="), "max_epochs": HyperparameterSpec(flag="trainer.max_epochs="),
             "amp": HyperparameterSpec(flag="+amp=", type="bool"), "lr": HyperparameterSpec(flag="--lr")}
    args = flag_arguments(specs, {"epochs": 3, "max_epochs": 7, "amp": False, "lr": 0.5})
    assert args == ["--epochs=3", "trainer.max_epochs=7", "+amp=false", "--lr", "0.5"]


@given(st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=20).filter(lambda f: not f.endswith("=")),
       st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=False)))
def test_a_joined_flag_is_always_one_argument_that_ends_in_the_value(flag, value):
    [arg] = flag_arguments({"x": HyperparameterSpec(flag=flag + "=")}, {"x": value})
    assert arg == f"{flag}={value}"


def test_a_command_workload_runs_its_argv_in_cwd_relative_to_the_settings_file(tmp_path):
    from pytest_gpu_pairs.experiment.cases import expand
    from pytest_gpu_pairs.experiment.load import load_experiment
    from pytest_gpu_pairs.run.jobs import build_spec

    (tmp_path / "repos" / "net").mkdir(parents=True)
    settings = tmp_path / "exp.json"
    settings.write_text(json.dumps({
        "name": "x", "workloads": {"net": {
            "command": ["python", "train.py"], "cwd": "repos/net", "env": {"DATA": "/d"},
            "hyperparameters": {"epochs": {"flag": "-e", "type": "int", "default": 3},
                                "lr": {"type": "float", "default": 0.1}, "amp": {"type": "bool", "default": True}}}},
        "pairs": [{"group": "g1", "foreground": {"model": "net", "hyperparameters": {"lr": 0.5}},
                   "background": {"model": "net", "hyperparameters": {"amp": False}}}]}))
    case = expand(load_experiment(settings))[0]
    fg = build_spec(case.fg, "fg", "cpu", 1.0, 60.0)
    bg = build_spec(case.bg, "bg", "cpu", 1.0, 60.0)
    assert fg.cwd == str(tmp_path / "repos" / "net") and fg.env["DATA"] == "/d"
    assert fg.argv == ["python", "train.py", "--amp", "-e", "3", "--lr", "0.5"]
    assert bg.argv == ["python", "train.py", "-e", "3", "--lr", "0.1"]
    assert not fg.protocol


@pytest.mark.parametrize("runs, inherited", [(1, None), (1, "7"), (5, None), (5, "2")])
def test_a_built_in_trains_as_many_runs_in_its_process_as_its_job_says_whatever_pytest_inherited(
        runs, inherited, monkeypatch):
    from pytest_gpu_pairs.experiment.cases import JobConfig
    from pytest_gpu_pairs.protocol import RUNS_VAR
    from pytest_gpu_pairs.run.jobs import build_spec

    if inherited is not None:
        monkeypatch.setenv(RUNS_VAR, inherited)
    spec = build_spec(JobConfig("mnist", (("epochs", 1),), runs=runs), "bg", "cpu", 1.0, 60.0)
    assert spec.env.get(RUNS_VAR) == (str(runs) if runs > 1 else None)
