"""The scaling model: its fit reproduces the measured counts, its predictions follow its formula,
and every interval holds its point estimate (property tests over drawn step times)."""
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_gpu_pairs.analysis.scaling.model import MODELS, Fit, FitError, Point
from pytest_gpu_pairs.record.scaling import Estimate

step_times = st.floats(1e-3, 10.0)
relative_errors = st.floats(0.0005, 0.2)
dfs = st.integers(1, 30)
models = st.sampled_from(sorted(MODELS))
counts = st.integers(1, 64)


def point(gpus, mean, relative=0.02, df=9):
    return Point(gpus, Estimate(mean, mean * relative, float(df)))


@st.composite
def two_counts(draw):
    t1, t2 = draw(step_times), draw(step_times)
    return (point(1, t1, draw(relative_errors), draw(dfs)), point(2, t2, draw(relative_errors), draw(dfs)))


@given(two_counts(), models)
def test_a_fit_to_one_and_two_gpus_passes_through_both(points, model):
    assume(points[1].step.mean >= points[0].step.mean)
    fit = Fit(model, points)
    for p in points:
        assert fit.step_time(p.gpus).mean == pytest.approx(p.step.mean, rel=1e-9)
    t1, c = fit.parameters
    assert t1 == pytest.approx(points[0].step.mean, rel=1e-9)
    assert c == pytest.approx(points[1].step.mean - points[0].step.mean, rel=1e-7, abs=1e-12)


@given(two_counts(), models, counts)
def test_a_step_that_got_shorter_with_more_gpus_gives_no_negative_cost(points, model, gpus):
    """c below 0 is physically impossible at a fixed per-GPU batch: the model holds it at 0 and
    predicts the measured steps' weighted mean on every count."""
    assume(points[1].step.mean < points[0].step.mean)
    fit = Fit(model, points)
    t1, c = fit.parameters
    weights = [1 / p.step.se**2 for p in points]
    assert c == 0.0 and fit.bounded
    assert t1 == pytest.approx(sum(w * p.step.mean for w, p in zip(weights, points)) / sum(weights), rel=1e-9)
    assert fit.step_time(gpus).mean == pytest.approx(t1, rel=1e-12)


@given(step_times, st.floats(0.0, 5.0), models, st.lists(counts, min_size=2, max_size=6, unique=True), relative_errors)
def test_a_fit_to_points_on_the_model_reproduces_them(t1, c, model, gpus, relative):
    g = MODELS[model]
    fit = Fit(model, tuple(point(n, t1 + c * g(n), relative) for n in gpus))
    fitted_t1, fitted_c = fit.parameters
    assert fitted_t1 == pytest.approx(t1, rel=1e-6, abs=1e-9)
    assert fitted_c == pytest.approx(c, rel=1e-6, abs=1e-9)
    assert fit.inflation == pytest.approx(1.0)


@given(two_counts(), models, counts)
def test_every_interval_holds_its_point_estimate(points, model, gpus):
    fit = Fit(model, points)
    for estimate in (fit.step_time(gpus), fit.efficiency(gpus), fit.ratio(gpus, 1), fit.ratio(gpus, 4)):
        low, high = estimate.interval()
        assert low <= estimate.mean <= high


@given(step_times, st.floats(0.0, 5.0), models)
def test_a_step_never_gets_shorter_with_more_gpus_when_the_second_gpu_costs_time(t1, extra, model):
    fit = Fit(model, (point(1, t1), point(2, t1 + extra)))
    times = [fit.step_time(n).mean for n in range(1, 17)]
    assert all(b >= a - 1e-12 for a, b in zip(times, times[1:]))
    efficiencies = [fit.efficiency(n).mean for n in range(1, 17)]
    assert all(b <= a + 1e-12 for a, b in zip(efficiencies, efficiencies[1:]))


def test_the_ring_model_levels_off_at_twice_the_two_gpu_cost():
    fit = Fit("ring", (point(1, 1.0), point(2, 1.1)))
    assert fit.step_time(4).mean == pytest.approx(1.0 + 0.1 * 1.5)
    assert fit.step_time(6).mean == pytest.approx(1.0 + 0.1 * 5 / 3)
    assert fit.step_time(1000).mean == pytest.approx(1.2, abs=1e-3)
    assert fit.alternatives(4) == pytest.approx({"log2": 1.2, "linear": 1.3})


def test_two_measured_intervals_carry_through_to_a_prediction():
    """t(4) = t1 (1 - g) + t2 g with g = 1.5 under ring: its variance is (0.5 se1)^2 + (1.5 se2)^2."""
    fit = Fit("ring", (Point(1, Estimate(1.0, 0.01, 1e6)), Point(2, Estimate(1.1, 0.02, 1e6))))
    estimate = fit.step_time(4)
    assert estimate.se == pytest.approx(math.hypot(0.5 * 0.01, 1.5 * 0.02), rel=1e-4)
    assert estimate.interval()[1] - estimate.mean == pytest.approx(1.96 * estimate.se, rel=1e-3)


def test_more_counts_than_parameters_widen_the_interval_when_they_scatter():
    tight = Fit("ring", (point(1, 1.0, 0.001), point(2, 1.1, 0.001), point(4, 1.3, 0.001)))
    assert tight.inflation > 1.0
    assert tight.step_time(6).se > Fit("ring", (point(1, 1.0, 0.001), point(2, 1.1, 0.001))).step_time(6).se * 0.5


def test_a_point_without_an_interval_gives_predictions_without_one():
    fit = Fit("ring", (Point(1, Estimate(1.0, None, 0.0)), point(2, 1.2)))
    assert fit.step_time(4).mean == pytest.approx(1.3)
    assert fit.step_time(4).interval() is None


@pytest.mark.parametrize("points, expected", [
    ((), "got none"),
    ((point(2, 1.0), point(2, 1.1)), "got [2]"),
])
def test_one_count_cannot_be_fitted(points, expected):
    with pytest.raises(FitError, match=r"two GPU counts or more.*" + expected.replace("[", r"\[").replace("]", r"\]")):
        Fit("ring", points)


def test_an_unknown_model_is_refused():
    with pytest.raises(FitError, match="ring, log2, linear"):
        Fit("amdahl", (point(1, 1.0), point(2, 1.1)))
