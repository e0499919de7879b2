"""A pair measured in several sessions: the interval of their mean narrows as sessions agree and
widens where they disagree beyond their own noise; the spread between sessions, over the pairs
measured twice, widens a plan's measured figures."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning.measured import mean_interval, read_measured, session_spread

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


@given(st.lists(st.tuples(centres, halves), min_size=1, max_size=5), st.integers(2, 4))
def test_pairs_whose_sessions_agree_exactly_show_no_spread(pairs, sessions):
    spread = session_spread([[(c - h, c + h)] * sessions for c, h in pairs])
    assert spread is not None and spread.pairs == len(pairs) and spread.sd == 0.0


@given(centres, st.floats(0.005, 0.05), st.floats(0.0, 0.5), st.floats(0.01, 0.5))
def test_sessions_further_apart_show_no_less_spread(centre, half, apart, further):
    def spread(gap: float) -> float:
        found = session_spread([[(centre - gap - half, centre - gap + half), (centre + gap - half, centre + gap + half)]])
        assert found is not None
        return found.sd
    assert spread(apart + further) >= spread(apart)


def test_one_session_a_pair_shows_nothing_of_the_spread():
    assert session_spread([[(1.5, 1.7)], [(1.8, 1.9)]]) is None


def test_a_wide_session_weighs_little_against_precise_ones():
    """Two precise sessions that agree, and a third of an archived short run far off with an interval
    of ±0.8: the pair says little of a spread between sessions."""
    precise = session_spread([[(1.78, 1.82), (1.79, 1.83)]])
    with_wide = session_spread([[(1.78, 1.82), (1.79, 1.83), (0.7, 2.3)]])
    assert precise is not None and with_wide is not None and with_wide.sd <= 0.01


def test_the_h200s_sessions_disagree_beyond_their_noise_and_a_plan_says_so():
    """On the H200, pairs measured in two sessions on different hosts (first 16, then all 68): four of
    five drawn at random read 10-15 % lower on the second, and the 68 disagree by 0.18 of the error
    scale beyond their own noise. A plan's figure for a measured pair carries that spread, less of
    it for a light pair, which reproduces."""
    from pytest_gpu_pairs.planning.cards import H200
    from pytest_gpu_pairs.planning.measured import RECORD_Z, read_reference
    from pytest_gpu_pairs.planning.predict import _measured_efficiency
    from pytest_gpu_pairs.planning.scale import efficiency_scale

    measured = read_reference(H200.reference).measured
    spread = measured.between_sessions
    assert spread is not None and spread.pairs >= 16 and spread.sd > 0.1
    pair = measured.of(("resnet20", "resnet32"), "timeslice")
    assert pair is not None and pair.efficiency is not None and pair.efficiency_ci is not None
    figure = _measured_efficiency(pair, spread)
    own = (pair.efficiency_ci[1] - pair.efficiency_ci[0]) / 2
    assert figure.low is not None and figure.high is not None
    assert math.isclose((figure.high - figure.low) / 2, math.hypot(own, RECORD_Z * spread.sd * efficiency_scale(pair.efficiency)))
    assert "spread between sessions" in figure.basis
    assert _measured_efficiency(pair).low == pytest.approx(pair.efficiency_ci[0])
    light = measured.of(("mnist_ff", "mnist_rnn"), "timeslice")
    assert light is not None and light.efficiency is not None and light.efficiency > 1.95
    light_figure = _measured_efficiency(light, spread)
    assert light_figure.low is not None and light_figure.high is not None and figure.low is not None
    assert light_figure.high - light_figure.low < figure.high - figure.low


@pytest.mark.parametrize("spread, place", [({"sd": -0.1, "pairs": 3}, "between_sessions.sd"),
                                           ({"sd": 0.2, "pairs": 0}, "between_sessions.pairs"),
                                           ({"sd": 0.2}, "between_sessions.pairs"),
                                           ("wide", "between_sessions")])
def test_a_reference_file_with_a_bad_spread_is_refused_in_one_line(spread, place):
    from pytest_gpu_pairs.inputs import SettingsError
    from pytest_gpu_pairs.planning.measured import parse_reference

    with pytest.raises(SettingsError) as refused:
        parse_reference({"device": "NVIDIA H200", "pairs": [], "between_sessions": spread}, "pairs.json")
    message = str(refused.value)
    assert "pairs.json" in message and place in message and "\n" not in message


@given(st.integers(1, 40), st.integers(1, 40), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_results_over_a_table_keep_the_spread_that_rests_on_more_pairs(mine, theirs, my_sd, their_sd):
    from pytest_gpu_pairs.planning.measured import Measured, SessionSpread

    ours, table = SessionSpread(my_sd, mine), SessionSpread(their_sd, theirs)
    kept = Measured(between_sessions=ours).over(Measured(between_sessions=table)).between_sessions
    assert kept == (ours if mine >= theirs else table)
    assert Measured().over(Measured(between_sessions=table)).between_sessions == table
    assert Measured(between_sessions=ours).over(Measured()).between_sessions == ours
