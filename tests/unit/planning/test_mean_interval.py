"""A pair measured in several sessions: the interval of their mean narrows as sessions agree and
widens where they disagree beyond their own noise."""
from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning.measured import mean_interval, read_measured

centres = st.floats(0.5, 2.5)
halves = st.floats(0.001, 0.5)


def _half(interval: tuple[float, float]) -> float:
    return (interval[1] - interval[0]) / 2


@given(centres, halves)
def test_one_session_is_its_own_interval(centre, half):
    low, high = mean_interval([(centre - half, centre + half)])
    assert math.isclose(low, centre - half, abs_tol=1e-12) and math.isclose(high, centre + half, abs_tol=1e-12)


@given(centres, halves, st.integers(2, 9))
def test_sessions_that_agree_narrow_it_by_the_root_of_their_number(centre, half, n):
    combined = mean_interval([(centre - half, centre + half)] * n)
    assert math.isclose(_half(combined), half / math.sqrt(n), rel_tol=1e-9)
    assert math.isclose(sum(combined) / 2, centre, abs_tol=1e-12)


@given(centres, halves, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_more_disagreement_never_narrows_it(centre, half, apart, further):
    def two(gap: float) -> tuple[float, float]:
        return mean_interval([(centre - gap - half, centre - gap + half), (centre + gap - half, centre + gap + half)])
    assert _half(two(apart + further)) >= _half(two(apart)) - 1e-12


@given(centres, halves, st.floats(0.2, 1.0))
def test_sessions_apart_by_more_than_their_noise_widen_it_past_each_ones(centre, half, apart):
    gap = 3 * half + apart
    combined = mean_interval([(centre - gap - half, centre - gap + half), (centre + gap - half, centre + gap + half)])
    assert _half(combined) > half


@given(st.lists(st.tuples(centres, halves), min_size=1, max_size=6))
def test_it_holds_the_mean_of_the_sessions_centres(sessions):
    low, high = mean_interval([(c - h, c + h) for c, h in sessions])
    mean = sum(c for c, _ in sessions) / len(sessions)
    assert low <= mean + 1e-12 and mean - 1e-12 <= high


def test_a_pair_measured_again_on_another_host_reads_the_spread_between_the_sessions():
    """The H200's resnet44 + word_lm, time-sliced: 1.56 [1.47, 1.64] on one host, 1.86 [1.81, 1.90] on
    another; their mean's interval is wider than either session's."""
    from tools.codegen.h200_tables import REFERENCE
    measured = read_measured([REFERENCE / "timeslice", REFERENCE / "remeasured" / "timeslice"])
    pair = measured.pairs[(("resnet44", "word_lm"), "timeslice")]
    assert pair.records == 2 and pair.efficiency_ci is not None
    low, high = pair.efficiency_ci
    assert low < 1.47 and high > 1.90
    assert math.isclose(pair.efficiency, (1.555443 + 1.855803) / 2, abs_tol=1e-3)
