"""How long each phase of an interleaved round lasts: the settings' lengths, stretched only for a
job that reports rarely or steps slowly."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.protocol import Progress, now
from pytest_gpu_pairs.run.interleaved import REPORTS_PER_PHASE, STEPS_PER_SETTLE, phase_lengths, running_gap


def reporting(every_s: float, steps_per_report: int, until: float = 10.0) -> Progress:
    progress = Progress()
    t, step = 0.0, 1
    while t <= until:
        progress.steps.append((t, step))
        t, step = t + every_s, step + steps_per_report
    return progress


def test_fast_reporters_keep_the_settings_lengths():
    assert phase_lengths([reporting(0.25, 50), reporting(0.25, 25)], 0.0, 10.0, 2.0, 0.3) == (2.0, 0.3)


def test_a_rare_reporter_stretches_the_phase_and_a_slow_stepper_the_settling():
    phase, settle = phase_lengths([reporting(0.25, 50), reporting(1.5, 1)], 0.0, 10.0, 2.0, 0.3)
    assert phase == 2.0 * math.ceil(REPORTS_PER_PHASE * 1.5 / 2.0) and settle == STEPS_PER_SETTLE * 1.5


def test_no_reports_in_the_warm_up_leaves_the_settings_lengths():
    assert phase_lengths([Progress(), reporting(0.25, 10)], 20.0, 30.0, 2.0, 0.3) == (2.0, 0.3)


@given(st.lists(st.tuples(st.floats(0.01, 5.0), st.integers(1, 1000)), min_size=1, max_size=3),
       st.floats(0.1, 10.0), st.floats(0.0, 2.0))
def test_never_shorter_than_the_settings(cadences, phase_s, settle_s):
    progresses = [reporting(every, steps, until=20.0) for every, steps in cadences]
    phase, settle = phase_lengths(progresses, 0.0, 20.0, phase_s, settle_s)
    assert phase >= phase_s and settle >= settle_s
    assert math.isclose(phase / phase_s, round(phase / phase_s))  # a whole multiple: the same in every session


def test_a_job_that_ends_while_the_other_is_restarted_is_restarted_too():
    """Two scripts that end together: the second's end, met while the first one's new run warms up,
    restarts it as well, and both new runs warm up together before the rounds go on."""
    from pytest_gpu_pairs.run.interleaved import InterleavedPair, JobEnded

    pair = InterleavedPair.__new__(InterleavedPair)
    replaced, warmed = [], []

    def replace_run(role):
        replaced.append(role)
        return float(len(replaced))

    def warm_up_again(renewed, since):
        warmed.append((list(renewed), since))
        if len(warmed) == 1:
            raise JobEnded("bg")

    pair._replace_run, pair._warm_up_again = replace_run, warm_up_again
    pair._restart("fg")
    assert replaced == ["fg", "bg"]
    assert warmed == [(["fg"], 1.0), (["fg", "bg"], 2.0)]


def _reports_at_running_pace(spans, pace_s):
    """A job that reports every ``pace_s`` seconds of running, and nothing while paused."""
    progress, ran, step = Progress(), 0.0, 1
    for start, end in spans:
        t = start + (pace_s - ran % pace_s if ran else pace_s)
        while t <= end:
            progress.steps.append((t, step))
            step += 1
            t += pace_s
        ran += end - start
    return progress


@given(st.lists(st.tuples(st.floats(0.05, 5.0), st.floats(0.0, 20.0)), min_size=1, max_size=12),
       st.floats(0.01, 3.0))
def test_a_jobs_pace_leaves_out_the_time_it_was_paused(segments, pace_s):
    """Runs of any length with pauses of any length between them: the pace read is the job's own
    seconds of running per report, never stretched by a pause."""
    spans, t = [], 0.0
    for run_s, pause_s in segments:
        spans.append((t, t + run_s))
        t += run_s + pause_s
    progress = _reports_at_running_pace(spans, pace_s)
    gap = running_gap(progress, spans, 0.0, spans[-1][1])
    if len(progress.steps) >= 2:
        assert math.isclose(gap, pace_s, rel_tol=1e-6, abs_tol=1e-6)
    else:
        assert gap <= sum(b - a for a, b in spans) + 1e-9


def test_a_job_that_stopped_reporting_owes_at_least_its_silence():
    progress = Progress(steps=[(0.0, 1), (0.1, 2), (0.2, 3)])
    assert running_gap(progress, [(0.0, 0.3), (5.0, 9.0)], 0.0, 9.0) == pytest.approx(4.1)


def _pair_after_a_round(pace_s, phase_s, settle_s=0.1, cap_s=180.0, fg_reports=None):
    """An InterleavedPair just after one round of ``phase_s`` phases in which fg reported every
    ``pace_s`` seconds of running (or at the times given) and bg often."""
    from types import SimpleNamespace

    from pytest_gpu_pairs.record.measurement import Phase, PhaseRound
    from pytest_gpu_pairs.record.stats import StoppingRule
    from pytest_gpu_pairs.run.interleaved import InterleavedPair

    pair = InterleavedPair.__new__(InterleavedPair)
    t, phases = 10.0, []
    for name in ("fg", "bg", "pair"):
        phases.append(Phase(name, t, t + settle_s, t + settle_s + phase_s))
        t += settle_s + phase_s
    last = PhaseRound(1, tuple(phases))
    fg_spans = [(0.0, 10.0)] + [(p.switched_t, p.end) for p in phases if p.name != "bg"]
    fg = Progress(steps=fg_reports) if fg_reports is not None else _reports_at_running_pace(fg_spans, pace_s)
    bg = _reports_at_running_pace([(0.0, 10.0)] + [(p.switched_t, p.end) for p in phases if p.name != "fg"], 0.05)
    jobs = {"fg": SimpleNamespace(model="slow"), "bg": SimpleNamespace(model="fast")}
    pair.case = SimpleNamespace(phase_s=0.5, job_of=jobs.get)
    pair.job_roles = ("fg", "bg")
    pair.phase_s, pair.settle_s, pair.rounds, pair._phases_settled = phase_s, settle_s, [last], False
    pair.warm_t, pair.rule = 10.0, StoppingRule(None, 3, None, cap_s)
    pair.started_t = now() - t  # the case began when its first report's clock began
    pair._progress = {"fg": fg, "bg": bg}.__getitem__
    pair.snapshot = lambda: None
    pair.env = SimpleNamespace(idle_power_w=None)
    return pair, last


def test_phases_grow_past_any_fixed_multiple_to_hold_the_reports_of_a_slow_job(monkeypatch):
    from pytest_gpu_pairs.run import interleaved

    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: [])
    pair, last = _pair_after_a_round(pace_s=5.0, phase_s=8.0, cap_s=400.0)
    pair._lengthen_phases_if_too_short(last)
    assert pair.phase_s >= REPORTS_PER_PHASE * 5.0 > 16 * 0.5 and pair.settle_s >= STEPS_PER_SETTLE * 5.0


def test_a_complete_round_at_the_jobs_pace_settles_the_lengths(monkeypatch):
    from pytest_gpu_pairs.run import interleaved

    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: [{"complete": True}])
    pair, last = _pair_after_a_round(pace_s=0.4, phase_s=2.0)
    pair._lengthen_phases_if_too_short(last)
    assert (pair.phase_s, pair._phases_settled) == (2.0, True)
    pair, last = _pair_after_a_round(pace_s=1.5, phase_s=2.0)  # complete, yet with two reports where eight fit
    pair._lengthen_phases_if_too_short(last)
    assert pair.phase_s == 0.5 * math.ceil(REPORTS_PER_PHASE * 1.5 / 0.5) and not pair._phases_settled


def test_phases_the_time_cap_cannot_hold_fail_the_case_with_the_fix(monkeypatch):
    from pytest_gpu_pairs.run import interleaved

    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: [])
    pair, last = _pair_after_a_round(pace_s=17.0, phase_s=8.0, cap_s=180.0, fg_reports=[(1.0, 1)])
    with pytest.raises(interleaved.InterleavedFailure, match="fg slow steps too slowly here for the case's time cap"
                                                             ".*--gpu-pairs-max-case-s"):
        pair._lengthen_phases_if_too_short(last)


def test_settled_lengths_grow_again_when_the_host_gets_busier(monkeypatch):
    """A job that fell to one report in a phase after the lengths settled: a round at that pace
    would be left out, so the phases lengthen again."""
    from pytest_gpu_pairs.run import interleaved

    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: [{"complete": True}])
    pair, last = _pair_after_a_round(pace_s=1.5, phase_s=2.0, fg_reports=[(9.5, 1), (11.0, 2), (30.0, 3)])
    pair._phases_settled = True
    pair._lengthen_phases_if_too_short(last)
    assert pair.phase_s >= 4.0 and not pair._phases_settled


def test_with_complete_rounds_in_hand_phases_too_long_for_the_cap_stay_and_the_case_goes_on(monkeypatch):
    from pytest_gpu_pairs.run import interleaved

    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: [{"complete": True}])
    pair, last = _pair_after_a_round(pace_s=17.0, phase_s=8.0, cap_s=180.0, fg_reports=[(1.0, 1)])
    pair._phases_settled = True
    pair._lengthen_phases_if_too_short(last)  # no failure: the time cap ends the case with its complete rounds
    assert pair.phase_s == 8.0


def test_on_the_cpu_settling_stays_the_settings_however_slow_a_step():
    """Nothing queues on the CPU: a job stopped stops at once, a job continued runs at once."""
    progresses = [reporting(0.25, 50), reporting(1.5, 1)]
    assert phase_lengths(progresses, 0.0, 10.0, 2.0, 0.3, queued=False)[1] == 0.3
    assert phase_lengths(progresses, 0.0, 10.0, 2.0, 0.3, queued=True)[1] == STEPS_PER_SETTLE * 1.5


def _reports(rate_at, until: float, every: float = 0.05):
    """Step reports every ``every`` s up to ``until`` of a job whose rate at time t is ``rate_at(t)``."""
    steps, t, n = [], 0.0, 0.0
    while t <= until:
        steps.append((t, int(n)))
        n += rate_at(t) * every
        t += every
    return steps


def test_a_job_still_speeding_up_is_not_steady_and_a_noisy_one_at_its_pace_is():
    from pytest_gpu_pairs.run.interleaved import STEADY_TOLERANCE, is_steady

    ramping = _reports(lambda t: 100.0 * (1 + t), 3.0)
    assert not is_steady(ramping, 3.0, 0.5, STEADY_TOLERANCE)
    level = _reports(lambda t: 100.0 * (1.04 if int(t * 10) % 2 else 0.96), 3.0)
    assert is_steady(level, 3.0, 0.5, STEADY_TOLERANCE)
    assert not is_steady(level[:3], 3.0, 0.5, STEADY_TOLERANCE)  # too few reports in a window


@given(st.floats(0.1, 1000.0), st.floats(0.1, 1000.0))
def test_a_run_is_refused_as_too_short_only_well_below_what_it_needed(trained, needed):
    from pytest_gpu_pairs.run.interleaved import TOO_SHORT_MARGIN, too_short

    assert too_short(trained, needed) == (trained * TOO_SHORT_MARGIN < needed)
    if trained >= needed:
        assert not too_short(trained, needed)  # the message's numbers can never contradict the decision


def test_the_rounds_a_target_needs_grow_with_the_noise_and_none_reach_it_past_the_offsets():
    from pytest_gpu_pairs.record.stats import BetweenStarts
    from pytest_gpu_pairs.run.interleaved import UNREACHABLE_ROUNDS, rounds_for_target

    quiet = [2.0 + 0.02 * (-1) ** i for i in range(10)]
    noisy = [2.0 + 0.2 * (-1) ** i for i in range(10)]
    assert rounds_for_target(quiet, 3, 0.02, None) < rounds_for_target(noisy, 3, 0.02, None)
    assert rounds_for_target(quiet, 3, 0.02, BetweenStarts(0.05, 3.0, "x")) == UNREACHABLE_ROUNDS


def test_a_later_starts_jobs_wait_on_spare_cpus_of_their_role_never_on_a_measured_jobs():
    from pytest_gpu_pairs.run.cpus import plan_job_cpus

    plan = plan_job_cpus([(i,) for i in range(16)])
    own = plan.for_job("fg", True)
    spare = [plan.spare_for("fg", i) for i in (1, 2, 3)]
    assert own == {1, 2} and spare == [{3, 4}, {5, 6}, None]  # fg's share is cores 1-7
    assert not (spare[0] & plan.for_job("bg", True)) and plan.spare_for("fg", 0) is None
    assert plan_job_cpus([(0,), (1,), (2,)]).spare_for("fg", 1) is None


def test_a_standby_job_taken_into_the_pair_is_counted_under_its_new_role():
    from pytest_gpu_pairs.monitor.gpu import PidRoles

    roles = PidRoles(getpgid=lambda pid: pid, job_tag=lambda pid: None)
    roles.register(42, "standby")
    assert roles.role_of(42) == "standby"
    roles.register(42, "fg")
    assert roles.role_of(42) == "fg"


def _pair_in_its_last_start(precision, spent_s, cap_s=90.0, values=(1.9, 2.1, 1.8, 2.2, 1.95, 2.05, 1.85, 2.15)):
    """An InterleavedPair in the last of its two planned starts, its planned rounds done there, its
    rounds noisy enough that a +-2 % target is far off."""
    from types import SimpleNamespace

    from pytest_gpu_pairs.record.stats import StoppingRule
    from pytest_gpu_pairs.run import interleaved
    from pytest_gpu_pairs.run.interleaved import InterleavedPair

    pair = InterleavedPair.__new__(InterleavedPair)
    pair.rule, pair.prior = StoppingRule(precision, 3, None, cap_s), interleaved.BETWEEN_START_PRIOR
    pair.planned_starts, pair.planned_rounds, pair.stop_reason = 2, 4, None
    pair.starts = [SimpleNamespace(segment=0), SimpleNamespace(segment=1)]
    pair.rounds = [SimpleNamespace(segment=i // 4, phase=lambda name: True) for i in range(8)]
    pair.started_t, pair.round_s = now() - spent_s, 3.0
    pair.snapshot, pair.env = (lambda: None), SimpleNamespace(idle_power_w=None)
    rounds = [{"concurrency_efficiency": v, "segment": i // 4, "complete": True} for i, v in enumerate(values)]
    return pair, rounds


@pytest.mark.parametrize("spent_s", [40.0, 60.0])
def test_the_last_start_goes_on_past_its_plan_while_the_target_is_unmet_and_the_cap_has_room(monkeypatch, spent_s):
    from pytest_gpu_pairs.run import interleaved

    pair, rounds = _pair_in_its_last_start(0.02, spent_s)
    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: rounds)
    assert pair._decide() is None and pair.stop_reason is None


def test_the_last_start_ends_at_the_cap_even_where_the_starts_offsets_limit_the_interval(monkeypatch):
    from pytest_gpu_pairs.run import interleaved

    pair, rounds = _pair_in_its_last_start(0.02, 88.0, values=(1.90, 1.91, 1.89, 1.90, 2.10, 2.11, 2.09, 2.10))
    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: rounds)
    assert pair._decide() == "stop" and pair.stop_reason.startswith("time cap 90 s reached")


def test_without_a_precision_target_the_plan_ends_the_case(monkeypatch):
    from pytest_gpu_pairs.run import interleaved

    pair, rounds = _pair_in_its_last_start(None, 40.0)
    monkeypatch.setattr(interleaved, "complete_rounds", lambda *_: rounds)
    assert pair._decide() == "stop" and pair.stop_reason.startswith("planned: 4 rounds in each of 2 starts")
