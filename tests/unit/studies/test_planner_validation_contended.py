"""The contended pairs' study: every pair no H200 study held that the planner predicts below 1.9 under
MPS, taken whole, set beside the plan committed before they ran."""
from __future__ import annotations

import json
import shutil

import pytest
from support.helpers import save_measured_case

from pytest_gpu_pairs.planning.measured import pair_key
from pytest_gpu_pairs.studies.collates import planner_validation_contended
from tools.codegen.reference_pairs import ROOT
from tools.planner_validation import draw_pairs

FOLDER = ROOT / "reports/reference/planner_validation/contended"
SETTINGS = ROOT / "settings/planner_contended.json"


def test_no_pair_is_one_an_earlier_study_measured_and_later_draws_keep_them_out():
    before = draw_pairs.measured_elsewhere(excluding=SETTINGS.relative_to(ROOT).as_posix())
    pairs = draw_pairs.pairs_in(SETTINGS)
    assert len(pairs) == 9 and not pairs & before
    assert pairs <= draw_pairs.measured_elsewhere()


def test_the_plan_committed_before_the_run_calls_every_pair_contended_under_mps():
    planned = {pair_key(*p["pair"]): p["mechanisms"] for p in json.loads((FOLDER / "plan.json").read_text())["pairs"]}
    assert set(planned) == draw_pairs.pairs_in(SETTINGS)
    assert all(m["mps"]["efficiency"]["value"] < 1.9 for m in planned.values())
    assert all(m["timeslice"]["efficiency"]["value"] is not None for m in planned.values())


@pytest.mark.parametrize("under", ["timeslice", "mps"])
def test_a_candidate_under_one_mechanism_is_judged_by_that_mechanism_alone(under):
    pool = draw_pairs.candidates(1.99, under=under)
    assert pool and all(predicted[under] < 1.99 for _, predicted in pool)


def test_the_candidates_under_either_mechanism_are_those_under_one_or_the_other():
    either = {pair for pair, _ in draw_pairs.candidates(1.99)}
    one = {pair for m in draw_pairs.MECHANISMS for pair, _ in draw_pairs.candidates(1.99, under=m)}
    assert either == one and either


def test_taking_every_candidate_needs_no_seed_and_a_draw_needs_one(tmp_path, capsys):
    out = tmp_path / "all.json"
    assert draw_pairs.main(["--all", "--under", "mps", "--below", "1.99", "--name", "planner_x", "--prefix", "x",
                            "--settings", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["name"] == "planner_x" and written["pairs"][0]["group"] == "x01"
    assert {pair for pair, _ in draw_pairs.candidates(1.99, under="mps")} == draw_pairs.pairs_in(out)
    assert "reports/reference/planner_validation/x/" in written["description"]
    for wrong in ([], ["--all", "--seed", "1"]):
        with pytest.raises(SystemExit):
            draw_pairs.main(wrong)
    assert "give either --seed or --all" in capsys.readouterr().err


def test_a_measured_pair_stands_beside_the_plan_and_the_table_names_the_study(tmp_path):
    shutil.copy(FOLDER / "plan.json", tmp_path / "plan.json")
    record = {"case_id": "c04-mrt_oast+vulberta_cnn-default-concurrent-mps", "mode": "concurrent",
              "fg_model": "mrt_oast", "bg_model": "vulberta_cnn", "sharing": "mps", "method": "interleaved",
              "device": "NVIDIA H200", "concurrency_efficiency": 1.3, "concurrency_efficiency_ci": [1.25, 1.35],
              "oom": False}
    save_measured_case(tmp_path / "mps", record)
    summary = planner_validation_contended.summarize(tmp_path, ROOT)
    (row,) = summary["measured"]
    assert row["pair"] == ["mrt_oast", "vulberta_cnn"] and row["measured"] == 1.3 and row["planned_before"] is not None
    text = planner_validation_contended.table(summary)
    assert text.startswith("# Every pair contended under MPS, predicted blind")
    assert "| mrt_oast+vulberta_cnn | mps | NVIDIA H200 | 1.300 [1.250, 1.350] |" in text
