"""The figures of an interleaved case: each round's solo and pair phases share their noise, so
every ratio is taken within a round, and the case reports the mean over rounds with its interval.

Every pair phase is bracketed: each job's solo rate and solo energy per step are the mean of its
solo phase just before the pair phase and its solo phase just after it (the next round's, or
the closing solo phases measured after the last pair), so a drift that is linear over a round
cancels out of every ratio. Neighbouring rounds thereby share a solo phase, and their intervals
are taken on the values they are worth (``stats.bracketed_interval``).

Per round, from each job's step reports inside a phase's window (the settling time after a
switch left out):

- ``fg_slowdown`` = fg rate alone / fg rate in the pair; ``bg_progress_ratio`` = bg rate in the
  pair / bg rate alone; ``concurrency_efficiency`` = 1 / fg_slowdown + bg_progress_ratio: the work
  the pair did per second, in units of one job alone.
- energies from the NVML total-energy counter over each phase's window; ``serial_energy_j`` is
  the pair phase's work done one job after the other (each job's steps at its own solo energy per
  step, idle included), ``energy_saved_vs_serial`` = 1 - pair energy / serial energy.
- the per-job split of the pair phase's energy above idle is the Shapley value of the two-job
  game: a job alone would have spent v(A) = its steps x its solo energy per step above idle, the
  pair spent v(AB); each job gets its own v plus half of what sharing added or saved. The two
  shares add up to the total exactly, and every term is a ratio measured within the round. Per
  step of each job's work in the pair (``<role>_gpu_energy_per_step_j``) the share does not
  depend on the phase's length, but a host-bound job's follows the host's speed; per phase it
  reproduced best across sessions of one host (docs/measuring.md).
- ``fg_solo_gpu_busy``, ``bg_solo_gpu_busy`` and ``pair_gpu_busy``: how much of the time the card
  ran a kernel in each job's solo phases (bracketed like the rates) and in the pair phase, and
  ``efficiency_bound``, the efficiency the card's time allows at those solo fractions. A faster
  host raises a host-bound job's fraction; once the pair's add up to more than 1 the bound falls
  below 2, and the record shows whether the card's time limited the pair. NVML's utilisation
  reading averages a stretch before it and is refreshed a few times a second, so a step in the
  card's load shows fully only in readings taken 0.4 s after it (on an H200 at 10 samples a second,
  the planner's reference cases: mnist_ff + mnist_rnn read 88 % up to 0.1 s after the switch from
  the pair to a solo phase, 69 % at 0.2 s, 30 % at 0.3 s, the solo 12 % from 0.4 s on). Each
  phase's fraction is read from those later readings alone (``UTIL_SPAN_S``): in the 22 reference
  cases the solo phases read as the jobs' 8-s solo profiles do (mean difference 0.03 where the
  whole window gave 0.06; siamese 0.23 in both its cases, as in its profile, where the whole window
  gave 0.33 and 0.40).
"""
from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from pytest_gpu_pairs.monitor.counters import EnergyCounter
from pytest_gpu_pairs.monitor.samples import GpuSample, clock_event_names
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record import metrics
from pytest_gpu_pairs.record.fields import JobFigures
from pytest_gpu_pairs.record.groups import InterleavedRound
from pytest_gpu_pairs.record.measurement import InterleavedMeasurement, Phase, PhaseRound
from pytest_gpu_pairs.record.stats import BetweenStarts, StartInterval, start_interval

SPLIT_METHOD = "shapley_solo_energy"
UTIL_SPAN_S = 0.4  # how long after a switch NVML's utilisation reading shows only the new phase (module docstring)
SILENCE_GAPS = 3.0  # usual report gaps a job may stay silent inside a phase before the phase is not a training phase
MIN_SILENCE_S = 0.5
INTERVAL_METHOD = "student_t_starts"
BETWEEN_START_PRIOR = BetweenStarts(
    0.013, 3.0, "four independent starts of g01 on a quiet H100, each to +-1.2-1.6 %: between-start sd 1.3 % "
    "(reports/reference/default_method/run-spread)")
ROUND_FIGURES = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "gpu_energy_j", "gpu_energy_above_idle_j",
                 "fg_gpu_energy_j", "bg_gpu_energy_j", "fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j",
                 "fg_alone_energy_j", "bg_alone_energy_j", "serial_energy_j", "energy_saved_vs_serial",
                 "gpu_power_avg_w", "fg_steps_per_s", "fg_solo_steps_per_s", "bg_steps_per_s", "bg_solo_steps_per_s", "window_s",
                 "fg_solo_gpu_busy", "bg_solo_gpu_busy", "pair_gpu_busy", "efficiency_bound")
HEADLINE_INTERVALS = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "gpu_energy_above_idle_j",
                      "fg_gpu_energy_j", "bg_gpu_energy_j", "fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j", "energy_saved_vs_serial", "gpu_energy_j",
                      "serial_energy_j", "gpu_power_avg_w")


def _time(report: tuple[float, float]) -> float:
    return report[0]


def _sample_time(sample: GpuSample) -> float:
    return sample.t


def _within(samples: Sequence[GpuSample], start: float, end: float) -> Sequence[GpuSample]:
    """The samples read from ``start`` to ``end`` (samples are in time order)."""
    return samples[bisect.bisect_left(samples, start, key=_sample_time):bisect.bisect_right(samples, end, key=_sample_time)]


def rate(progress: Progress, phase: Optional[Phase], usual_gap_s: Optional[float] = None) -> Optional[float]:
    """Steps per second from the job's reports inside the phase's window: first to last report,
    so a job paused before the window or after it adds no stopped time. With the job's usual time
    between reports, a phase its reports do not cover (a silence of several usual gaps at its
    start, end or inside: an evaluation pass, a checkpoint) has no rate: the job did other work
    there than the steps counted."""
    if phase is None:
        return None
    steps = progress.steps  # in time order: the reader refuses a report out of order
    first = bisect.bisect_left(steps, phase.start, key=_time)
    last = bisect.bisect_right(steps, phase.end, key=_time) - 1
    if last - first < 1:
        return None
    (t0, s0), (t1, s1) = steps[first], steps[last]
    if t1 <= t0 or s1 <= s0:
        return None
    if usual_gap_s is not None and _silence(steps[first:last + 1], phase) > _gap_limit(steps[first:last + 1], usual_gap_s):
        return None
    return (s1 - s0) / (t1 - t0)


def _silence(reports: Sequence[tuple[float, float]], phase: Phase) -> float:
    """The longest stretch of the phase without a report, its two ends included."""
    times = [phase.start] + [t for t, _ in reports] + [phase.end]
    return max(b - a for a, b in zip(times, times[1:]))


def _gap_limit(reports: Sequence[tuple[float, float]], usual_gap_s: float) -> float:
    """How long a job may stay silent inside a phase: several of its usual gaps (its warm-up
    cadence, or its cadence in this phase if slower: a job slowed down in the pair reports less
    often), and never less than ``MIN_SILENCE_S``, so a hiccup of a fast reporter is no gap."""
    inner = [b[0] - a[0] for a, b in zip(reports, reports[1:])]
    cadence = max(usual_gap_s, sorted(inner)[len(inner) // 2] if inner else 0.0)
    return max(MIN_SILENCE_S, SILENCE_GAPS * cadence)


def gpu_counter(samples: Sequence[GpuSample]) -> EnergyCounter:
    return EnergyCounter((s.t, s.energy_mj) for s in samples)


def energy(counter: EnergyCounter, phase: Optional[Phase]) -> Optional[float]:
    return None if phase is None else counter.joules(phase.start, phase.end)


def shapley_split(pair_j: Optional[float], fg_alone_j: Optional[float],
                  bg_alone_j: Optional[float]) -> tuple[Optional[float], Optional[float]]:
    """Each job's share of the pair's energy: its stand-alone cost plus half the joint surplus."""
    if pair_j is None or fg_alone_j is None or bg_alone_j is None:
        return None, None
    fg = (fg_alone_j + pair_j - bg_alone_j) / 2.0
    return fg, pair_j - fg


def shapley_group_split(pair_j: Optional[float], alone_j: Sequence[Optional[float]]) -> list[Optional[float]]:
    """Each job's share of a group's energy: the Shapley value of the game whose only measured
    coalitions are each job alone and all together (every smaller coalition costs the sum of its
    jobs alone), which is each job's stand-alone cost plus an equal part of the joint surplus. The
    last share is what the others leave, so the shares add up to the total; a pair's is
    ``shapley_split``'s."""
    if len(alone_j) == 2:
        return list(shapley_split(pair_j, alone_j[0], alone_j[1]))
    if pair_j is None or not alone_j or any(a is None for a in alone_j):
        return [None] * len(alone_j)
    known = [a for a in alone_j if a is not None]
    surplus = (pair_j - sum(known)) / len(known)
    shares: list[Optional[float]] = [a + surplus for a in known[:-1]]
    return shares + [pair_j - sum(a for a in shares if a is not None)]


def round_figures(r: PhaseRound, m: InterleavedMeasurement, idle_w: Optional[float],
                  after: Optional[PhaseRound] = None, counter: Optional[EnergyCounter] = None) -> dict[str, Any]:
    """A round's figures; ``after`` is the round (or closing solo phases) measured next, whose
    solo phases bracket this round's pair phase; ``counter`` the case's energy counter, if read already.
    A group of more jobs keeps the pair's keys for its first two and lists every job under ``jobs``."""
    counter = counter or gpu_counter(m.samples)
    progresses = m.progresses
    roles = list(progresses)
    pair = r.phase("pair")
    solo = {role: [p for p in (r.phase(role), after.phase(role) if after else None) if p is not None]
            for role in roles}
    gap = m.report_gap_s.get
    solo_rate = {role: metrics.measured_mean(rate(progresses[role], p, gap(role)) for p in solo[role]) for role in roles}
    pair_rate = {role: rate(progresses[role], pair, gap(role)) for role in roles}
    slowdown = metrics.per_unit(solo_rate["fg"], pair_rate["fg"])
    ratio = {role: metrics.per_unit(pair_rate[role], solo_rate[role]) for role in roles}
    window = pair.seconds if pair else None
    pair_j = energy(counter, pair)
    pair_above = metrics.energy_above_idle(pair_j, idle_w, window or 0.0)
    per_step = {role: _solo_per_step(counter, solo[role], progresses[role], idle_w, gap(role)) for role in roles}
    steps = {role: _times(pair_rate[role], window) for role in roles}
    serial = metrics.serial_energy_group([steps[role] for role in roles], [per_step[role][0] for role in roles])
    alone = {role: _times(steps[role], per_step[role][1]) for role in roles}
    share = dict(zip(roles, shapley_group_split(pair_above, [alone[role] for role in roles])))
    efficiency = (metrics.concurrency_efficiency(slowdown, ratio["bg"]) if len(roles) == 2
                  else metrics.group_efficiency(slowdown, [ratio[role] for role in roles[1:]]))
    busy = {role: metrics.measured_mean(gpu_busy(m.samples, p) for p in solo[role]) for role in roles}
    energy_expected = bool(m.samples) and idle_w is not None
    jobs = [JobFigures(role=role, solo_steps_per_s=solo_rate[role], steps_per_s=pair_rate[role],
                       progress_ratio=ratio[role], gpu_energy_j=share[role],
                       gpu_energy_per_step_j=metrics.energy_per_step(share[role], steps[role]),
                       alone_energy_j=alone[role], solo_gpu_busy=busy[role]) for role in roles]
    return InterleavedRound(
        round=r.index, segment=r.segment, bracketed=after is not None and all(len(p) == 2 for p in solo.values()),
        complete=efficiency is not None and (not energy_expected or share["fg"] is not None),
        concurrency_efficiency=efficiency, fg_slowdown=slowdown, bg_progress_ratio=ratio["bg"], gpu_energy_j=pair_j,
        gpu_energy_above_idle_j=pair_above, fg_gpu_energy_j=share["fg"], bg_gpu_energy_j=share["bg"],
        fg_gpu_energy_per_step_j=metrics.energy_per_step(share["fg"], steps["fg"]),
        bg_gpu_energy_per_step_j=metrics.energy_per_step(share["bg"], steps["bg"]),
        fg_alone_energy_j=alone["fg"], bg_alone_energy_j=alone["bg"],
        serial_energy_j=serial, energy_saved_vs_serial=metrics.energy_saved_fraction(pair_j, serial),
        gpu_power_avg_w=metrics.per_unit(pair_j, window), fg_steps_per_s=pair_rate["fg"],
        fg_solo_steps_per_s=solo_rate["fg"], bg_steps_per_s=pair_rate["bg"], bg_solo_steps_per_s=solo_rate["bg"],
        window_s=window, fg_solo_gpu_busy=busy["fg"], bg_solo_gpu_busy=busy["bg"],
        pair_gpu_busy=gpu_busy(m.samples, pair),
        efficiency_bound=metrics.group_efficiency_bound([busy[role] for role in roles]),
        **device_state(m.samples, r.start, r.end),
        phases=[{"name": p.name, "switched_t": p.switched_t, "start": p.start, "end": p.end,
                 "sm_clock_mhz": mean_sm_clock(m.samples, p), **link_state(m.samples, p)} for p in r.phases],
        jobs=jobs,
    ).keys_set()


JOB_FIGURES = ("solo_steps_per_s", "steps_per_s", "progress_ratio", "gpu_energy_j", "gpu_energy_per_step_j",
               "alone_energy_j", "solo_gpu_busy")


def job_means(used: Sequence[dict[str, Any]], roles: Sequence[str]) -> list[dict[str, Any]]:
    """Each job's figures as the mean over the rounds the case's figures come from: the shares of
    the energy add up to the mean energy above idle, as in each round."""
    out = []
    for index, role in enumerate(roles):
        mine = [r["jobs"][index] for r in used if isinstance(r.get("jobs"), list) and len(r["jobs"]) > index]
        out.append({"role": role, **{key: metrics.mean_and_std([j[key] for j in mine])[0] if mine else None
                                     for key in JOB_FIGURES}})
    return out


def _times(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a * b if a is not None and b is not None else None


def _solo_per_step(counter: EnergyCounter, phases: Sequence[Phase], progress: Progress,
                   idle_w: Optional[float], usual_gap_s: Optional[float]) -> tuple[Optional[float], Optional[float]]:
    """A job's energy per step alone, of the whole card and above idle: the mean over its solo
    phases around the pair phase."""
    each = [_per_step(counter, phase, rate(progress, phase, usual_gap_s), idle_w) for phase in phases]
    return metrics.measured_mean(total for total, _ in each), metrics.measured_mean(above for _, above in each)


def _per_step(counter: EnergyCounter, phase: Phase, job_rate: Optional[float],
              idle_w: Optional[float]) -> tuple[Optional[float], Optional[float]]:
    total = energy(counter, phase)
    if total is None or job_rate is None:
        return None, None
    steps = job_rate * phase.seconds
    above = metrics.energy_above_idle(total, idle_w, phase.seconds)
    return metrics.energy_per_step(total, steps), metrics.energy_per_step(above, steps)


def mean_sm_clock(samples: Sequence[GpuSample], phase: Phase) -> Optional[float]:
    """The card's mean SM clock inside a phase's measured window: a job alone and the pair may run
    at different clocks, which would explain a job stepping faster beside another than alone."""
    return metrics.measured_mean(s.sm_clock_mhz for s in _within(samples, phase.start, phase.end))


def link_state(samples: Sequence[GpuSample], phase: Phase) -> dict[str, Optional[int]]:
    """The slowest performance state and PCIe link generation the card was seen in inside a phase:
    a card or link that idles down while a light job runs alone, and stays up beside another, would
    make that job step faster together."""
    inside = _within(samples, phase.start, phase.end)
    states = [s.pstate for s in inside if s.pstate is not None]
    gens = [s.pcie_gen for s in inside if s.pcie_gen is not None]
    return {"pstate_max": max(states) if states else None, "pcie_gen_min": min(gens) if gens else None}


def gpu_busy(samples: Sequence[GpuSample], phase: Optional[Phase]) -> Optional[float]:
    """The fraction of a phase the card ran a kernel: NVML's utilisation read inside the phase's
    measured window, from the readings taken ``UTIL_SPAN_S`` or more after the switch. A reading
    covers a stretch of time before it, so in half-second phases the earlier ones carried the
    previous phase's busy time in: a light job's solo phase after the pair read twice as busy as
    after the other job's (module docstring)."""
    if phase is None:
        return None
    settled = max(phase.start, phase.switched_t + UTIL_SPAN_S)
    busy = metrics.measured_mean(s.util_pct for s in _within(samples, settled, phase.end))
    return busy / 100.0 if busy is not None else None


def _recorded_phase(entry: Any) -> Optional[Phase]:
    """A phase as a record describes it (``rounds[].phases[]``), None where it gives no numbers."""
    if not isinstance(entry, Mapping):
        return None
    times = [entry.get(k) for k in ("switched_t", "start", "end")]
    numbers = [float(x) for x in times if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return Phase(str(entry.get("name")), *numbers) if len(numbers) == 3 else None


def recorded_solo_busy(rounds: Sequence[Any], samples: Sequence[GpuSample]) -> dict[str, float]:
    """Each job's busy fraction over a record's solo phases (by role), read again from its case's
    readings as ``gpu_busy`` reads a phase now: a record written before kept the whole window's.
    A phase the record does not describe with numbers is passed over."""
    found: dict[str, list[float]] = {}
    for round_ in rounds:
        entries = round_.get("phases") if isinstance(round_, Mapping) else None
        for entry in entries if isinstance(entries, list) else []:
            phase = _recorded_phase(entry)
            busy = gpu_busy(samples, phase) if phase is not None and phase.name != "pair" else None
            if phase is not None and busy is not None:
                found.setdefault(phase.name, []).append(busy)
    return {role: sum(values) / len(values) for role, values in found.items()}


def device_state(samples: Sequence[GpuSample], start: float, end: float) -> dict[str, Any]:
    """Clocks, power limit, temperature and clock-event reasons over a round, so a drift between
    rounds or sessions can be explained."""
    inside = _within(samples, start, end)
    reasons = 0
    readable = False
    for s in inside:
        if s.clock_event_reasons is not None:
            readable, reasons = True, reasons | s.clock_event_reasons
    temps = [s.temp_c for s in inside if s.temp_c is not None]
    return {"sm_clock_mhz": metrics.measured_mean(s.sm_clock_mhz for s in inside), "mem_clock_mhz": metrics.measured_mean(s.mem_clock_mhz for s in inside),
            "power_limit_w": metrics.measured_mean(s.power_limit_w for s in inside), "gpu_temp_max_c": max(temps) if temps else None,
            "clock_event_reasons": clock_event_names(reasons if readable else None)}


def figure_rounds(m: InterleavedMeasurement, idle_w: Optional[float]) -> list[dict[str, Any]]:
    """The figures of every round that has a pair phase, each bracketed by the solo phases after
    it in its own segment; the closing solo phases are no round of their own."""
    following = [after if after.segment == r.segment else None for r, after in zip(m.rounds, m.rounds[1:])] + [None]
    counter = gpu_counter(m.samples)
    return [round_figures(r, m, idle_w, after, counter) for r, after in zip(m.rounds, following) if r.phase("pair")]


def complete_rounds(m: InterleavedMeasurement, idle_w: Optional[float]) -> list[dict[str, Any]]:
    """The rounds every figure comes from: those with an efficiency and, where energy is
    measured, its split. A round in which a job reported no steps through a phase (it was not
    training there) says nothing about sharing, and the means of a case are all taken over the
    same rounds, so the energy split adds up to the energy above idle in the case as in each round."""
    return [r for r in figure_rounds(m, idle_w) if r["complete"]]


def case_figures(m: InterleavedMeasurement, idle_w: Optional[float]) -> dict[str, Any]:
    """Every round's figures, then the mean, ``_std`` and 95 % interval (``_ci``) of each over the
    complete rounds: an interval over the pair's starts (``stats.start_interval``), so that it
    covers where the next start of the pair lands and not only this start's rounds."""
    rounds = figure_rounds(m, idle_w)
    used = [r for r in rounds if r["complete"]]
    segments = [r["segment"] for r in used]
    out: dict[str, Any] = {"rounds": rounds, "n_rounds": len(used), "rounds_excluded": len(rounds) - len(used),
                           "interval_method": INTERVAL_METHOD}
    for key in ROUND_FIGURES:
        values = [r[key] for r in used]
        ci = start_interval(values, segments, m.prior).interval
        out[key] = ci.mean
        out[f"{key}_std"] = metrics.mean_and_std(values)[1]
        if key in HEADLINE_INTERVALS:
            out[f"{key}_ci"] = ci.as_list()
    eff = start_interval([r["concurrency_efficiency"] for r in used], segments, m.prior)
    out["precision_achieved"] = eff.interval.relative_half_width
    out["n_rounds_effective"] = eff.interval.n_effective
    out.update(start_figures(m, used, eff))
    out["jobs"] = job_means(used, list(m.progresses))
    return out


def start_figures(m: InterleavedMeasurement, used: list[dict[str, Any]], eff: StartInterval) -> dict[str, Any]:
    """Each start's own mean efficiency and solo paces beside how it began, and the between-start
    variation the interval took: what moves a start is recorded where it cannot be removed."""
    starts = []
    for info in m.starts:
        mine = [r for r in used if _start_of(r["segment"], m.starts) == info.index]
        starts.append({**info.as_record(), "rounds": len(mine),
                       **{key: metrics.measured_mean(r[key] for r in mine)
                          for key in ("concurrency_efficiency", "fg_solo_steps_per_s", "bg_solo_steps_per_s")}})
    prior = m.prior
    return {"starts": starts, "n_starts": len({_start_of(r["segment"], m.starts) for r in used}) or None,
            "between_start_prior": ({"sd": prior.sd, "df": prior.df, "source": prior.source}
                                    if prior is not None else None),
            "between_start_sd": eff.between_sd, "between_start_df": eff.between_df,
            "between_start_basis": (f"prior {prior.sd:.1%} worth {prior.df:g} df ({prior.source}) pooled with the "
                                    "case's own starts" if prior is not None else
                                    "the case's own starts only" if eff.n_starts > 1 else None)}


def _start_of(segment: int, starts: Sequence[Any]) -> int:
    """The start a segment belongs to: the last start that began at or before it."""
    return max((s.index for s in starts if s.segment <= segment), default=1)
