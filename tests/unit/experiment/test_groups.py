"""Groups of more than two jobs in the settings: one foreground with a list of backgrounds, or
``jobs`` alone; each job named in the case id and validated where it stands, and a form the
settings cannot mean refused in one line naming the file, the JSON path and what was expected."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import REPO

from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.experiment.cases import Overrides, expand, expand_all, unavailable_reason
from pytest_gpu_pairs.experiment.load import load_experiment, parse_experiment
from pytest_gpu_pairs.experiment.vocabulary import job_roles
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning.plan import select
from pytest_gpu_pairs.run.cpus import plan_job_cpus

MODELS = ("mnist_ff", "mnist", "resnet20", "resnet32", "mnist_rnn")


def group(**entry) -> dict:
    return {"name": "three", "pairs": [{"group": "g3", **entry}]}


def job(model: str, **hp) -> dict:
    return {"model": model, "hyperparameters": hp}


def error(data: dict) -> str:
    with pytest.raises(SettingsError) as caught:
        expand(parse_experiment(data, "three.json"))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("three.json: $")
    return message


def test_a_foreground_with_backgrounds_is_one_case_naming_every_model_in_order():
    case, = expand(parse_experiment(group(foreground=job("resnet20"), backgrounds=[job("resnet32"), job("mnist")]),
                                    "three.json"))
    assert case.id == "g3-resnet20+resnet32+mnist-default-concurrent"
    assert case.models == ("resnet20", "resnet32", "mnist") and case.roles == ("fg", "bg", "bg2")
    assert case.method == "interleaved" and case.bg is not None and case.bg.model == "resnet32"
    assert select([case.id, "g01-mnist_ff+resnet20-default-concurrent"], "mnist and resnet32") == [case.id]


def test_jobs_alone_name_a_group_whose_first_job_is_recorded_as_the_foreground():
    case, = expand(parse_experiment(group(jobs=[job("mnist"), job("mnist_ff"), job("resnet20")]), "three.json"))
    assert case.id == "g3-mnist+mnist_ff+resnet20-default-concurrent" and case.fg.model == "mnist"
    pair, = expand(parse_experiment(group(jobs=[job("mnist"), job("mnist_ff")]), "three.json"))
    assert pair.id == "g3-mnist+mnist_ff-default-concurrent" and pair.more_bgs == ()


@given(st.lists(st.sampled_from(MODELS), min_size=2, max_size=8))
def test_every_group_size_expands_to_one_case_with_a_role_for_each_job(models):
    fg, *bgs = models
    case, = expand(parse_experiment(group(foreground=job(fg), backgrounds=[job(m) for m in bgs]), "three.json"))
    assert case.models == tuple(models) and case.roles == job_roles(len(models))
    assert case.id == f"g3-{'+'.join(models)}-default-concurrent" and len(set(case.roles)) == len(models)


@pytest.mark.parametrize("entry, path, expected", [
    ({"foreground": job("mnist")}, "$.pairs[0]", "expected 'foreground' with 'background' (a pair) or with "
     "'backgrounds' (a list), or 'jobs' alone (a list of at least 2), got 'foreground'"),
    ({"foreground": job("mnist"), "background": job("mnist_ff"), "backgrounds": [job("resnet20")]}, "$.pairs[0]",
     "got 'foreground', 'background', 'backgrounds'"),
    ({"jobs": [job("mnist"), job("mnist_ff")], "foreground": job("mnist")}, "$.pairs[0]", "got 'foreground', 'jobs'"),
    ({"jobs": [job("mnist")]}, "$.pairs[0].jobs", "at least 2 items"),
    ({"foreground": job("mnist"), "backgrounds": []}, "$.pairs[0].backgrounds", "at least 1 item"),
    ({"foreground": job("mnist"), "backgrounds": [job("mnist")] * 8}, "$.pairs[0].backgrounds", "at most 7 items"),
    ({"foreground": job("mnist"), "backgrounds": [job("mnist"), job("nosuch")]}, "$.pairs[0].backgrounds[1].model",
     "nosuch"),
    ({"foreground": job("mnist"), "backgrounds": [job("mnist"), job("mnist_ff", epochs=-1)]},
     "$.pairs[0].backgrounds[1].hyperparameters.epochs", "expected a value in (0"),
    ({"jobs": [job("mnist"), job("mnist"), {"model": "mnist", "extra": 1}]}, "$.pairs[0].jobs[2].extra",
     "unexpected key"),
])
def test_a_group_the_settings_cannot_mean_is_refused_in_one_line(entry, path, expected):
    message = error(group(**entry))
    assert message.startswith(f"three.json: {path}: ") and expected in message, message


def test_a_misspelt_backgrounds_is_named_with_the_key_it_meant():
    message = error(group(foreground=job("mnist"), bakgrounds=[job("mnist_ff"), job("resnet20")]))
    assert message == ("three.json: $.pairs[0].bakgrounds: unexpected key 'bakgrounds'; did you mean 'backgrounds'? "
                       "(a required key, missing here)")


@pytest.mark.parametrize("design, extra", [("hp_study", {}), ("mutation", {"mutate": ["learning_rate"]})])
def test_designs_that_vary_the_foreground_of_a_pair_refuse_a_third_job(design, extra):
    data = {**group(foreground=job("mnist"), backgrounds=[job("mnist_ff"), job("resnet20")], **extra), "design": design}
    assert error(data) == (f"three.json: $.pairs[0].backgrounds[1]: expected two jobs with design {design!r} (a "
                           "foreground and one background); groups of more are measured with design 'pairs'")


def test_the_epoch_method_is_refused_for_a_group_in_the_settings_and_skipped_from_the_command_line():
    data = {**group(foreground=job("mnist"), backgrounds=[job("mnist_ff"), job("resnet20")]),
            "defaults": {"method": "epoch"}}
    assert "a group of 3 jobs is measured with method 'interleaved'" in error(data)
    case, = expand(parse_experiment({**data, "defaults": {}}, "three.json"), Overrides(method="epoch"))
    assert unavailable_reason(case) == ("a group of 3 jobs is measured with interleaved rounds only (each job alone, "
                                        "all together), not with method 'epoch'")


def test_each_job_of_a_group_gets_cores_of_its_own_from_the_sessions_share():
    cores = [(i,) for i in range(8)]
    pair = plan_job_cpus(cores)
    three = pair.for_roles(("fg", "bg", "bg2"))
    assert pair.for_roles(("fg", "bg")) is pair and three.harness == pair.harness == frozenset({0})
    blocks = [three.for_job(role, False) for role in ("fg", "bg", "bg2")]
    assert all(blocks) and sum(map(len, blocks)) == 6 and len(frozenset().union(*blocks)) == 6
    few = plan_job_cpus(cores[:3]).for_roles(("fg", "bg", "bg2"))
    assert few.for_job("fg", False) is None and "one for each of 3 jobs" in (few.reason or "")


def test_the_predecessors_predictions_load_with_their_three_job_stress_test():
    cases = expand_all([load_experiment(REPO / "settings" / "predecessor_predictions.json")])
    assert "st3-resnet20+resnet32+mnist-default-concurrent" in [c.id for c in cases]


def test_the_planner_predicts_a_group_and_shows_the_measured_one(tmp_path: Path, capsys):
    settings = tmp_path / "three.json"
    settings.write_text(json.dumps({"name": "three", "pairs": [
        {"group": "g3", "foreground": job("resnet20"), "backgrounds": [job("resnet32"), job("mnist")]},
        {"group": "g2", "foreground": job("resnet20"), "background": job("mnist")}]}))
    assert gpu_pairs(["plan", str(settings), "--json", "--out", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)
    three = next(p for p in plan["pairs"] if len(p["pair"]) == 3)
    assert three["pair"] == ["mnist", "resnet20", "resnet32"] and three["recommended"] in ("timeslice", "mps")
    assert three["fit"]["verdict"] == "fits" and three["fit"]["need_mb"] > 0
    slicing = three["mechanisms"]["timeslice"]["efficiency"]
    assert slicing["basis"].startswith("measured pair (H100 reference, 3 record(s))")  # the package measured this group
    low, high = slicing["interval"]
    assert 0.0 <= low <= slicing["value"] <= high <= 3.0
    mps = three["mechanisms"]["mps"]["efficiency"]
    assert "not calibrated on groups" in mps["basis"] and 0.0 <= mps["value"] <= 3.0
    assert three["mechanisms"]["mps"]["energy_saved"]["value"] is None
    two = next(p for p in plan["pairs"] if len(p["pair"]) == 2)
    assert two["mechanisms"]["timeslice"]["efficiency"]["value"] is not None
