"""The decision's arithmetic: time to finish, time saved against the restart cost, memory on the
target count, the criteria's verdicts and the recommendation, with property tests of what must
hold for any measured step times."""
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_gpu_pairs.analysis.scaling.decision import (
    FAIL,
    NOT_GIVEN,
    PASS,
    STAY,
    SWITCH,
    UNCERTAIN,
    UNDECIDED,
    Job,
    Thresholds,
    decide,
    recommend,
    saved_hours,
    target_hours,
    verdict,
)
from pytest_gpu_pairs.analysis.scaling.measured import Case, Workload
from pytest_gpu_pairs.analysis.scaling.model import Fit, Point
from pytest_gpu_pairs.record.scaling import Estimate
from pytest_gpu_pairs.record.stats import t_quantile


def workload(t1=1.0, t2=1.1, relative=0.01, memory=(0.5, 0.52), card_mb=32_000.0, util=(90.0, 85.0), batch=1, t4=None):
    """Cases on 1 and 2 GPUs, and on 4 where ``t4`` is given (memory and utilisation as on 2)."""
    counts = ((1, t1, memory[0], util[0]), (2, t2, memory[1], util[1])) + (((4, t4, memory[1], util[1]),) if t4 else ())
    cases = [Case(n, Estimate(t, t * relative, 9.0), f"r{n}.json", per_gpu_batch=batch, memory_fraction=m,
                  card_memory_mb=card_mb, util_pct=u, energy_per_sample_j=10.0 * t) for n, t, m, u in counts]
    return Workload("s01", "big", {}, cases)


def fit_of(w, model="ring"):
    return Fit(model, tuple(Point(c.gpus, c.step) for c in w.cases))


PREDECESSOR = Job(current_gpus=4, remaining_hours=9 * 24.0, step_time_s=2.6, restart_cost_min=30.0,
                  memory_fraction=0.935)


def test_the_predecessors_job_with_a_tenth_of_a_step_added_by_the_second_gpu():
    """Ring, measured on 1, 2 and 4: t(4) = 1 + 0.1 x 1.5 = 1.15, t(6) = 1 + 0.1 x 5/3; 9 days at 4 GPUs
    take 9 x 4/6 x t(6)/t(4) at 6. The time criterion reads the bounds: no cost beyond 4 GPUs at
    best, the cost per GPU between 2 and 4 (the high ends of both intervals) at worst."""
    w = workload(t4=1.15)
    decision = decide(w, fit_of(w), PREDECESSOR, 6)
    ratio = (1 + 0.1 * 5 / 3) / 1.15
    assert decision.step_ratio.mean == pytest.approx(ratio)
    assert decision.time_target_h.mean == pytest.approx(216 * 4 / 6 * ratio)
    assert decision.saved_h.mean == pytest.approx(216 * (1 - 4 / 6 * ratio))
    assert decision.global_batch == (4, 6)
    by_name = {c.name: c for c in decision.criteria}
    assert by_name["memory per GPU on 6"].value == 0.935 and by_name["memory per GPU on 6"].verdict == FAIL
    half = t_quantile(0.975, 9) * 0.01  # each step time's interval: 1 % standard error, 9 degrees of freedom
    high4, low2 = 1.15 * (1 + half), 1.1 * (1 - half)
    worst = (high4 + 2 * (high4 - low2) / 2) / 1.15
    assert decision.bounds.step_ratio == pytest.approx((1.0, worst))
    assert by_name["time saved vs restart cost"].interval == pytest.approx([216 * (1 - 4 / 6 * worst), 72.0])
    assert by_name["time saved vs restart cost"].verdict == PASS
    assert by_name["iterations done"].verdict == NOT_GIVEN
    assert by_name["GPU utilisation on 4"].value == pytest.approx(0.85) and by_name["GPU utilisation on 4"].why == "measured"
    assert by_name["global batch on 4"].value == 4 and by_name["global batch on 4"].verdict == FAIL
    assert decision.recommendation == STAY and "memory per GPU on 6" in decision.reasons[0]


def test_with_the_memory_batch_and_utilisation_rules_relaxed_the_same_job_switches():
    w = workload(t4=1.15)
    assert decide(w, fit_of(w), PREDECESSOR, 6, Thresholds(memory=1.0, utilization=1.0)).recommendation == STAY
    decision = decide(w, fit_of(w), PREDECESSOR, 6, Thresholds(memory=1.0, utilization=1.0, max_global_batch=8))
    assert decision.recommendation == SWITCH


def test_two_measured_counts_decide_a_count_beyond_them_on_bounds_alone():
    """A two-parameter model through two points has no degree of freedom: no fitted saving beyond them."""
    w = workload()
    decision = decide(w, fit_of(w), PREDECESSOR, 6)
    assert decision.saved_h is None and decision.bounds is not None
    worst_s = decision.bounds.step_ratio[1] * 1.15  # against the fitted 4-GPU step: 4 was not measured
    assert decision.bounds.energy_per_sample_j == pytest.approx((11.0, 11.0 * worst_s / 1.1))  # 2's energy, 2's step


def test_remaining_steps_without_the_jobs_step_time_use_the_measured_one():
    w = workload(t1=2.0, t2=2.0)
    job = Job(current_gpus=1, remaining_steps=3600.0)
    assert target_hours(fit_of(w), job, 2).mean == pytest.approx(1.0)  # half the steps, each 2 s
    assert saved_hours(fit_of(w), job, 2).mean == pytest.approx(1.0)


def test_a_schedule_of_fixed_steps_gains_nothing_from_more_gpus():
    w = workload(t1=1.0, t2=1.2)
    job = Job(current_gpus=1, remaining_steps=3600.0, work="steps")
    assert saved_hours(fit_of(w), job, 2).mean == pytest.approx(-0.2)


def test_the_jobs_own_memory_has_its_headroom_on_its_own_card_only():
    w = workload(card_mb=10_000.0)
    assert decide(w, fit_of(w), PREDECESSOR, 6).headroom_mb is None
    job = Job(current_gpus=4, memory_fraction=0.935, card_memory_mb=32_768.0)
    assert decide(w, fit_of(w), job, 6).headroom_mb == pytest.approx(0.065 * 32_768)


def test_memory_from_one_gpu_adds_the_measured_change_to_two():
    w = workload(memory=(0.80, 0.83))
    decision = decide(w, fit_of(w), Job(current_gpus=1, memory_fraction=0.9), 4)
    assert decision.memory_fraction == pytest.approx(0.93)
    assert "+3.0%" in decision.memory_basis


def test_memory_without_the_jobs_figure_is_the_largest_measured_count_with_its_headroom():
    w = workload(memory=(0.40, 0.45), card_mb=10_000.0)
    decision = decide(w, fit_of(w), Job(current_gpus=1), 6)
    assert decision.memory_fraction == pytest.approx(0.45)
    assert decision.headroom_mb == pytest.approx(5_500.0)


def test_utilisation_is_the_measured_one_at_the_current_count():
    w = workload(util=(90.0, 70.0))
    by_name = {c.name: c for c in decide(w, fit_of(w), Job(current_gpus=2), 4).criteria}
    assert by_name["GPU utilisation on 2"].value == pytest.approx(0.70)
    assert by_name["GPU utilisation on 2"].verdict == PASS


def test_learning_rates_follow_the_stated_rules():
    w = workload()
    decision = decide(w, fit_of(w), Job(current_gpus=4, learning_rate=0.1), 6)
    assert decision.learning_rates == pytest.approx({"linear": 0.15, "square_root": 0.1 * math.sqrt(1.5)})


@pytest.mark.parametrize("value, interval, threshold, below, expected", [
    (0.9, None, 0.85, True, FAIL), (0.8, None, 0.85, True, PASS), (0.85, None, 0.85, True, FAIL),
    (2.0, [1.5, 2.5], 1.0, False, PASS), (2.0, [0.5, 2.5], 1.0, False, UNCERTAIN), (0.2, [0.1, 0.3], 1.0, False, FAIL),
    (None, None, 1.0, False, NOT_GIVEN),
])
def test_a_verdict_reads_the_interval_against_the_threshold(value, interval, threshold, below, expected):
    assert verdict(value, interval, threshold, below) == expected


# --- properties --------------------------------------------------------------------------------

step_times = st.floats(0.01, 10.0)
extra = st.floats(0.0, 2.0)
hours = st.floats(0.1, 10_000.0)
costs = st.floats(0.0, 10_000.0)
targets = st.integers(2, 64)


@given(step_times, extra, hours, costs)
def test_the_time_criterion_passes_exactly_when_the_saving_clears_the_restart_cost(t1, more, left, cost):
    """A measured target: the fitted saving, its interval exact with exact step times."""
    w = workload(t1=t1, t2=t1 + more, relative=0.0)
    job = Job(current_gpus=1, remaining_hours=left, restart_cost_min=cost)
    decision = decide(w, fit_of(w), job, 2, Thresholds(memory=1.0, utilization=1.0))
    saved = decision.saved_h.mean
    assert saved == pytest.approx(left - decision.time_target_h.mean)
    time = next(c for c in decision.criteria if c.name == "time saved vs restart cost")
    assume(abs(saved - cost / 60.0) > 1e-9)
    assert time.verdict == (PASS if saved > cost / 60.0 else FAIL)


@given(step_times, extra, extra, hours, st.integers(5, 64), costs)
def test_beyond_the_measured_counts_the_time_criterion_passes_only_when_the_worst_case_clears_the_cost(
        t1, more, further, left, target, cost):
    w = workload(t1=t1, t2=t1 + more, t4=t1 + more + further, relative=0.02)
    job = Job(current_gpus=4, remaining_hours=left, restart_cost_min=cost)
    decision = decide(w, fit_of(w), job, target, Thresholds(memory=1.0, utilization=1.0))
    best, worst = decision.bounds.step_ratio
    assert best == pytest.approx(1.0) and worst >= best
    low, high = next(c for c in decision.criteria if c.name == "time saved vs restart cost").interval
    assert low == pytest.approx(left * (1 - 4 / target * worst)) and high == pytest.approx(left * (1 - 4 / target))
    verdict_ = next(c for c in decision.criteria if c.name == "time saved vs restart cost").verdict
    assume(abs(low - cost / 60.0) > 1e-9 and abs(high - cost / 60.0) > 1e-9)
    assert verdict_ == (PASS if low > cost / 60.0 else FAIL if high <= cost / 60.0 else UNCERTAIN)


@given(step_times, extra, hours, hours, targets)
def test_the_saving_grows_in_proportion_to_the_work_left(t1, more, left, added, target):
    """So more work left makes a saving larger and a loss larger: monotone in the work, either way."""
    w = workload(t1=t1, t2=t1 + more)
    fit = fit_of(w)
    small = saved_hours(fit, Job(current_gpus=1, remaining_hours=left), target)
    large = saved_hours(fit, Job(current_gpus=1, remaining_hours=left + added), target)
    assert large.mean == pytest.approx(small.mean * (left + added) / left, rel=1e-6, abs=1e-9)


@given(step_times, extra, hours, targets, costs, costs)
def test_a_switch_at_a_restart_cost_stays_a_switch_at_any_lower_one(t1, more, left, target, cost_a, cost_b):
    low, high = sorted((cost_a, cost_b))
    w = workload(t1=t1, t2=t1 + more)
    decisions = [decide(w, fit_of(w), Job(current_gpus=1, remaining_hours=left, restart_cost_min=c), target,
                        Thresholds(memory=1.0, utilization=1.0, max_global_batch=2)).recommendation for c in (low, high)]
    if decisions[1] == SWITCH:
        assert decisions[0] == SWITCH


@given(step_times, extra, hours, targets)
def test_time_to_finish_and_saving_intervals_hold_their_point_estimates(t1, more, left, target):
    w = workload(t1=t1, t2=t1 + more, relative=0.05)
    for job in (Job(current_gpus=1, remaining_hours=left), Job(current_gpus=1, remaining_steps=left * 100)):
        for estimate in (target_hours(fit_of(w), job, target), saved_hours(fit_of(w), job, target)):
            low, high = estimate.interval()
            assert low <= estimate.mean <= high


@given(step_times, extra, hours, st.integers(2, 32), st.integers(1, 32))
def test_a_larger_target_finishes_no_later_under_the_ring_model_while_efficiency_holds(t1, more, left, a, b):
    """Fixed samples: time on N is proportional to t(N) / N, which falls with N under ring as
    long as t(N) grows more slowly than N; it does, since t(N) <= t1 + 2c."""
    assume(more <= t1)
    w = workload(t1=t1, t2=t1 + more)
    small, large = sorted((a, a + b))
    job = Job(current_gpus=1, remaining_hours=left)
    assert target_hours(fit_of(w), job, large).mean <= target_hours(fit_of(w), job, small).mean + 1e-9


@given(st.lists(st.sampled_from([PASS, FAIL, UNCERTAIN, NOT_GIVEN]), min_size=1, max_size=6))
def test_the_recommendation_is_stay_on_any_failure_and_switch_only_when_all_evaluated_pass(verdicts):
    from pytest_gpu_pairs.analysis.scaling.decision import Criterion

    criteria = [Criterion(f"c{i}", None, None, 0.0, True, "", v) for i, v in enumerate(verdicts)]
    recommendation, _ = recommend(criteria)
    if FAIL in verdicts:
        assert recommendation == STAY
    elif UNCERTAIN in verdicts or PASS not in verdicts:
        assert recommendation == UNDECIDED
    else:
        assert recommendation == SWITCH
