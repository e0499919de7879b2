"""A run counts as a data point only where its background shared it: rounds below ``min_coverage``
stay on record with their reason and never reach the means; a case with none left holds no data
point, says why and fails; the designs whose question is a run's outcome apply 0.95 by default; a
background the harness stopped while it was still stepping was training until it was stopped."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import expand
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record import build
from pytest_gpu_pairs.record.checks import CaseResult
from pytest_gpu_pairs.record.measurement import BackgroundRun, JobOutcome
from pytest_gpu_pairs.record.model import built

BASE = {"case_id": "g01-a+b-default-concurrent", "mode": "concurrent", "failure": None, "oom": False}


def _round(slowdown: float, coverage: float):
    return built({**BASE, "fg_slowdown": slowdown, "bg_coverage": coverage})


@given(st.lists(st.tuples(st.floats(1.0, 3.0), st.floats(0.0, 1.0)), min_size=1, max_size=6),
       st.floats(0.5, 1.0))
def test_only_rounds_at_or_above_the_rule_reach_the_means(rounds, rule):
    records = [_round(s, c) for s, c in rounds]
    record = build.aggregate(records, rule)
    counted = [s for s, c in rounds if c >= rule]
    assert record.repeats == len(counted) and record.rounds_refused == len(rounds) - len(counted)
    assert record.min_coverage == rule
    if counted:
        assert record.fg_slowdown == pytest.approx(sum(counted) / len(counted))
        assert record.coverage_refused is None
    else:
        assert "below" in record.coverage_refused
    if len(rounds) > 1:
        assert [("coverage_refused" in r) for r in record.rounds] == [c < rule for _, c in rounds]


def test_without_a_rule_every_round_counts_and_nothing_is_said():
    record = build.aggregate([_round(1.2, 0.1), _round(1.4, 0.2)])
    assert record.repeats == 2 and record.fg_slowdown == pytest.approx(1.3)
    assert record.min_coverage is None and record.rounds_refused is None and record.coverage_refused is None


def _settings(design: str, **defaults):
    pair = {"group": "g1", "foreground": {"model": "mnist"}, "background": {"model": "resnet20"}}
    return parse_experiment({"name": "t", "design": design, "defaults": defaults, "pairs": [pair]}, "s.json")


@pytest.mark.parametrize("design, defaults, expected", [
    ("hp_study", {}, 0.95), ("mutation", {}, 0.95), ("pairs", {}, None), ("pairs", {"method": "epoch"}, None),
    ("pairs", {"method": "epoch", "min_coverage": 0.8}, 0.8), ("hp_study", {"min_coverage": 0.5}, 0.5),
])
def test_the_designs_that_ask_for_a_runs_outcome_apply_the_rule_to_their_concurrent_runs(design, defaults, expected):
    cases = expand(_settings(design, **defaults))
    assert {c.min_coverage for c in cases if c.mode == "concurrent"} == {expected}
    assert {c.min_coverage for c in cases if c.mode == "solo"} <= {None}


def test_interleaved_rounds_have_no_coverage_rule():
    cases = expand(_settings("pairs", min_coverage=0.9))
    assert [c.method for c in cases] == ["interleaved"] and cases[0].min_coverage is None


def test_a_case_without_a_data_point_fails_with_the_fix():
    case = expand(_settings("hp_study"))[-1]
    record = build.aggregate([_round(1.2, 0.4)], 0.95)
    problems = CaseResult(case=case, record=record, enforce_efficiency=False).problems()
    assert any("covered 40 %" in p and "as long as the foreground's" in p for p in problems)


def _run(steps, end_t, stopped=True):
    progress = Progress(steps=[(t, i + 1) for i, t in enumerate(steps)])
    outcome = JobOutcome(role="bg", model="m", argv=[], log_path="", progress_path="", start_t=0.0, end_t=end_t,
                         returncode=-15 if stopped else 0, stopped_by_harness=stopped, progress=progress)
    return BackgroundRun(index=1, outcome=outcome, ready_t=steps[0])


def test_a_background_stopped_while_stepping_trained_until_it_was_stopped():
    steps = [1.0 + 0.5 * i for i in range(10)]  # last step at 5.5, a step every 0.5 s
    assert _run(steps, end_t=6.0).training_interval() == (1.0, 6.0)
    assert _run(steps, end_t=9.0).training_interval() == (1.0, 5.5)  # silent for six gaps: it had stopped
    assert _run(steps, end_t=6.0, stopped=False).training_interval() == (1.0, 5.5)  # it ended on its own


def test_the_report_leaves_out_a_run_its_background_did_not_share_and_says_so(tmp_path):
    from pytest_gpu_pairs.analysis.report.load import load_runs
    from pytest_gpu_pairs.record.store import save_result

    shared = {**BASE, "case_id": "g01-a+b-default-concurrent", "fg_model": "a", "bg_model": "b", "bg_coverage": 0.99}
    alone = {**shared, "case_id": "g02-a+b-default-concurrent", "bg_coverage": 0.3,
             "min_coverage": 0.95, "coverage_refused": "the background covered 30 % of the foreground's run"}
    for record in (shared, alone):
        save_result(tmp_path / record["case_id"], record)
    loaded = load_runs([tmp_path])
    assert list(loaded.runs["case_id"]) == ["g01-a+b-default-concurrent"]
    assert loaded.inputs[0].refused == 1 and any("1 run(s) left out" in n for n in loaded.notes)
