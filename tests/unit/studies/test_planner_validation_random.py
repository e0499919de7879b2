"""The drawn pairs' study: contended pairs drawn by a seed from those no H200 study holds, set beside
the plan committed before they ran, as the unseen pairs are; the draw itself keeps out every pair a
study measured and is the same for the same seed."""
from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import save_measured_case

from pytest_gpu_pairs.planning.measured import pair_key
from pytest_gpu_pairs.studies.collates import planner_validation_random
from tools.codegen.reference_pairs import ROOT
from tools.planner_validation import draw_pairs

FOLDER = ROOT / "reports/reference/planner_validation/random"
SETTINGS = ROOT / "settings/planner_random.json"


@pytest.fixture(scope="module")
def pool():
    return draw_pairs.candidates(1.9)


def test_no_drawn_pair_is_one_another_study_measured():
    drawn = draw_pairs.pairs_in(SETTINGS)
    assert len(drawn) == 6 and not drawn & draw_pairs.measured_elsewhere(excluding=SETTINGS.relative_to(ROOT).as_posix())


def test_the_pool_holds_only_unmeasured_pairs_the_planner_calls_contended(pool):
    measured = draw_pairs.measured_elsewhere()
    assert SETTINGS.relative_to(ROOT).as_posix() in draw_pairs.ELSEWHERE
    assert pool and all(pair not in measured and min(p.values()) < 1.9 for pair, p in pool)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 40))
def test_a_seed_draws_the_same_pairs_every_time_and_never_one_twice(pool, seed, n):
    first, again = draw_pairs.draw(pool, seed, n), draw_pairs.draw(pool, seed, n)
    assert first == again and len(first) == min(n, len(pool)) == len({pair for pair, _ in first})


def test_the_plan_committed_before_the_run_predicts_every_drawn_pair_both_ways():
    planned = {pair_key(*p["pair"]): p["mechanisms"] for p in json.loads((FOLDER / "plan.json").read_text())["pairs"]}
    assert set(planned) == draw_pairs.pairs_in(SETTINGS)
    assert all(m[mechanism]["efficiency"]["value"] is not None for m in planned.values() for mechanism in ("timeslice", "mps"))


def test_a_measured_pair_stands_beside_the_plan_and_the_table_names_the_study(tmp_path):
    shutil.copy(FOLDER / "plan.json", tmp_path / "plan.json")
    session = tmp_path / "timeslice"
    record = {"case_id": "d05-mnist+pcb-default-concurrent", "mode": "concurrent", "fg_model": "mnist",
              "bg_model": "pcb", "sharing": "timeslice", "method": "interleaved", "device": "NVIDIA H200",
              "concurrency_efficiency": 1.7, "concurrency_efficiency_ci": [1.65, 1.75], "oom": False}
    save_measured_case(session, record)
    summary = planner_validation_random.summarize(tmp_path, ROOT)
    (row,) = summary["measured"]
    assert row["pair"] == ["mnist", "pcb"] and row["measured"] == 1.7 and row["planned_before"] is not None
    text = planner_validation_random.table(summary)
    assert text.startswith("# Contended pairs drawn at random, predicted blind")
    assert "| mnist+pcb | timeslice | NVIDIA H200 | 1.700 [1.650, 1.750] |" in text
