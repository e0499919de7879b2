"""The figures of interleaved rounds from step reports and the energy counter: exact on made-up data."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record.measurement import InterleavedMeasurement, Phase, PhaseRound
from pytest_gpu_pairs.record.phases import case_figures, figure_rounds, gpu_busy, round_figures, shapley_split

IDLE_W = 50.0


def progress(segments):
    """Step reports every 0.25 s at ``rate`` steps/s inside each (start, end, rate) segment, paused between."""
    steps, total = [], 0.0
    for start, end, rate in segments:
        t = start
        while t <= end + 1e-9:
            steps.append((t, int(round(total + rate * (t - start)))))
            t += 0.25
        total += rate * (end - start)
    p = Progress()
    p.steps = steps
    return p


def counter(power):
    """NVML-like samples every 0.1 s of a card drawing power(t) watts."""
    samples, energy_mj, t = [], 0.0, 0.0
    while t <= 40.0:
        samples.append(GpuSample(t=t, energy_mj=energy_mj))
        energy_mj += power(t) * 0.1 * 1000
        t = round(t + 0.1, 10)
    return tuple(samples)


FG_ALONE, BG_ALONE, PAIR = Phase("fg", 0.0, 1.0, 5.0), Phase("bg", 5.0, 6.0, 10.0), Phase("pair", 10.0, 11.0, 15.0)


def watts(t):
    if t < 5:
        return IDLE_W + 100  # fg alone: 10 steps/s, 10 J per step above idle
    if t < 10:
        return IDLE_W + 200  # bg alone: 20 steps/s, 10 J per step above idle
    return IDLE_W + 240  # the pair


def measurement():
    fg = progress([(1.0, 5.0, 10.0), (11.0, 15.0, 5.0)])
    bg = progress([(6.0, 10.0, 20.0), (11.0, 15.0, 15.0)])
    return InterleavedMeasurement(fg, bg, (PhaseRound(1, (FG_ALONE, BG_ALONE, PAIR)),), counter(watts), (0.0, 0.0))


def test_a_round_gives_rates_ratios_and_energies():
    r = round_figures(measurement().rounds[0], measurement(), IDLE_W)
    assert r["fg_solo_steps_per_s"] == pytest.approx(10) and r["fg_steps_per_s"] == pytest.approx(5)
    assert r["fg_slowdown"] == pytest.approx(2.0) and r["bg_progress_ratio"] == pytest.approx(0.75)
    assert r["concurrency_efficiency"] == pytest.approx(1.25)
    assert r["gpu_energy_j"] == pytest.approx(290 * 4, rel=0.02)
    assert r["gpu_energy_above_idle_j"] == pytest.approx(240 * 4, rel=0.02)
    # serial: fg 20 steps x 15 J + bg 60 steps x 12.5 J (idle included) = 1050 J against 1160 J together
    assert r["serial_energy_j"] == pytest.approx(1050, rel=0.02)
    assert r["fg_gpu_energy_j"] + r["bg_gpu_energy_j"] == pytest.approx(r["gpu_energy_above_idle_j"])


@given(pair=st.floats(0, 1e6), fg=st.floats(0, 1e6), bg=st.floats(0, 1e6))
def test_the_shapley_split_adds_up_exactly_and_is_symmetric(pair, fg, bg):
    a, b = shapley_split(pair, fg, bg)
    assert a + b == pytest.approx(pair, abs=1e-6)
    b2, a2 = shapley_split(pair, bg, fg)
    assert (a2, b2) == (pytest.approx(a, abs=1e-6), pytest.approx(b, abs=1e-6))
    assert shapley_split(None, fg, bg) == (None, None)


def test_the_case_is_the_mean_of_its_rounds_with_an_interval():
    m = measurement()
    shifted = [Phase(p.name, p.switched_t + 15, p.start + 15, p.end + 15) for p in (FG_ALONE, BG_ALONE, PAIR)]
    fg = progress([(1.0, 5.0, 10.0), (11.0, 15.0, 5.0), (16.0, 20.0, 10.0), (26.0, 30.0, 4.0)])
    bg = progress([(6.0, 10.0, 20.0), (11.0, 15.0, 15.0), (21.0, 25.0, 20.0), (26.0, 30.0, 15.0)])
    two = InterleavedMeasurement(fg, bg, (m.rounds[0], PhaseRound(2, tuple(shifted))), m.samples, (0.0, 1.0))
    figures = case_figures(two, IDLE_W)
    assert figures["n_rounds"] == 2 and [r["fg_slowdown"] for r in figures["rounds"]] == [pytest.approx(2.0), pytest.approx(2.5)]
    assert figures["fg_slowdown"] == pytest.approx(2.25)
    low, high = figures["fg_slowdown_ci"]
    assert low < 2.0 and high > 2.5


def drifting_measurement():
    """fg alone at 10 steps/s before the pair phase and 14 after it (a linear drift), 6 in the
    pair; bg steady at 20 alone and 15 in the pair; then closing solo phases and no pair."""
    fg = progress([(1.0, 5.0, 10.0), (11.0, 15.0, 6.0), (16.0, 20.0, 14.0)])
    bg = progress([(6.0, 10.0, 20.0), (11.0, 15.0, 15.0), (21.0, 25.0, 20.0)])
    closing = PhaseRound(2, (Phase("bg", 20.0, 21.0, 25.0), Phase("fg", 15.0, 16.0, 20.0)))
    return InterleavedMeasurement(fg, bg, (PhaseRound(1, (FG_ALONE, BG_ALONE, PAIR)), closing), counter(watts), (0.0, 0.0))


def test_a_pair_phase_is_bracketed_by_the_solo_phases_around_it_so_a_linear_drift_cancels():
    m = drifting_measurement()
    alone_before = round_figures(m.rounds[0], m, IDLE_W)
    bracketed = round_figures(m.rounds[0], m, IDLE_W, after=m.rounds[1])
    assert alone_before["fg_slowdown"] == pytest.approx(10 / 6) and alone_before["bracketed"] is False
    assert bracketed["fg_solo_steps_per_s"] == pytest.approx(12) and bracketed["fg_slowdown"] == pytest.approx(2.0)
    assert bracketed["bg_progress_ratio"] == pytest.approx(0.75) and bracketed["bracketed"] is True


def test_closing_solo_phases_bracket_the_last_pair_and_are_no_round_of_their_own():
    m = drifting_measurement()
    rounds = figure_rounds(m, IDLE_W)
    assert [r["round"] for r in rounds] == [1] and rounds[0]["fg_slowdown"] == pytest.approx(2.0)
    figures = case_figures(m, IDLE_W)
    assert figures["n_rounds"] == 1 and figures["interval_method"] == "student_t_starts"


def test_a_phase_the_job_was_silent_in_has_no_rate_and_its_round_is_left_out():
    """An evaluation pass: the foreground reports nothing through the second half of its pair
    phase. With its usual report gap known, that phase has no rate; without it, the old reading."""
    fg = progress([(1.0, 5.0, 10.0), (11.0, 12.5, 5.0)])
    bg = progress([(6.0, 10.0, 20.0), (11.0, 15.0, 15.0)])
    rounds = (PhaseRound(1, (FG_ALONE, BG_ALONE, PAIR)),)
    silent = InterleavedMeasurement(fg, bg, rounds, counter(watts), (0.0, 0.0), report_gap_s={"fg": 0.25, "bg": 0.25})
    [r] = figure_rounds(silent, IDLE_W)
    assert r["fg_steps_per_s"] is None and r["concurrency_efficiency"] is None and r["complete"] is False
    figures = case_figures(silent, IDLE_W)
    assert figures["n_rounds"] == 0 and figures["rounds_excluded"] == 1 and figures["concurrency_efficiency"] is None
    unknown_gap = InterleavedMeasurement(fg, bg, rounds, counter(watts), (0.0, 0.0))
    assert figure_rounds(unknown_gap, IDLE_W)[0]["fg_steps_per_s"] == pytest.approx(5, rel=0.1)


def test_a_slower_cadence_in_the_pair_is_no_silence():
    """A job slowed down beside the other reports less often: its pair phase keeps its rate."""
    fg = Progress()
    fg.steps = [(1.0 + 0.25 * i, 10 * i) for i in range(17)] + [(11.0 + 0.9 * i, 200 + 9 * i) for i in range(5)]
    bg = progress([(6.0, 10.0, 20.0), (11.0, 15.0, 15.0)])
    m = InterleavedMeasurement(fg, bg, (PhaseRound(1, (FG_ALONE, BG_ALONE, PAIR)),), counter(watts), (0.0, 0.0),
                               report_gap_s={"fg": 0.25, "bg": 0.25})
    assert figure_rounds(m, IDLE_W)[0]["fg_steps_per_s"] == pytest.approx(10.0)


def test_rounds_bracket_only_within_their_segment():
    """After a restart the next round's solo phases belong to other processes: no bracket across."""
    m = drifting_measurement()
    restarted = InterleavedMeasurement(m.fg, m.bg, (m.rounds[0], PhaseRound(2, m.rounds[1].phases, segment=1)),
                                       m.samples, (0.0, 0.0))
    [r] = figure_rounds(restarted, IDLE_W)
    assert r["bracketed"] is False and r["fg_slowdown"] == pytest.approx(10 / 6) and r["segment"] == 0


@given(st.lists(st.tuples(st.floats(0.5, 3.0), st.floats(1.0, 30.0), st.floats(50.0, 400.0)), min_size=2, max_size=6))
def test_the_case_split_adds_up_to_the_energy_above_idle_over_the_same_rounds(rounds):
    """Some rounds incomplete (a job silent), the rest with any rates and power: the case's fg and bg
    shares still sum to its energy above idle, all three over the same rounds."""
    phases, fg_parts, bg_parts, power = [], [], [], {}
    t = 0.0
    for i, (slow, bg_rate, pair_w) in enumerate(rounds):
        fg_alone, bg_alone, pair = (Phase("fg", t, t + 0.5, t + 2.5), Phase("bg", t + 2.5, t + 3.0, t + 5.0),
                                    Phase("pair", t + 5.0, t + 5.5, t + 7.5))
        phases.append(PhaseRound(i + 1, (fg_alone, bg_alone, pair)))
        fg_parts += [(fg_alone.start, fg_alone.end, 10.0), (pair.start, pair.end if i % 3 else pair.start + 0.6, 10.0 / slow)]
        bg_parts += [(bg_alone.start, bg_alone.end, bg_rate), (pair.start, pair.end, bg_rate * 0.8)]
        power[i] = pair_w
        t += 7.5
    m = InterleavedMeasurement(progress(fg_parts), progress(bg_parts), tuple(phases),
                               counter(lambda s: IDLE_W + power.get(min(int(s // 7.5), len(rounds) - 1), 0.0)),
                               (0.0, 0.0), report_gap_s={"fg": 0.25, "bg": 0.25})
    figures = case_figures(m, IDLE_W)
    if figures["n_rounds"]:
        assert figures["fg_gpu_energy_j"] + figures["bg_gpu_energy_j"] == pytest.approx(figures["gpu_energy_above_idle_j"],
                                                                                          rel=1e-9, abs=1e-9)
    assert figures["n_rounds"] + figures["rounds_excluded"] == len(rounds)


def busy_card(t):
    """NVML utilisation, each reading of the time before it: fg alone 60 %, bg alone 70 %, the pair
    99 %, nothing readable before 1 s."""
    if t < 1.0:
        return None
    return 60.0 if t <= 5 else 70.0 if t <= 10 else 99.0


def test_a_round_says_how_busy_each_job_kept_the_card_and_what_that_allows():
    m = measurement()
    samples = tuple(GpuSample(t=s.t, energy_mj=s.energy_mj, util_pct=busy_card(s.t)) for s in m.samples)
    r = round_figures(m.rounds[0], InterleavedMeasurement(m.fg, m.bg, m.rounds, samples, m.warmup), IDLE_W)
    assert r["fg_solo_gpu_busy"] == pytest.approx(0.60) and r["bg_solo_gpu_busy"] == pytest.approx(0.70)
    assert r["pair_gpu_busy"] == pytest.approx(0.99)
    assert r["efficiency_bound"] == pytest.approx(1 + 0.4 / 0.7)


def lagging_readings(busy_at, lag_s, until=3.0, hz=10):
    """NVML-like utilisation readings every 1/hz s, each the card's mean busy over the lag_s before it."""
    readings, t = [], 0.0
    while t <= until:
        span = [busy_at(t - lag_s * k / 20) for k in range(1, 21)]
        readings.append(GpuSample(t=t, energy_mj=0.0, util_pct=100.0 * sum(span) / len(span)))
        t = round(t + 1 / hz, 10)
    return tuple(readings)


@given(busy=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0)), lag_s=st.floats(0.05, 0.35),
       settle_s=st.sampled_from([0.1, 0.3]), phase_s=st.sampled_from([0.5, 1.0, 2.0]))
def test_a_phase_reads_only_its_own_busy_time_though_each_reading_lags(busy, lag_s, settle_s, phase_s):
    """Phases as the default method makes them (a settling time, then the measured window), the
    card's utilisation read as NVML gives it, each reading an average over a stretch before it:
    each phase reads its own busy fraction, not its predecessor's."""
    fg, bg, pair = busy
    step = settle_s + phase_s
    phases = [Phase(name, i * step, i * step + settle_s, (i + 1) * step) for i, name in enumerate(("fg", "bg", "pair"))]

    def busy_at(t):
        return pair if t < 0 or t >= 2 * step else fg if t < step else bg

    samples = lagging_readings(busy_at, lag_s, until=3 * step)
    for phase, expected in zip(phases, busy):
        assert gpu_busy(samples, phase) == pytest.approx(expected, abs=1e-9), phase.name


def test_a_light_jobs_solo_phase_after_the_pair_reads_as_light_as_after_the_other_job():
    """The H200's step response (a reading shows a switch fully 0.4 s after it): half-second phases
    read 10 % busy for a job that keeps the card 10 % busy, where the whole window read over 30 %."""
    def busy_at(t):
        return 0.9 if t < 0.0 else 0.1

    samples = lagging_readings(busy_at, 0.35)
    assert gpu_busy(samples, Phase("fg", 0.0, 0.1, 0.6)) == pytest.approx(0.1)


def test_without_utilisation_readings_the_busy_fractions_are_unmeasured():
    r = round_figures(measurement().rounds[0], measurement(), IDLE_W)
    assert r["fg_solo_gpu_busy"] is None and r["pair_gpu_busy"] is None and r["efficiency_bound"] is None


def test_each_phase_states_the_cards_mean_sm_clock_inside_its_measured_window():
    """A card clocked lower while one job runs alone than while two do: each phase says so, settling
    time left out (the fg phase's first second, at 345 MHz here, is not in its window)."""
    m = measurement()

    def sm_clock(t):
        return 345.0 if t < 1.0 else 1200.0 if t <= 10 else 1980.0

    samples = tuple(GpuSample(t=s.t, energy_mj=s.energy_mj, sm_clock_mhz=sm_clock(s.t)) for s in m.samples)
    r = round_figures(m.rounds[0], InterleavedMeasurement(m.fg, m.bg, m.rounds, samples, m.warmup), IDLE_W)
    clocks = {p["name"]: p["sm_clock_mhz"] for p in r["phases"]}
    assert clocks["fg"] == pytest.approx(1200.0) and clocks["bg"] == pytest.approx(1200.0)
    assert clocks["pair"] == pytest.approx(1980.0)
    unclocked = round_figures(measurement().rounds[0], measurement(), IDLE_W)
    assert all(p["sm_clock_mhz"] is None for p in unclocked["phases"])


def test_each_phase_states_the_slowest_card_state_and_pcie_link_it_was_seen_in():
    """A link that drops to a slower generation while one light job runs alone, and holds while two
    run: the solo phases say so, the pair phase does not."""
    m = measurement()
    solo = {p.name: p for p in m.rounds[0].phases}

    def inside_solo(t):
        return any(solo[name].start <= t <= solo[name].end for name in ("fg", "bg"))

    samples = tuple(GpuSample(t=s.t, energy_mj=s.energy_mj, pstate=2 if inside_solo(s.t) else 0,
                              pcie_gen=3 if inside_solo(s.t) else 5) for s in m.samples)
    r = round_figures(m.rounds[0], InterleavedMeasurement(m.fg, m.bg, m.rounds, samples, m.warmup), IDLE_W)
    states = {p["name"]: (p["pstate_max"], p["pcie_gen_min"]) for p in r["phases"]}
    assert states == {"fg": (2, 3), "bg": (2, 3), "pair": (0, 5)}
    unread = round_figures(measurement().rounds[0], measurement(), IDLE_W)
    assert all(p["pstate_max"] is None and p["pcie_gen_min"] is None for p in unread["phases"])


def test_a_case_that_failed_part_way_says_its_figures_cover_only_the_rounds_before():
    """The record keeps what the rounds before a failure measured, and its notes must not call those
    figures unmeasured, nor pass them off as the case's."""
    from dataclasses import replace

    from pytest_gpu_pairs.record.build import interleaved_record
    from unit.record import test_sharing_records as sharing

    failed = replace(measurement(), failure="fg a ended during the measurement (exit code 1)", planned_starts=3)
    record = interleaved_record(sharing._case("timeslice"), failed, sharing.ENV).to_dict()
    assert record["failure"] == failed.failure and record["concurrency_efficiency"] == pytest.approx(1.25)
    note = record["notes"]["concurrency_efficiency"]
    assert note.startswith("over the 1 round(s) of 1 of 3 start(s) measured before the case failed")
    assert "could not be measured" not in note and note.endswith(failed.failure)


def test_a_case_left_with_one_counted_round_says_why_it_has_no_interval():
    """Two rounds measured, one left out (the foreground silent through its second pair phase): the
    case has one round that counts, no interval, and a note that says so and why."""
    from pytest_gpu_pairs.record.build import interleaved_record
    from unit.record import test_sharing_records as sharing

    fg = progress([(1.0, 5.0, 10.0), (11.0, 20.0, 5.0), (26.0, 27.0, 5.0)])
    bg = progress([(6.0, 10.0, 20.0), (11.0, 15.0, 15.0), (21.0, 25.0, 20.0), (26.0, 30.0, 15.0)])
    second = (Phase("fg", 15.0, 16.0, 20.0), Phase("bg", 20.0, 21.0, 25.0), Phase("pair", 25.0, 26.0, 30.0))
    m = InterleavedMeasurement(fg, bg, (PhaseRound(1, (FG_ALONE, BG_ALONE, PAIR)), PhaseRound(2, second)),
                               counter(watts), (0.0, 0.0), report_gap_s={"fg": 0.25, "bg": 0.25})
    record = interleaved_record(sharing._case("timeslice"), m, sharing.ENV).to_dict()
    assert (record["n_rounds"], record["rounds_excluded"]) == (1, 1)
    assert record["concurrency_efficiency"] is not None and record["concurrency_efficiency_ci"] is None
    assert record["notes"]["concurrency_efficiency_ci"] == (
        "an interval needs at least two rounds that count (1 here; 1 left out, see rounds_excluded)")
