"""The groups' study: a group of three measured there stands beside the plan made before the run and
this commit's prediction by the planner's rule for groups, which no measured group teaches."""
from __future__ import annotations

import json

import pytest
from support.helpers import save_measured_case

from pytest_gpu_pairs.planning.cards import H200
from pytest_gpu_pairs.planning.predict import Planner
from pytest_gpu_pairs.studies.collates import (
    planner_validation_groups,
    planner_validation_groups_blind,
    planner_validation_groups_four,
)
from tools.codegen.reference_pairs import ROOT

SETTINGS = {ROOT / "settings/planner_groups.json": 3, ROOT / "settings/planner_groups_blind.json": 3,
            ROOT / "settings/planner_groups_four.json": 4}
TRIO = ("mnist", "resnet20", "resnet32")


def _measured(folder, efficiency: float, jobs: tuple[str, ...] = ("resnet20", "resnet32", "mnist")) -> None:
    session = folder / "timeslice"
    roles = [{"model": m, "role": "foreground" if i == 0 else "background"} for i, m in enumerate(jobs)]
    record = {"case_id": f"t01-{'+'.join(jobs)}-default-concurrent", "mode": "concurrent", "fg_model": jobs[0],
              "bg_model": jobs[1], "n_jobs": len(jobs), "jobs": roles,
              "sharing": "timeslice", "method": "interleaved", "device": "NVIDIA H200",
              "concurrency_efficiency": efficiency, "concurrency_efficiency_ci": [efficiency - 0.1, efficiency + 0.1],
              "oom": False}
    save_measured_case(session, record)


def _plan(folder) -> None:
    figure = {"value": 2.3, "interval": [2.1, 2.5], "interval_estimated": True, "basis": "solo profiles"}
    (folder / "plan.json").write_text(json.dumps({"pairs": [
        {"pair": list(TRIO), "mechanisms": {"timeslice": {"efficiency": figure}, "mps": {"efficiency": figure}}}]}))


def test_a_measured_group_is_predicted_by_the_rule_for_groups_and_set_beside_the_plan(tmp_path):
    _plan(tmp_path)
    _measured(tmp_path, 2.6)
    summary = planner_validation_groups.summarize(tmp_path, ROOT)
    (row,) = summary["measured"]
    expected = Planner(H200.table(), H200.pairs().measured).group_efficiency(TRIO, "timeslice")
    assert row["pair"] == list(TRIO) and row["held_out"] == "nothing" and row["measured"] == 2.6
    assert row["predicted"] == pytest.approx(expected.value)
    assert row["planned_before"]["value"] == 2.3
    assert [w["sharing"] for w in summary["not_measured"]] == ["mps"]
    text = planner_validation_groups.table(summary)
    assert text.startswith("# Groups of three the planner never saw")
    assert "| mnist+resnet20+resnet32 | timeslice | NVIDIA H200 | 2.600 [2.500, 2.700] | 2.300 [2.100, 2.500] |" in text


def test_a_group_measured_above_its_number_of_jobs_reads_as_that_number(tmp_path):
    _measured(tmp_path, 3.2)
    (row,) = planner_validation_groups.summarize(tmp_path, ROOT)["measured"]
    assert row["measured"] == 3.0


def test_without_a_plan_the_groups_summary_names_its_own_study(tmp_path):
    assert "gpu-pairs study run planner_validation_groups" in planner_validation_groups.table(
        planner_validation_groups.summarize(tmp_path, ROOT))


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda p: p.stem)
def test_every_group_of_the_settings_holds_its_number_of_built_in_jobs(settings):
    for entry in json.loads(settings.read_text())["pairs"]:
        jobs = [entry["foreground"], *entry["backgrounds"]]
        assert len(jobs) == SETTINGS[settings] and all(j["model"] in H200.table().workloads for j in jobs)


def test_the_blind_groups_summary_names_its_own_study_and_shares_the_rule(tmp_path):
    _plan(tmp_path)
    _measured(tmp_path, 2.6)
    summary = planner_validation_groups_blind.summarize(tmp_path, ROOT)
    assert summary == planner_validation_groups.summarize(tmp_path, ROOT)
    assert planner_validation_groups_blind.table(summary).startswith("# Four more groups of three, predicted blind")
    assert "planner_validation_groups_blind" in planner_validation_groups_blind.table(
        planner_validation_groups_blind.summarize(tmp_path / "empty", ROOT))


@pytest.mark.parametrize(("measured", "read"), [(2.9, 2.9), (4.3, 4.0)])
def test_a_group_of_four_is_predicted_by_the_same_rule_and_read_at_most_four(tmp_path, measured, read):
    four = ("densenet121", "resnet56", "mnist", "mrt_oast")
    _measured(tmp_path, measured, four)
    (row,) = planner_validation_groups_four.summarize(tmp_path, ROOT)["measured"]
    expected = Planner(H200.table(), H200.pairs().measured).group_efficiency(four, "timeslice", measured=False)
    assert row["pair"] == sorted(four) and row["measured"] == read
    assert row["predicted"] == pytest.approx(expected.value)
    assert planner_validation_groups_four.table(planner_validation_groups_four.summarize(tmp_path / "none", ROOT)) \
        .startswith("# A group of four, predicted before it ran")
