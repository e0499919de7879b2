"""The blind studies' tally: every judged prediction of every blind study's summary, wherever the
study put it, counted once per mechanism; the reference's own validation left out."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.planner_validation import blind_tally, regenerate


def _row(sharing: str, error, covered) -> dict:
    return {"pair": ["a", "b"], "sharing": sharing, "error": error, "covered": covered}


def test_predictions_are_found_at_any_depth_and_rows_without_an_error_are_not_judged():
    summary = {"measured": [_row("mps", 0.1, True)], "from_busy_here": {"x": [_row("mps", 0.3, False)]},
               "groups": [[_row("timeslice", None, None)]]}
    tallies = blind_tally.by_mechanism(lambda path: json.dumps(summary), ["one"])
    assert tallies["mps"] == blind_tally.Tally(2, pytest.approx(0.2), pytest.approx(0.2), 0.3, 1)
    assert tallies["timeslice"].n == 0 and "no figure" in tallies["timeslice"].line("timeslice", "now")


@given(st.lists(st.tuples(st.floats(0, 2), st.booleans()), min_size=1, max_size=20))
def test_the_tally_reads_the_errors_it_was_given(figures):
    found = blind_tally.tally([_row("mps", e, c) for e, c in figures])
    errors = sorted(e for e, _ in figures)
    assert found.n == len(figures) and found.inside == sum(c for _, c in figures)
    assert found.worst == errors[-1] and errors[0] <= found.median <= errors[-1]


def test_a_missing_summary_is_passed_over_and_the_reference_validation_is_not_blind():
    assert blind_tally.by_mechanism(lambda path: None, ["gone"]) == {}
    assert regenerate.COLLECTED[0][1] not in blind_tally.blind_folders()
    assert len(blind_tally.blind_folders()) == len(regenerate.COLLECTED) - 1


def test_the_committed_blind_studies_tally_every_mechanism(capsys):
    assert blind_tally.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines} == {"mps", "timeslice"}
    assert all(" inside their intervals" in line for line in lines)


def test_by_study_adds_one_tally_per_study_after_the_whole(capsys):
    assert blind_tally.main(["--by-study"]) == 0
    lines = capsys.readouterr().out.splitlines()
    whole = [line for line in lines if "(" not in line]
    assert {line.split()[0] for line in whole} == {"mps", "timeslice"} and lines[:len(whole)] == whole
    studies = {line[line.index("(") + 1:line.index(")")] for line in lines[len(whole):]}
    assert studies == set(blind_tally.blind_folders())
    counted = sum(int(line.split(" of ")[1].split()[0]) for line in lines[len(whole):] if "no figure" not in line)
    assert counted == sum(int(line.split(" of ")[1].split()[0]) for line in whole)
