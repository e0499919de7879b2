"""Intervals, Welch's test and the stopping rule, checked against scipy and by their rules."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from pytest_gpu_pairs.record.stats import StoppingRule, interval, t_quantile, welch_p_value

values = st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), min_size=2, max_size=30)
measured = st.lists(st.integers(-10**5, 10**5).map(lambda i: i / 100), min_size=2, max_size=30)  # figures as rounds give them


@given(p=st.floats(min_value=0.001, max_value=0.999), df=st.integers(min_value=1, max_value=500))
def test_the_t_quantile_is_scipys(p, df):
    assert t_quantile(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), rel=1e-9, abs=1e-9)


@given(xs=values)
def test_the_interval_is_scipys_and_holds_the_mean(xs):
    ci = interval(xs)
    assert ci.n == len(xs) and ci.low <= ci.mean <= ci.high
    low, high = scipy_stats.t.interval(0.95, len(xs) - 1, loc=sum(xs) / len(xs), scale=scipy_stats.sem(xs))
    if len(set(xs)) > 1 and math.isfinite(low):  # scipy gives nan where the spread is below its precision
        assert (ci.low, ci.high) == (pytest.approx(low, rel=1e-7, abs=1e-9), pytest.approx(high, rel=1e-7, abs=1e-9))


def test_one_value_has_a_mean_and_no_interval_and_missing_values_are_left_out():
    ci = interval([1.5, None, float("nan")])
    assert ci.mean == 1.5 and ci.low is None and ci.relative_half_width is None and ci.as_list() is None
    assert interval([]).mean is None


@given(base=measured, shift=st.floats(min_value=-10, max_value=10))
def test_welch_is_scipys(base, shift):
    new = [x * 1.1 + shift for x in base]
    expected = scipy_stats.ttest_ind(base, new, equal_var=False).pvalue
    got = welch_p_value(base, new)
    if math.isnan(expected):
        assert got in (0.0, 1.0)
    else:
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_welch_says_nothing_with_one_round_on_a_side():
    assert welch_p_value([1.0], [1.0, 2.0]) is None and welch_p_value([1.0, 2.0], []) is None


@given(xs=st.lists(st.floats(min_value=0.5, max_value=2.5, allow_nan=False), min_size=1, max_size=40),
       precision=st.one_of(st.none(), st.floats(min_value=0.001, max_value=0.5)),
       spent=st.floats(min_value=0, max_value=400))
def test_the_stopping_rule_stops_for_a_stated_reason_and_only_then(xs, precision, spent):
    rule = StoppingRule(precision, min_rounds=3, max_rounds=30, max_seconds=180)
    stop, why = rule.verdict(xs, spent, round_s=15)
    assert stop == (why is not None)
    if len(xs) >= 30 or spent + 15 > 180:
        assert stop
    if precision is None and len(xs) >= 3:
        assert stop and why.startswith("fixed")
    reached = interval(xs).relative_half_width
    if stop and why.startswith("precision reached"):
        assert len(xs) >= 3 and reached <= precision
    if not stop:
        assert len(xs) < 30 and spent + 15 <= 180


def test_rounds_are_added_until_the_interval_is_narrow_enough():
    rule = StoppingRule(0.03, min_rounds=3, max_rounds=30, max_seconds=1e9)
    effs = [1.9, 2.1, 1.8]
    assert rule.verdict(effs, 0) == (False, None)
    tight = [2.0, 2.01, 1.99, 2.0]
    stop, why = rule.verdict(tight, 0)
    assert stop and why.startswith("precision reached")
