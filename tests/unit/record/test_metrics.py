import pytest
from hypothesis import assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from pytest_gpu_pairs.monitor import counters
from pytest_gpu_pairs.record import metrics

finite = st.floats(min_value=0.01, max_value=1e6, allow_nan=False)


@given(solo=finite, conc=finite, steps=st.floats(0, 1e6), window=finite, rate=finite)
def test_efficiency_is_inverse_slowdown_plus_progress_ratio(solo, conc, steps, window, rate):
    slowdown = metrics.fg_slowdown(conc, solo)
    ratio = metrics.bg_progress_ratio(steps, window, rate)
    assert slowdown == pytest.approx(conc / solo)
    assert metrics.concurrency_efficiency(slowdown, ratio) == pytest.approx(solo / conc + steps / window / rate)


def test_efficiency_is_two_when_sharing_is_free_and_t_serial_over_t_parallel_in_general():
    # fg alone 10 s, bg alone 5 steps/s. Together for 20 s: fg takes 20 s, bg does 50 steps.
    eff = metrics.concurrency_efficiency(metrics.fg_slowdown(20, 10), metrics.bg_progress_ratio(50, 20, 5))
    t_serial, t_parallel = 10 + 50 / 5, 20
    assert eff == pytest.approx(t_serial / t_parallel)
    assert metrics.concurrency_efficiency(1.0, 1.0) == 2.0


def test_unmeasurable_inputs_give_none():
    assert metrics.fg_slowdown(None, 3) is None
    assert metrics.bg_progress_ratio(None, 3, 1) is None
    assert metrics.bg_progress_ratio(3, 3, None) is None
    assert metrics.concurrency_efficiency(None, 1) is None


@given(total=st.floats(-1e6, 1e6, allow_nan=False), fg=st.floats(0, 1e6), bg=st.floats(0, 1e6))
def test_energy_split_always_sums_to_the_total(total, fg, bg):
    assume(fg + bg > 0)
    a, b = metrics.split_energy(total, fg, bg)
    assert a + b == total
    assert min(0, total) - 1e-6 * abs(total) <= a <= max(0, total) + 1e-6 * abs(total)


def test_energy_split_without_weights_is_none():
    assert metrics.split_energy(10.0, 0, 0) == (None, None)


@hsettings(max_examples=200)
@given(power=st.lists(st.floats(50, 700), min_size=3, max_size=40), dt=st.floats(0.05, 0.5),
       start_mj=st.floats(0, 2**40), wrap_at=st.none() | st.integers(1, 30))
def test_counter_energy_matches_the_integral_also_across_a_wrap(power, dt, start_mj, wrap_at):
    wrap = 2.0**40
    readings, value = [], start_mj
    for i, p in enumerate(power):
        readings.append((i * dt, value % wrap if wrap_at is not None else value))
        value += p * dt * 1000
    end = (len(power) - 1) * dt
    expected = sum(p * dt for p in power[:-1])
    got = counters.counter_energy_j(readings, 0.0, end, wrap_mj=wrap if wrap_at is not None else None)
    assert got == pytest.approx(expected, rel=1e-6)


def test_counter_energy_interpolates_window_edges_and_needs_coverage():
    readings = [(0.0, 0.0), (1.0, 100_000.0), (2.0, 300_000.0)]  # 100 W then 200 W
    assert counters.counter_energy_j(readings, 0.5, 1.5) == pytest.approx(50 + 100)
    assert counters.counter_energy_j(readings, -1.0, 1.0) is None
    assert counters.counter_energy_j([(0.0, 1.0)], 0, 1) is None


def test_counter_reset_adds_nothing():
    readings = [(0.0, 1000.0), (1.0, 2000.0), (2.0, 500.0), (3.0, 1500.0)]
    assert counters.counter_energy_j(readings, 0.0, 3.0) == pytest.approx(2.0)


@given(intervals=st.lists(st.tuples(st.floats(-10, 30), st.floats(0, 20)), max_size=10),
       start=st.floats(0, 10), length=st.floats(0.1, 20))
def test_coverage_is_a_share_of_the_window(intervals, start, length):
    spans = [(a, a + w) for a, w in intervals]
    value = metrics.coverage(spans, start, start + length)
    assert 0.0 <= value <= 1.0 + 1e-9


def test_coverage_merges_overlaps():
    assert metrics.coverage([(0, 6), (4, 8), (9, 20)], 0, 10) == pytest.approx(0.9)
    assert metrics.coverage([], 0, 10) == 0.0


@given(values=st.lists(st.none() | st.floats(-1e6, 1e6), max_size=10))
def test_mean_and_std_ignore_missing_values(values):
    mean, std = metrics.mean_and_std(values)
    present = [v for v in values if v is not None]
    if not present:
        assert (mean, std) == (None, None)
    else:
        assert min(present) - 1e-6 <= mean <= max(present) + 1e-6
        assert std >= 0 and (len(present) > 1 or std == 0)


@given(total=st.floats(-1e6, 1e6, allow_nan=False), fg_steps=st.floats(0, 1e6), fg_j=st.floats(0, 1e3),
       bg_steps=st.floats(0, 1e6), bg_j=st.floats(0, 1e3))
def test_progress_split_sums_to_the_total_and_follows_solo_cost_of_the_progress(total, fg_steps, fg_j, bg_steps, bg_j):
    fg, bg = metrics.progress_energy_split(total, fg_steps, fg_j, bg_steps, bg_j)
    fg_weight, bg_weight = fg_steps * fg_j, bg_steps * bg_j
    if fg_weight + bg_weight <= 0:
        assert (fg, bg) == (None, None)
        return
    assert fg + bg == total
    assert fg == pytest.approx(total * (fg_weight / (fg_weight + bg_weight)), rel=1e-9, abs=1e-9)


def test_progress_split_example_and_unusable_inputs():
    # fg did 100 steps at 2 J each alone, bg 50 steps at 4 J: equal weights, so half each of 300 J.
    assert metrics.progress_energy_split(300.0, 100, 2.0, 50, 4.0) == (150.0, 150.0)
    assert metrics.progress_energy_split(300.0, 100, 1.0, 50, 4.0) == (100.0, 200.0)
    assert metrics.progress_energy_split(300.0, 100, None, 50, 4.0) == (None, None)
    assert metrics.progress_energy_split(300.0, 100, -1.0, 50, 4.0) == (None, None)  # noisy solo below idle
    assert metrics.progress_energy_split(None, 100, 1.0, 50, 4.0) == (None, None)


def test_energy_saved_against_running_the_same_work_serially():
    serial = metrics.serial_energy_j(100, 2.0, 50, 4.0)
    assert serial == 400.0
    assert metrics.energy_saved_fraction(300.0, serial) == pytest.approx(0.25)
    assert metrics.energy_saved_fraction(500.0, serial) == pytest.approx(-0.25)  # sharing cost energy
    assert metrics.serial_energy_j(100, None, 50, 4.0) is None
    assert metrics.energy_saved_fraction(300.0, None) is None and metrics.energy_saved_fraction(None, 400.0) is None


@given(fg_steps=st.integers(1, 10**5), fg_j=st.floats(0.01, 100), bg_steps=st.integers(0, 10**5),
       bg_j=st.floats(0.01, 100), saved=st.floats(-1, 0.99))
def test_energy_saved_recovers_the_saving(fg_steps, fg_j, bg_steps, bg_j, saved):
    serial = metrics.serial_energy_j(fg_steps, fg_j, bg_steps, bg_j)
    assert metrics.energy_saved_fraction(serial * (1 - saved), serial) == pytest.approx(saved, abs=1e-9)

@given(points=st.lists(st.tuples(st.floats(0, 100), st.floats(-1e6, 1e6)), min_size=1, max_size=30),
       t=st.floats(-10, 110))
def test_value_at_stays_between_the_neighbouring_points(points, t):
    points = sorted(points)
    value = metrics.value_at(points, t)
    if t <= points[0][0]:
        assert value == points[0][1]
    elif t >= points[-1][0]:
        assert value == points[-1][1] or points[-1][0] == t
    else:
        after = next(i for i, (ti, _) in enumerate(points) if ti >= t)
        lo, hi = sorted((points[after - 1][1], points[after][1]))
        assert lo - 1e-6 * max(1, abs(lo)) <= value <= hi + 1e-6 * max(1, abs(hi))


joules = st.integers(-100_000, 10_000_000).map(lambda mj: mj / 1000)  # the NVML counter counts millijoules
intervals = st.lists(st.tuples(joules, st.floats(0, 100), st.floats(0, 100)), max_size=20)


@given(parts=intervals, total=st.floats(-1e5, 1e6))
def test_sm_split_weights_split_any_total_exactly(parts, total):
    fg_w, bg_w = metrics.sm_split_weights(parts)
    assert fg_w >= 0 and bg_w >= 0
    if any(fg + bg > 0 for _, fg, bg in parts):
        fg, bg = metrics.split_energy(total, fg_w, bg_w)
        assert fg + bg == total
    else:
        assert (fg_w, bg_w) == (0, 0)


@given(parts=intervals, share=st.floats(0.01, 0.99))
def test_constant_sm_shares_give_that_share_whatever_the_energy(parts, share):
    shaped = [(e, 100 * share, 100 * (1 - share)) for e, _, _ in parts]
    fg_w, bg_w = metrics.sm_split_weights(shaped)
    if shaped:
        assert fg_w / (fg_w + bg_w) == pytest.approx(share, rel=1e-9)


def test_energy_of_a_stretch_goes_to_whoever_computed_in_it():
    # 100 J above idle with fg alone, then 300 J shared 1:2
    assert metrics.sm_split_weights([(100.0, 50.0, 0.0), (300.0, 30.0, 60.0)]) == pytest.approx((200.0, 200.0))
    assert metrics.sm_split_weights([(-5.0, 50.0, 50.0), (0.0, 10.0, 30.0)]) == pytest.approx((0.75, 1.25))


def test_interval_energies_subtract_idle_per_stretch():
    points = [(0.0, 0.0), (1.0, 100_000.0), (3.0, 500_000.0)]  # 100 W, then 200 W
    assert metrics.interval_energies_above_idle(points, [0.0, 1.0, 2.0, 3.0], 50.0) == pytest.approx([50, 150, 150])


fractions = st.floats(0.0, 1.0)


@given(a=fractions, b=fractions)
def test_the_efficiency_bound_lies_between_one_and_two_and_is_symmetric(a, b):
    bound = metrics.efficiency_bound(a, b)
    assert 1.0 <= bound <= 2.0
    assert bound == metrics.efficiency_bound(b, a)
    if a + b <= 1.0:
        assert bound == 2.0


@given(a=fractions, b=fractions, more=st.floats(0.0, 0.5))
def test_a_job_that_needs_more_of_the_card_never_raises_the_bound(a, b, more):
    assert metrics.efficiency_bound(min(1.0, a + more), b) <= metrics.efficiency_bound(a, b) + 1e-12


@given(a=fractions, b=fractions)
def test_the_bound_is_the_work_of_the_best_split_of_the_cards_time(a, b):
    """Brute force over the pair's pace fractions x (fg) and y (bg), each at most its solo pace,
    with the card's time x*a + y*b at most 1: the bound is the largest x + y."""
    best = 0.0
    for i in range(201):
        x = i / 200
        room = 1.0 - x * a
        if room < -1e-12:
            continue
        y = 1.0 if b == 0 else min(1.0, room / b)
        best = max(best, x + y)
    assert metrics.efficiency_bound(a, b) == pytest.approx(best, abs=0.01)


def test_two_jobs_that_each_keep_the_card_busy_all_the_time_can_do_no_better_than_one():
    assert metrics.efficiency_bound(1.0, 1.0) == 1.0
    assert metrics.efficiency_bound(0.6, 0.7) == pytest.approx(1 + 0.4 / 0.7)
    assert metrics.efficiency_bound(None, 0.5) is None
