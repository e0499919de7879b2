"""Figures no sharing can give carry a note on their key, whatever method or device measured them."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.record.build import aggregate
from pytest_gpu_pairs.record.model import built
from pytest_gpu_pairs.record.plausible import (
    BOUNDS,
    flagged,
    impossible,
    impossible_notes,
    round_bound,
    with_impossible_notes,
)


def test_a_value_past_its_bound_is_flagged_with_the_value_and_the_likely_cause():
    notes = impossible_notes({"concurrency_efficiency": 3.97, "fg_slowdown": 0.25})
    assert notes["concurrency_efficiency"].startswith("suspect: 3.970 lies above 2, which no sharing can give")
    assert notes["fg_slowdown"].startswith("suspect: 0.250 lies below 1, the foreground ran faster")
    assert "pytest-xdist worker" in notes["concurrency_efficiency"]


def test_figures_within_the_bounds_and_missing_ones_are_not_flagged():
    assert impossible_notes({"concurrency_efficiency": 2.0, "fg_slowdown": 1.0}) == {}
    assert impossible_notes({"concurrency_efficiency": None, "fg_slowdown": True}) == {}
    assert not impossible("concurrency_efficiency", 1.99) and impossible("fg_slowdown", 0.99)
    assert impossible("bg_progress_ratio", 2.02) and not impossible("bg_progress_ratio", 0.99)


def test_an_interval_wholly_past_the_bound_is_said_and_one_that_reaches_it_is_named():
    whole = impossible_notes({"concurrency_efficiency_ci": [2.05, 2.2], "fg_slowdown_ci": [0.8, 0.95]})
    assert "the interval [2.050, 2.200] lies above 2" in whole["concurrency_efficiency"]
    assert "the interval [0.800, 0.950] lies below 1" in whole["fg_slowdown"]
    reaching = impossible_notes({"concurrency_efficiency": 2.1, "concurrency_efficiency_ci": [1.9, 2.3]})
    assert "2.100 lies above 2 (its interval [1.900, 2.300] reaches 2)" in reaching["concurrency_efficiency"]
    assert impossible_notes({"concurrency_efficiency": 1.95, "concurrency_efficiency_ci": [1.9, 2.1]}) == {}


def test_the_note_follows_an_earlier_note_and_gives_way_to_the_mean_of_the_rounds():
    record = with_impossible_notes({"fg_slowdown": 0.5, "notes": {"fg_slowdown": "from process wall times"}})
    assert record["notes"]["fg_slowdown"].startswith("from process wall times; suspect: 0.500 lies below 1")
    rounds = [built(with_impossible_notes({"fg_slowdown": s, "concurrency_efficiency": 1.5, "oom": False,
                                           "failure": None})) for s in (1.6, 0.8)]
    assert "fg_slowdown" in rounds[1].notes
    mean = aggregate(rounds)
    assert mean.fg_slowdown == pytest.approx(1.2) and "fg_slowdown" not in mean.notes
    again = with_impossible_notes(record)
    assert again["notes"]["fg_slowdown"].count("suspect:") == 1


def test_a_background_faster_beside_the_foreground_than_alone_is_flagged():
    note = impossible_notes({"bg_progress_ratio": 2.02})["bg_progress_ratio"]
    assert note.startswith("suspect: 2.020 lies above 1, the background ran faster beside another job than alone")


def test_a_mean_under_its_bound_built_partly_from_an_impossible_round_is_flagged_with_that_round():
    rounds = [{"round": 1, "complete": True, "concurrency_efficiency": 1.1, "fg_slowdown": 1.5},
              {"round": 2, "complete": True, "concurrency_efficiency": 3.95, "fg_slowdown": 0.34},
              {"round": 3, "complete": False, "concurrency_efficiency": 9.0, "fg_slowdown": 0.01},
              {"round": 4, "complete": True, "concurrency_efficiency": 0.35, "fg_slowdown": 4.0}]
    record = {"concurrency_efficiency": 1.80, "fg_slowdown": 1.95, "rounds": rounds}
    notes = impossible_notes(record)
    assert "round 2 at 3.950 lies above 3.2" in notes["concurrency_efficiency"]
    assert "round 2 at 0.340 lies below 0.625" in notes["fg_slowdown"] and "round 3" not in notes["fg_slowdown"]
    assert flagged(record, "concurrency_efficiency") and flagged(record, "fg_slowdown")


def test_an_interval_that_reaches_below_zero_says_it_says_nothing():
    record = {"fg_slowdown": 7.0, "fg_slowdown_ci": [-72.5, 87.2]}
    assert "its interval [-72.500, 87.200] reaches below 0, which no ratio of rates can" in \
        impossible_notes(record)["fg_slowdown"]
    assert flagged(record, "fg_slowdown") and not flagged({"fg_slowdown": 7.0, "fg_slowdown_ci": [2.0, 12.0]},
                                                          "fg_slowdown")


@given(st.sampled_from(sorted(BOUNDS)), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.data())
def test_a_case_is_flagged_exactly_when_its_mean_or_one_of_its_rounds_lies_past_what_sharing_gives(key, spread, data):
    """Rounds drawn anywhere between 0 and beyond the round bound: flagged iff the mean is past the
    bound or a round past the round bound (intervals left out)."""
    op, bound = BOUNDS[key]
    far = round_bound(key)
    low, high = (0.01, far * 1.2) if op == ">" else (far * 0.8, 3.0)
    values = [low + f * (high - low) for f in spread]
    mean = sum(values) / len(values)
    record = {key: mean, "rounds": [{"round": i + 1, "complete": True, key: v} for i, v in enumerate(values)]}
    past_mean = mean > bound if op == ">" else mean < bound
    past_round = any((v > far if op == ">" else v < far) for v in values)
    assert flagged(record, key) == (past_mean or past_round)


def test_an_efficiency_measured_beside_a_process_that_was_none_of_the_jobs_is_flagged_with_its_memory():
    shared = {"concurrency_efficiency": 1.71, "fg_peak_vram_mb": 3000.0, "other_peak_vram_mb": 5210.0}
    note = impossible_notes(shared)["concurrency_efficiency"]
    assert note.startswith("suspect: processes that are not the case's jobs held up to 5210 MB of the GPU")
    assert flagged(shared, "concurrency_efficiency") and not flagged(shared, "fg_slowdown")
    assert "5210 MB" in with_impossible_notes(shared)["notes"]["concurrency_efficiency"]


@pytest.mark.parametrize("record", [
    {"concurrency_efficiency": 1.71, "fg_peak_vram_mb": 3000.0, "other_peak_vram_mb": None},
    {"concurrency_efficiency": 1.71, "fg_peak_vram_mb": 3000.0, "other_peak_vram_mb": 0},
    {"concurrency_efficiency": 1.71, "fg_peak_vram_mb": None, "other_peak_vram_mb": 5210.0},
], ids=["nobody else", "nothing held", "own jobs unseen: pids not matched, as in a container"])
def test_an_idle_card_or_a_container_whose_pids_nvml_does_not_match_is_not_flagged(record):
    assert impossible_notes(record) == {} and not flagged(record, "concurrency_efficiency")
