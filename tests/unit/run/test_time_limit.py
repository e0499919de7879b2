"""--gpu-pairs-time-limit's rules: durations as a user writes them, each unit decided once before its
first case, a replicate decided whole, and a later, shorter unit still started where it fits."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import dependency_group, expand
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.run.options import GpuPairsOptions, OptionsError
from pytest_gpu_pairs.run.session import GpuPairsSession
from pytest_gpu_pairs.run.time_limit import TimeLimit, fits, parse_duration, played_out


@given(st.integers(0, 99), st.integers(0, 600), st.integers(0, 6000))
def test_a_duration_reads_hours_minutes_and_seconds_in_any_combination(hours, minutes, seconds):
    total = hours * 3600 + minutes * 60 + seconds
    text = "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n)
    if total == 0:
        return
    assert parse_duration(text) == total
    assert parse_duration(f" {total} ") == total


@pytest.mark.parametrize("text, seconds", [("1.5h", 5400.0), ("25m", 1500.0), ("90s", 90.0), ("1h 30m", 5400.0)])
def test_a_duration_with_a_fraction_or_spaces(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "0m", "-5", "abc", "10x", "1h30", "m", "nan", "inf", "1e9", "5 5"])
def test_a_duration_that_is_not_one_is_refused_with_what_was_expected(text):
    with pytest.raises(ValueError, match="expected"):
        parse_duration(text)


def test_the_options_refuse_a_limit_that_is_not_above_zero(tmp_path):
    with pytest.raises(OptionsError, match="--gpu-pairs-time-limit"):
        GpuPairsOptions(settings=(), device="cpu", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                        sample_hz=10.0, out_dir=tmp_path, time_limit_s=0.0)


ASKS = st.lists(st.tuples(st.sampled_from("abcde"), st.floats(0, 5000), st.floats(0, 5000)), max_size=30)


@given(st.floats(1, 5000), ASKS)
def test_each_unit_is_decided_once_at_its_first_ask_and_only_a_unit_that_fits_starts(limit_s, asks):
    limit, first = TimeLimit(limit_s, started=0.0), {}
    for unit, cost_s, now in sorted(asks, key=lambda ask: ask[2]):
        left = limit.left_out(unit, lambda cost=cost_s: cost, now=now)
        first.setdefault(unit, (now, cost_s, left))
        assert left == first[unit][2]  # later asks follow the first, whatever they cost
    for unit, (now, cost_s, left) in first.items():
        assert (left is None) == fits(now, cost_s, limit_s)
        assert left is None or (left.unit, left.cost_s, left.elapsed_s) == (unit, cost_s, now)


UNITS = st.lists(st.tuples(st.text("abcdef", min_size=1, max_size=3), st.floats(0, 3000)), max_size=12,
                 unique_by=lambda unit: unit[0])


@given(UNITS, st.floats(1, 5000), st.floats(0, 100))
def test_played_out_the_units_started_fit_the_limit_and_each_one_left_out_did_not_fit_at_its_turn(units, limit_s, start_s):
    left = played_out(units, limit_s, start_s)
    now = start_s
    for unit, cost_s in units:
        assert (unit in left) == (not fits(now, cost_s, limit_s))
        now += 0.0 if unit in left else cost_s
    assert now <= max(limit_s, start_s)


def _session(tmp_path, limit_s: float, seeds=(1, 2)) -> tuple[GpuPairsSession, list]:
    pairs = [{"group": "hp01", "foreground": {"model": "densenet121"}, "background": {"model": "mnist"},
              "split_by_factor": True}]
    study = parse_experiment({"name": "t", "design": "hp_study", "seeds": list(seeds), "pairs": pairs,
                              "vary": {"learning_rate": [0.2, 5.0], "epochs": [0.5, 1.5]}}, "s.json")
    session = GpuPairsSession(GpuPairsOptions(settings=(), device="cpu", scale=1.0, vram_budget_mb=None,
                                              min_efficiency=None, sample_hz=10.0, out_dir=tmp_path / "out",
                                              time_limit_s=limit_s))
    cases = expand(study)
    session._cases = cases
    session.plan([c.id for c in cases])
    return session, cases


def test_a_replicate_is_decided_whole_and_a_later_shorter_one_still_starts(tmp_path):
    session, cases = _session(tmp_path, limit_s=1000.0)
    blocks: dict = {}
    for case in cases:
        blocks.setdefault(dependency_group(case), []).append(case)
    first, second, third, fourth = blocks.values()
    session.estimates = {c.id: 100.0 for c in cases}  # seven cases a block: 700 s each
    session.estimates.update({c.id: 10.0 for c in third})  # 70 s
    assert session.time_limit is not None
    session.time_limit.started -= 200.0  # the session began 200 s ago
    assert [session.left_out_for_time(c) for c in first] == [None] * 7  # 200 + 700 <= 1000
    session.time_limit.started -= 700.0  # the first block ran
    left = [session.left_out_for_time(c) for c in reversed(second)]
    assert all(x is not None and x.unit == dependency_group(second[0]) and x.cost_s == 700.0 for x in left)
    assert [session.left_out_for_time(c) for c in third] == [None] * 7  # 900 + 70 fits
    assert all(session.left_out_for_time(c) is not None for c in fourth)


def test_only_the_selected_cases_of_a_replicate_are_counted(tmp_path):
    session, cases = _session(tmp_path, limit_s=350.0, seeds=(1,))
    block = [c for c in cases if dependency_group(c) == dependency_group(cases[0])]
    session.estimates = {c.id: 100.0 for c in cases}
    session.plan([c.id for c in block[:3]])  # -k chose three of its seven
    assert session.left_out_for_time(block[0]) is None


def test_without_a_limit_nothing_is_left_out(tmp_path):
    session, cases = _session(tmp_path, limit_s=1.0)
    session.time_limit = None
    session.estimates = {c.id: 1e9 for c in cases}
    assert all(session.left_out_for_time(c) is None for c in cases)
