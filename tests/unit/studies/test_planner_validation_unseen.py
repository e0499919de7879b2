"""The unseen pairs' study: a pair measured there stands beside what the plan said before the run and
what this commit's planner says for the card it ran on."""
from __future__ import annotations

import json
import shutil

import pytest
from support.helpers import save_measured_case

from pytest_gpu_pairs.planning.cards import H200
from pytest_gpu_pairs.planning.predict import Planner
from pytest_gpu_pairs.studies.collates import planner_validation_unseen
from tools.codegen.reference_pairs import ROOT

PLAN = ROOT / "reports/reference/planner_validation/unseen/plan.json"


def _measured(folder, gpu: str, efficiency: float = 1.45) -> None:
    session = folder / "timeslice"
    record = {"case_id": "u02-mrt_oast+resnet20-default-concurrent", "mode": "concurrent", "fg_model": "mrt_oast",
              "bg_model": "resnet20", "sharing": "timeslice", "method": "interleaved", "device": gpu,
              "concurrency_efficiency": efficiency, "concurrency_efficiency_ci": [efficiency - 0.05, efficiency + 0.05],
              "oom": False}
    save_measured_case(session, record, gpu)


def test_a_measured_pair_stands_beside_the_plan_before_the_run_and_this_commits_prediction(tmp_path):
    shutil.copy(PLAN, tmp_path / "plan.json")
    _measured(tmp_path, "NVIDIA H200")
    summary = planner_validation_unseen.summarize(tmp_path, ROOT)
    (row,) = summary["measured"]
    expected = Planner(H200.table(), H200.pairs().measured).efficiency(("mrt_oast", "resnet20"), "timeslice")
    assert row["pair"] == ["mrt_oast", "resnet20"] and row["gpu"] == "NVIDIA H200" and row["measured"] == 1.45
    assert row["predicted"] == pytest.approx(expected.value)
    assert row["error"] == pytest.approx(abs(expected.value - 1.45) / 1.45)
    before = json.loads(PLAN.read_text())["pairs"]
    said = next(p for p in before if sorted(p["pair"]) == ["mrt_oast", "resnet20"])["mechanisms"]["timeslice"]
    assert row["planned_before"]["value"] == pytest.approx(said["efficiency"]["value"])
    assert len(summary["not_measured"]) == 2 * len(before) - 1
    assert "| mrt_oast+resnet20 | timeslice | NVIDIA H200 | 1.450 [1.400, 1.500] |" in planner_validation_unseen.table(summary)


def test_a_gpu_the_package_has_no_table_for_keeps_only_the_plan_made_before_the_run(tmp_path):
    shutil.copy(PLAN, tmp_path / "plan.json")
    _measured(tmp_path, "NVIDIA A100-SXM4-80GB", efficiency=2.3)
    (row,) = planner_validation_unseen.summarize(tmp_path, ROOT)["measured"]
    assert row["predicted"] is None and row["error"] is None and row["covered"] is None
    assert row["measured"] == 2.0 and row["planned_before"]["value"] is not None


def test_without_a_plan_or_a_session_the_summary_says_so(tmp_path):
    summary = planner_validation_unseen.summarize(tmp_path, ROOT)
    assert summary == {"plan": False, "measured": [], "not_measured": [], "on_cpu": []}
    assert "No plan.json" in planner_validation_unseen.table(summary)


def test_a_session_on_the_cpu_is_named_and_measures_nothing_to_set_beside_the_plan(tmp_path):
    shutil.copy(PLAN, tmp_path / "plan.json")
    _measured(tmp_path, "cpu")
    (tmp_path / "timeslice" / "session.json").write_text(json.dumps({"device": "cpu"}))
    summary = planner_validation_unseen.summarize(tmp_path, ROOT)
    assert summary["measured"] == [] and summary["on_cpu"] == ["timeslice"]
    assert "Sessions on the CPU (timeslice)" in planner_validation_unseen.table(summary)


def _plan_saying(efficiency: float) -> str:
    plan = json.loads(PLAN.read_text())
    for row in plan["pairs"]:
        for figures in row["mechanisms"].values():
            figures["efficiency"].update(value=efficiency, interval=[efficiency - 0.1, efficiency + 0.1])
    return json.dumps(plan)


def test_a_session_measured_by_a_runner_of_its_own_stands_beside_that_runners_plan(tmp_path):
    """Each mechanism run on a GPU of its own profiles and plans there (``before/<session>/plan.json``);
    the study's plan.json is the one for sessions without."""
    (tmp_path / "plan.json").write_text(_plan_saying(1.9))
    (tmp_path / "before" / "timeslice").mkdir(parents=True)
    (tmp_path / "before" / "timeslice" / "plan.json").write_text(_plan_saying(1.3))
    _measured(tmp_path, "NVIDIA H200")
    summary = planner_validation_unseen.summarize(tmp_path, ROOT)
    (row,) = summary["measured"]
    assert row["planned_before"]["value"] == pytest.approx(1.3)
    assert summary["plan"] is True
    waiting = {(tuple(p["pair"]), p["sharing"]): p["planned_before"]["value"] for p in summary["not_measured"]}
    assert waiting[("mrt_oast", "resnet20"), "mps"] == pytest.approx(1.9)  # the mps session has no plan of its own


def test_a_runners_own_plan_alone_counts_as_the_plan(tmp_path):
    (tmp_path / "before" / "mps").mkdir(parents=True)
    (tmp_path / "before" / "mps" / "plan.json").write_text(_plan_saying(1.5))
    assert planner_validation_unseen.summarize(tmp_path, ROOT)["plan"] is True
    assert "No plan.json" not in planner_validation_unseen.table(planner_validation_unseen.summarize(tmp_path, ROOT))
