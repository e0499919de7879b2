"""Figures no sharing can give carry a note on their key, whatever method or device measured them."""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.record.build import aggregate
from pytest_gpu_pairs.record.model import built
from pytest_gpu_pairs.record.plausible import impossible, impossible_notes, with_impossible_notes


def test_a_value_past_its_bound_is_flagged_with_the_value_and_the_likely_cause():
    notes = impossible_notes({"concurrency_efficiency": 3.97, "fg_slowdown": 0.25})
    assert notes["concurrency_efficiency"].startswith("suspect: 3.970 lies above 2, which no sharing can give")
    assert notes["fg_slowdown"].startswith("suspect: 0.250 lies below 1, the foreground ran faster")
    assert "pytest-xdist worker" in notes["concurrency_efficiency"]


def test_figures_within_the_bounds_and_missing_ones_are_not_flagged():
    assert impossible_notes({"concurrency_efficiency": 2.0, "fg_slowdown": 1.0}) == {}
    assert impossible_notes({"concurrency_efficiency": None, "fg_slowdown": True}) == {}
    assert not impossible("concurrency_efficiency", 1.99) and impossible("fg_slowdown", 0.99)
    assert not impossible("bg_progress_ratio", 5.0)


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
