"""The host study's summary: each pair beside the table's prediction, the plan its own runner made from
the host's profiles before the run, and the prediction from the pairs' own solo phases."""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.studies.collates import planner_validation_host
from tools.codegen.reference_pairs import ROOT

from .test_planner_validation_unseen import _measured, _plan_saying


def test_the_plan_made_before_the_run_is_scored_against_the_measurement(tmp_path):
    (tmp_path / "before" / "timeslice").mkdir(parents=True)
    (tmp_path / "before" / "timeslice" / "plan.json").write_text(_plan_saying(1.30))
    _measured(tmp_path, "NVIDIA H200", efficiency=1.45)
    summary = planner_validation_host.summarize(tmp_path, ROOT)
    planned = summary["by_mechanism"]["timeslice"]["planned"]
    assert planned["n"] == 1 and planned["median_error"] == pytest.approx(0.15 / 1.45)
    assert planned["covered"] == 0  # [1.2, 1.4] misses 1.45
    assert "| timeslice | this host's profile, before the run | 1 | 10.3 % |" in planner_validation_host.table(summary)


@pytest.mark.parametrize("interval", [None, [None, None], [1.2], ["low", "high"]])
def test_a_plan_without_a_usable_interval_is_scored_and_never_counted_inside(tmp_path, interval):
    rows = [{"measured": 1.45, "planned_before": {"value": 1.45, "interval": interval}}]
    assert planner_validation_host._planned_errors(rows) == {"n": 1, "median_error": 0.0, "max_error": 0.0, "covered": 0}


def test_a_pair_no_plan_named_is_left_out_of_the_plans_score():
    rows = [{"measured": 1.45, "planned_before": None}, {"measured": 1.45, "planned_before": {"value": None}}]
    assert planner_validation_host._planned_errors(rows)["n"] == 0
