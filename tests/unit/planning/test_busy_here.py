"""Busy fractions profiled on the host that runs the pairs: a host-bound job keeps the card busier on a
faster host, so the planner predicts from the busy fractions measured there, while what it learnt
from the reference pairs (measured on the table's hosts) stays as it was."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.planning.cards import H200
from pytest_gpu_pairs.planning.own_profiles import OwnProfiles, busy_measured_here, parse_profile
from pytest_gpu_pairs.planning.predict import Planner
from pytest_gpu_pairs.record.store import save_profile

from .test_own_profiles import stored

TABLE, REFERENCE = H200.table(), H200.pairs().measured


def _planner(busy_here=None) -> Planner:
    return Planner(TABLE, REFERENCE, busy_here=busy_here or {})


BASE = _planner()


def _own(workload, util, device_name="NVIDIA H200", batch_size=None, device="cuda"):
    figures = {"util_avg_pct": util, "device_name": device_name}
    if batch_size is not None:
        figures["batch_size"] = batch_size
    return parse_profile(stored(workload, device, **figures), f"out/_profiles/{workload}.{device}.json")


def test_a_busier_host_lowers_the_time_sliced_prediction_and_the_learning_stays_as_it_was():
    busier = _planner({"resnet20": 0.74, "mrt_oast": 0.92})
    before = BASE.efficiency(("mrt_oast", "resnet20"), "timeslice")
    after = busier.efficiency(("mrt_oast", "resnet20"), "timeslice")
    assert after.value < before.value - 0.2
    assert (busier.timeslicing, busier.mps, busier.efficiency_model.n) == (BASE.timeslicing, BASE.mps, BASE.efficiency_model.n)
    assert busier.efficiency(("mnist", "word_lm"), "timeslice") == BASE.efficiency(("mnist", "word_lm"), "timeslice")


def test_a_measured_pair_stays_measured_whatever_the_host_reads():
    busier = _planner({"resnet20": 0.9, "resnet32": 0.9})
    assert busier.efficiency(("resnet20", "resnet32"), "timeslice") == BASE.efficiency(("resnet20", "resnet32"), "timeslice")


@settings(deadline=None, max_examples=30)  # a planner a case, learning from the reference pairs each time (0.2-0.4 s):
# the two paths are one computation, which thirty pairs of busy fractions over both mechanisms exercise
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.sampled_from(["timeslice", "mps"]))
def test_busy_read_here_predicts_what_the_same_busy_read_in_the_pairs_own_solo_phases_predicts(a, b, sharing):
    """The plan from a profile on the pairs' host is the validation's row "busy read on the pair's host"."""
    here = _planner({"hrnet18": a, "word_lm": b})
    assert here.efficiency(("hrnet18", "word_lm"), sharing) == \
        BASE.efficiency_from_busy(("hrnet18", "word_lm"), sharing, {"hrnet18": a, "word_lm": b})


@pytest.mark.parametrize("profile, taken", [
    (_own("resnet20", 74.0), {"resnet20": pytest.approx(0.74)}),
    (_own("resnet20", 74.0, batch_size=128), {"resnet20": pytest.approx(0.74)}),
    (_own("resnet20", 74.0, device_name="NVIDIA H100 80GB HBM3"), {}),
    (_own("resnet20", 74.0, batch_size=64), {}),
    (_own("my_command_job", 50.0), {}),
    (_own("resnet20", 0.0, device="cpu"), {}),
])
def test_only_a_profile_of_a_table_workload_on_the_tables_gpu_model_at_its_batch_size_is_taken(profile, taken):
    assert busy_measured_here(TABLE, OwnProfiles((profile,)), "cuda") == taken
    assert busy_measured_here(TABLE, OwnProfiles((profile,)), "cpu") == {}


def test_gpu_pairs_plan_says_which_busy_fractions_it_measured_on_this_host(tmp_path, capsys):
    settings = str(Path(__file__).parents[3] / "settings" / "planner_unseen.json")
    argv = ["plan", settings, "-k", "u02", "--card", "h200", "--sharing", "timeslice", "--out", str(tmp_path), "--json"]
    assert gpu_pairs(argv) == 0
    table = json.loads(capsys.readouterr().out)
    save_profile(tmp_path, "resnet20", "cuda", stored("resnet20", "cuda", util_avg_pct=74.0, device_name="NVIDIA H200"))
    assert gpu_pairs(argv) == 0
    here = json.loads(capsys.readouterr().out)
    assert (table["model"]["busy_measured_here"], here["model"]["busy_measured_here"]) == ([], ["resnet20"])
    efficiency = [plan["pairs"][0]["mechanisms"]["timeslice"]["efficiency"]["value"] for plan in (table, here)]
    assert efficiency[1] < efficiency[0]
