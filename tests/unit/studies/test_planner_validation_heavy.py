"""The heavy pairs' study: pairs with a card-filling job, outside every reference set, set beside the
plan committed before they ran, as the unseen pairs are."""
from __future__ import annotations

import json
import shutil

import pytest
from support.helpers import save_measured_case

from pytest_gpu_pairs.planning.cards import H200
from pytest_gpu_pairs.planning.measured import pair_key
from pytest_gpu_pairs.studies.collates import planner_validation_heavy
from tools.codegen.reference_pairs import ROOT

FOLDER = ROOT / "reports/reference/planner_validation/heavy"
SETTINGS = ROOT / "settings/planner_heavy.json"
CARD_FILLING = {"vulberta_cnn", "pcb", "mrt_oast"}


def _pairs() -> list[tuple[str, str]]:
    return [pair_key(p["foreground"]["model"], p["background"]["model"]) for p in json.loads(SETTINGS.read_text())["pairs"]]


def test_every_pair_holds_a_card_filling_job_and_none_is_in_the_reference_set():
    reference = {k for k, _ in H200.pairs().measured.pairs}
    assert all(CARD_FILLING & set(pair) and pair not in reference for pair in _pairs())


def test_the_plan_committed_before_the_run_predicts_every_pair_both_ways():
    planned = {pair_key(*p["pair"]): p["mechanisms"] for p in json.loads((FOLDER / "plan.json").read_text())["pairs"]}
    assert set(planned) == set(_pairs())
    assert all(m[mechanism]["efficiency"]["value"] is not None for m in planned.values() for mechanism in ("timeslice", "mps"))


def test_a_measured_pair_stands_beside_the_plan_and_the_table_names_the_study(tmp_path):
    shutil.copy(FOLDER / "plan.json", tmp_path / "plan.json")
    session = tmp_path / "mps"
    record = {"case_id": "b05-resnet32+vulberta_cnn-default-concurrent-mps", "mode": "concurrent", "fg_model": "resnet32",
              "bg_model": "vulberta_cnn", "sharing": "mps", "method": "interleaved", "device": "NVIDIA H200",
              "concurrency_efficiency": 1.5, "concurrency_efficiency_ci": [1.45, 1.55], "oom": False}
    save_measured_case(session, record)
    summary = planner_validation_heavy.summarize(tmp_path, ROOT)
    (row,) = summary["measured"]
    assert row["pair"] == ["resnet32", "vulberta_cnn"] and row["sharing"] == "mps" and row["measured"] == 1.5
    planned = next(p for p in json.loads((FOLDER / "plan.json").read_text())["pairs"]
                   if pair_key(*p["pair"]) == ("resnet32", "vulberta_cnn"))["mechanisms"]["mps"]["efficiency"]
    assert row["planned_before"]["value"] == pytest.approx(planned["value"])
    text = planner_validation_heavy.table(summary)
    assert text.startswith("# Pairs with a card-filling job, predicted blind")
    assert "| resnet32+vulberta_cnn | mps | NVIDIA H200 | 1.500 [1.450, 1.550] |" in text
    assert "gpu-pairs study run planner_validation_heavy" in planner_validation_heavy.table(
        planner_validation_heavy.summarize(tmp_path / "empty", ROOT))
