"""The measurements' own noise floor: the errors a planner that knew every pair's true efficiency would
show against them, so that a worst error can be read against what the measurements can tell (the
line ``plan-validate`` prints is checked beside MPS's numbers in ``test_mps_capacity``); and again
with the spread between sessions on several hosts, as a plan is for the next host."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning.measured import MeasuredPair, SessionSpread
from pytest_gpu_pairs.planning.scale import efficiency_scale
from pytest_gpu_pairs.planning.validate import NORMAL, floors_across_hosts, noise_floor
from pytest_gpu_pairs.planning.validate_command import hosts_line

Z95 = NORMAL.inv_cdf(0.975)


def pair(value: float, half_width: float, name: str = "a") -> MeasuredPair:
    return MeasuredPair((name, "b"), "timeslice", value, (value - half_width, value + half_width), None, None, 1, ("x",))


values = st.floats(0.5, 2.0)
widths = st.floats(0.001, 0.3)


@given(values, widths)
def test_one_pair_reads_the_quantiles_of_its_own_normal_error(value, half_width):
    sd = half_width / Z95 / value
    floor = noise_floor([pair(value, half_width)])
    assert floor["n_pairs"] == 1
    assert floor["median_error"] == pytest.approx(NORMAL.inv_cdf(0.75) * sd, rel=1e-6)
    assert floor["worst_error"] == pytest.approx(NORMAL.inv_cdf(0.75) * sd, rel=1e-6)
    assert floor["worst_error_p90"] == pytest.approx(NORMAL.inv_cdf(0.95) * sd, rel=1e-6)


@given(st.lists(st.tuples(values, widths), min_size=1, max_size=20), st.floats(1.0, 5.0))
def test_noisier_measurements_raise_the_floor_in_proportion(measured, factor):
    plain = noise_floor([pair(v, w, str(i)) for i, (v, w) in enumerate(measured)])
    wider = noise_floor([pair(v, w * factor, str(i)) for i, (v, w) in enumerate(measured)])
    for key in ("median_error", "worst_error", "worst_error_p90"):
        assert wider[key] == pytest.approx(factor * plain[key], rel=1e-6)


@given(st.lists(st.tuples(values, widths), min_size=2, max_size=20))
def test_the_worst_of_more_pairs_is_worse_than_the_median_and_holds_its_odds(measured):
    pairs = [pair(v, w, str(i)) for i, (v, w) in enumerate(measured)]
    floor = noise_floor(pairs)
    assert floor["median_error"] <= floor["worst_error"] <= floor["worst_error_p90"]
    sds = [w / Z95 / v for v, w in measured]
    held = math.prod(2.0 * NORMAL.cdf(floor["worst_error"] / sd) - 1.0 for sd in sds)
    assert held == pytest.approx(0.5, abs=1e-6)


def test_exact_measurements_and_none_with_an_interval_say_so():
    assert noise_floor([pair(1.5, 0.0)])["worst_error"] == pytest.approx(0.0, abs=1e-9)
    bare = MeasuredPair(("a", "b"), "timeslice", 1.5, None, None, None, 1, ("x",))
    assert noise_floor([bare]) == {"n_pairs": 0, "median_error": None, "worst_error": None, "worst_error_p90": None}


def test_a_measurement_far_noisier_than_its_value_still_reads_a_floor():
    floor = noise_floor([pair(0.5, 5.0)])
    assert floor["worst_error_p90"] == pytest.approx(NORMAL.inv_cdf(0.95) * 5.0 / Z95 / 0.5, rel=1e-6)


def sessions(value: float, half_width: float, records: int, name: str = "a") -> MeasuredPair:
    return MeasuredPair((name, "b"), "timeslice", value, (value - half_width, value + half_width), None, None, records,
                        ("x",))


@given(st.lists(st.tuples(values, widths, st.integers(1, 4)), min_size=1, max_size=20), st.floats(0.01, 1.0))
def test_the_spread_between_hosts_raises_every_figure_and_none_without_it(measured, spread):
    pairs = [sessions(v, w, k, str(i)) for i, (v, w, k) in enumerate(measured)]
    plain, none, across = noise_floor(pairs), noise_floor(pairs, 0.0), noise_floor(pairs, spread)
    for key in ("median_error", "worst_error", "worst_error_p90"):
        assert none[key] == pytest.approx(plain[key], rel=1e-9)
        assert across[key] > plain[key]


@given(values, st.floats(0.01, 1.0), st.integers(1, 4))
def test_an_exact_measurement_misses_the_mean_over_hosts_by_the_spread_over_its_sessions(value, spread, records):
    sd = spread * efficiency_scale(value) / math.sqrt(records) / value
    floor = noise_floor([sessions(value, 0.0, records)], spread)
    assert floor["median_error"] == pytest.approx(NORMAL.inv_cdf(0.75) * sd, rel=1e-6)
    assert floor["worst_error_p90"] == pytest.approx(NORMAL.inv_cdf(0.95) * sd, rel=1e-6)


def test_without_a_pair_measured_twice_the_floor_across_hosts_is_null_and_says_why():
    across = floors_across_hosts([pair(1.5, 0.05)], None)
    assert across["between_sessions"] is None and across["floors"] == {}
    assert hosts_line(across).endswith("not known, no pair was measured in two or more sessions")
    known = floors_across_hosts([pair(1.5, 0.05)], SessionSpread(0.25, 7))
    assert known["between_sessions"] == {"sd": 0.25, "pairs": 7} and known["reason"] is None
    assert "by 0.25 of the error scale, from 7 pair(s)" in hosts_line(known)
    assert known["floors"]["timeslice"]["worst_error"] > floors_across_hosts([pair(1.5, 0.05)], SessionSpread(0.0, 7))[
        "floors"]["timeslice"]["worst_error"]
