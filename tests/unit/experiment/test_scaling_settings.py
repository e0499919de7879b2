"""The scaling design in settings: its entries, its case ids, what it refuses, and the steps a
scaled-down run keeps."""
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import REPO, pair

from pytest_gpu_pairs.experiment.cases import ScalingPlan, expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.inputs import SettingsError


def scaling(entries=None, **top):
    entries = entries if entries is not None else [{"group": "s01", "workload": {"model": "resnet20"}}]
    return {"name": "sc", "design": "scaling", "scaling": entries, **top}


def cases(data):
    return expand_all([parse_experiment(data, "sc.json")])


def test_each_gpu_count_is_a_case_fewest_first_with_an_id_that_k_selects():
    found = cases(scaling([{"group": "s01", "workload": {"model": "resnet20", "hyperparameters": {"batch_size": 64}},
                            "gpus": [4, 1, 2], "steps": 50}]))
    assert [c.id for c in found] == ["s01-resnet20-gpus1", "s01-resnet20-gpus2", "s01-resnet20-gpus4"]
    assert [c.scaling.gpus for c in found] == [1, 2, 4]
    assert all(c.mode == "scaling" and c.bg is None and c.sharing == "timeslice" for c in found)
    assert found[0].fg.hyperparameters["batch_size"] == 64 and found[0].scaling.steps == 50
    assert found[0].scaling == ScalingPlan(1, 10, 50, 20)  # schema defaults: 10 warm-up, 20 probe steps


def test_sharing_asked_for_on_the_command_line_leaves_a_scaling_case_plain():
    from pytest_gpu_pairs.experiment.cases import Overrides

    found = expand_all([parse_experiment(scaling(), "sc.json")], Overrides(sharing=("timeslice", "mps")))
    assert [c.id for c in found] == ["s01-resnet20-gpus1", "s01-resnet20-gpus2"]


def test_the_shipped_study_loads_the_stand_in_at_one_two_and_four_gpus_with_and_without_a_loader_worker():
    from pytest_gpu_pairs.experiment.load import load_experiment

    found = expand_all([load_experiment(REPO / "settings" / "scaling_study.json")])
    assert {c.scaling.gpus for c in found} == {1, 2, 4}
    assert {c.fg.model for c in found} == {"dense_aspp"}
    assert {c.fg.hyperparameters.get("loader_workers", 0) for c in found} == {0, 1}
    assert all(c.scaling.val_samples == 32 for c in found)


@pytest.mark.parametrize("data, where, expected", [
    (scaling(pairs=[pair()]), "$.pairs", "expected no 'pairs' with design 'scaling'"),
    ({"name": "sc", "design": "scaling"}, "$.scaling", "required key is missing"),
    (scaling([]), "$.scaling", "at least 1"),
    ({"name": "sc", "pairs": [pair()], "scaling": []}, "$.scaling", "expected no 'scaling' with design 'pairs'"),
    (scaling([{"group": "s01", "workload": {"model": "mnist_ff"}}]), "$.scaling[0].workload.model", "Forward-Forward"),
    (scaling([{"group": "s01", "workload": {"model": "resnet2O"}}]), "$.scaling[0].workload.model", "did you mean"),
    (scaling([{"group": "s01", "workload": {"model": "resnet20", "hyperparameters": {"batch_sise": 1}}}]),
     "$.scaling[0].workload.hyperparameters.batch_sise", "expected one of resnet20's hyperparameters"),
    (scaling([{"group": "s01", "workload": {"model": "resnet20"}, "gpus": [2, 2]}]), "$.scaling[0].gpus", "each GPU count once"),
    (scaling([{"group": "s01", "workload": {"model": "resnet20"}, "gpus": [0]}]), "$.scaling[0].gpus[0]", "greater than or equal to 1"),
    (scaling([{"group": "s01", "workload": {"model": "resnet20"}, "steps": 1}]), "$.scaling[0].steps", "greater than or equal to 2"),
    (scaling([{"group": "s01", "workload": {"model": "resnet20", "mps": {"active_thread_percentage": 50}}}]),
     "$.scaling[0].workload.mps", "a GPU of its own"),
    (scaling([{"group": "s 1", "workload": {"model": "resnet20"}}]), "$.scaling[0].group", "should match pattern"),
    (scaling([{"group": "s01", "workload": {"model": "resnet20"}, "stepz": 5}]), "$.scaling[0].stepz", "unexpected key"),
])
def test_a_bad_scaling_file_is_one_line_naming_the_path(data, where, expected):
    with pytest.raises(SettingsError) as info:
        parse_experiment(data, "sc.json")
    message = str(info.value)
    assert message.startswith(f"sc.json: {where}: ") and expected in message and "\n" not in message


def test_two_entries_with_one_group_and_model_are_refused_as_duplicates():
    from pytest_gpu_pairs.experiment.cases import DuplicateCaseError

    entry = {"group": "s01", "workload": {"model": "resnet20"}}
    with pytest.raises(DuplicateCaseError, match="s01-resnet20-gpus1"):
        cases(scaling([entry, entry]))


@given(st.integers(0, 500), st.integers(2, 5000), st.integers(0, 500), st.floats(0.001, 1.0))
def test_a_scaled_plan_never_exceeds_the_settings_and_keeps_an_interval(warmup, steps, probe, scale):
    plan = ScalingPlan(2, warmup, steps, probe).scaled(scale)
    assert plan.gpus == 2
    assert plan.warmup_steps <= warmup and (plan.warmup_steps >= 1) == (warmup >= 1)
    assert min(steps, 4) <= plan.steps <= steps
    assert plan.comm_probe_steps <= probe and (plan.comm_probe_steps >= min(2, probe))
    assert ScalingPlan(2, warmup, steps, probe).scaled(1.0) == ScalingPlan(2, warmup, steps, probe)
