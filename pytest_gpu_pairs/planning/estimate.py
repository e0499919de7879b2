"""What a selection of cases will cost before it runs: each case's estimated seconds and the basis
the figure rests on, so a user sees a two-hour case before starting it, and a scheduler can hand out
the longest cases first or balance shards by cost.

Four bases, best first:

- ``earlier result``: a complete record of the same case, scale and device in the results folder
  (its rounds as timed then; for a study's replicated case, the same case of another seed), and
  solo baselines from any earlier record that measured the job;
- ``profile (measured here)``: a profile ``gpu-pairs profile`` stored in the results folder, of
  the same workload (a command workload: the same command) on the same device: its start-up and
  seconds per step, and its whole run where it ended inside the profile (``planning.own_profiles``);
- ``profile``: the package's H100 workload profiles, on a GPU only (step time at the profiled batch
  size, scaled linearly with the batch size) and the start-up and finish times of the feasibility
  study's solo baselines, from the one table the planner reads too (``planning.profiles``);
- ``default``: a job nothing is known about (a command workload not profiled, the CPU without a
  profile) is counted as ``DEFAULT_JOB_S`` a run, and the table says so and how to measure it.

A case's cost follows how the case runner spends time: an ``epoch`` case measures the solo
baselines the session has not measured yet (each once per session, so they are charged to the
first case that needs them), then ``runs_per_config`` rounds of the background starting, the
foreground's epochs beside it and the foreground finishing. Time-sliced jobs are assumed to slow
each other only where their profiled GPU utilisations add up to more than the whole card.

An ``interleaved`` case on a GPU spreads its rounds over the pair's starts until its time cap: the
interval then covers where the next start lands, and the precision target lies beyond it on the
H100s (the between-start offset alone is about +-1.9 % over three starts), so the runner plans its
rounds to fill the cap and the case costs the cap (the H100 verdicts study: 86-90 s of device time
at a 90 s cap, the case 0.5-1 s more), unless the case's own earlier record says otherwise. On the
CPU it is played out as the runner plays it (``run.interleaved``): both jobs start, the slower
start-up counts, ``warmup_s`` passes, and a fixed three rounds of three phases follow, each phase
as long as the jobs' step rates make it (a job that reports rarely lengthens the phase, a slow step
the settling). A concurrent case on a GPU first measures the fit profiles of its jobs that the
results folder does not hold yet (each once; charged to the first case that needs it, at the
seconds the package's H100 fit profiles took, or ``DEFAULT_FIT_S``, which the row names without
weakening the case's basis: a fit profile is a small part of what a case costs). Nothing here imports torch or
opens a device.
"""
from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import REPLICATE_SUFFIX, Case, JobConfig
from pytest_gpu_pairs.planning.own_profiles import BASIS as OWN
from pytest_gpu_pairs.planning.own_profiles import OwnProfile, OwnProfiles, read_own_profiles
from pytest_gpu_pairs.planning.profiles import packaged
from pytest_gpu_pairs.planning.schedule import CaseCost
from pytest_gpu_pairs.protocol import STEADY_STEP_INTERVAL_S
from pytest_gpu_pairs.record.store import case_records, fit_profiles
from pytest_gpu_pairs.run.interleaved import REPORTS_PER_PHASE, STEPS_PER_SETTLE
from pytest_gpu_pairs.run.methods import interleaved_rule, method_of
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.round import ALONE_SETTLE_S

DEFAULT_JOB_S = 60.0
DEFAULT_FIT_S = 40.0  # a fit profile of a workload the package has not measured: two starts, an evaluation
LONG_FACTOR = 3.0  # a case this many times the median case (and over LONG_MIN_S) is called out
LONG_MIN_S = 120.0
EARLIER, PROFILE, DEFAULT = "earlier result", "profile", "default"
BASES = (EARLIER, OWN, PROFILE, DEFAULT)  # best first
PROFILE_HINT = "gpu-pairs profile SETTINGS measures each workload's rate in seconds"


@dataclass(frozen=True)
class JobCost:
    """One run of one job: start-up (process to first step), training, finish (last step to exit);
    ``step_s`` and ``report_gap_s`` (where known) shape an interleaved case's phases; a run whose
    length is not known (a command workload's, from a profile that did not see it end) has
    ``run_known`` False and its training counted as ``DEFAULT_JOB_S``."""

    startup_s: float
    train_s: float
    finish_s: float
    basis: str
    util_pct: float = 0.0
    step_s: Optional[float] = None
    report_gap_s: Optional[float] = None
    run_known: bool = True
    source: str = ""

    @property
    def total_s(self) -> float:
        return self.startup_s + self.train_s + self.finish_s


def _alone_windows_s(case: Case, bg: JobCost) -> float:
    """A kept-running background's two windows alone (``run.round``): the one before waits for its
    first run to end."""
    if not (case.keep_background and case.background_alone_s > 0 and case.bg is not None and case.bg.is_builtin):
        return 0.0
    return bg.train_s + bg.finish_s + 2 * case.background_alone_s + ALONE_SETTLE_S


def _runs_s(cost: JobCost, runs: int) -> float:
    """A job that trains its run ``runs`` times in one process starts once."""
    return cost.startup_s + runs * (cost.train_s + cost.finish_s)


@dataclass(frozen=True)
class Estimate:
    """A case's estimated seconds; ``solo_s`` of them are baselines measured first in this case.
    ``basis`` is the weakest basis any part rests on; ``detail`` says what was assumed."""

    case_id: str
    seconds: float
    basis: str
    detail: str
    solo_s: float = 0.0
    solo_jobs: tuple[JobConfig, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Earlier:
    """What earlier complete records of this scale and device say: case rounds and solo runs, timed."""

    rounds_s: Mapping[str, float] = field(default_factory=dict)
    solo_s: Mapping[tuple[str, str], float] = field(default_factory=dict)
    other_seed_s: Mapping[str, float] = field(default_factory=dict)  # a study's case of another seed (``seedless``)


def seedless(case_id: str, variant: str) -> Optional[str]:
    """A replicated case's id with its seed taken out of its variant (``lr_min_s2`` -> ``lr_min``):
    each seed of a case trains the same steps, so one seed's time stands for another's. None for a
    case without a seed."""
    bare = REPLICATE_SUFFIX.sub("", variant or "")
    return case_id.replace(f"-{variant}-", f"-{bare}-", 1) if bare != variant else None


def _job_key(model: str, hparams: Mapping[str, Any]) -> tuple[str, str]:
    return model, json.dumps(dict(hparams), sort_keys=True, default=str)


def _span(entry: Mapping[str, Any], start: str, end: str) -> Optional[float]:
    a, b = entry.get(start), entry.get(end)
    return b - a if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b >= a else None


def earlier_results(out_dir: Optional[Path], scale: float, device: str) -> Earlier:
    """Timings of complete records in ``out_dir`` made at ``scale`` on ``device`` (cpu, or any GPU
    for cuda); unreadable records are left out here (the store reports them where it matters)."""
    if out_dir is None or not Path(out_dir).is_dir():
        return Earlier()
    found, _ = case_records(out_dir)
    rounds: dict[str, float] = {}
    solos: dict[tuple[str, str], float] = {}
    other_seed: dict[str, float] = {}
    for _, record in found:
        data = record.to_dict()
        if not data.get("complete") or data.get("scale") != scale or (data.get("device") == "cpu") != (device == "cpu"):
            continue
        timeline = data.get("timeline") or {}
        solo_spent = 0.0
        for solo in timeline.get("solo") or []:
            spent = _span(solo, "start_t", "end_t")
            hparams = data.get("fg_hparams") if solo.get("model") == data.get("fg_model") else data.get("bg_hparams")
            if spent is not None and isinstance(hparams, dict):
                solos.setdefault(_job_key(solo["model"], hparams), spent)
                solo_spent += spent
        case_s = _span(timeline, "case_start_t", "case_end_t")
        fit = data.get("fit_profile_s")
        fit_s = fit if isinstance(fit, (int, float)) else 0.0
        if case_s is not None and data.get("case_id"):
            rounds[data["case_id"]] = max(0.0, case_s - solo_spent - fit_s)
            key = seedless(data["case_id"], str(data.get("variant") or ""))
            if key is not None and not data.get("reused_measurement"):  # a reused solo run took no time of its own
                other_seed.setdefault(key, rounds[data["case_id"]])
    return Earlier(rounds, solos, other_seed)


def _steps(job: JobConfig, scale: float) -> Optional[int]:
    """Optimiser steps the job runs: as the training loop counts them (epochs x steps per epoch x
    scale, rounded up, at least one)."""
    info = BUILTINS.get(job.model)
    if info is None or "batch_size" not in info.hyperparameters:
        return None
    hp = job.hyperparameters
    epochs = float(hp.get("epochs", 1))
    return max(1, math.ceil(epochs * info.steps_per_epoch(hp.get("batch_size")) * scale))


def clock(seconds: float) -> str:
    """Seconds as the plans, the live line and the summary print them: M:SS, or H:MM:SS from an hour."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def report_gap(step_s: float) -> float:
    """A built-in's time between step reports in steady-state mode: every step, at most twenty a second."""
    return step_s * max(1, math.ceil(STEADY_STEP_INTERVAL_S / step_s - 1e-9))


def _default(device: str) -> JobCost:
    typical = packaged()
    startup = min(typical.typical_startup_s or 0.0, DEFAULT_JOB_S)
    finish = min(typical.typical_finish_s or 0.0, DEFAULT_JOB_S - startup)
    return JobCost(startup, DEFAULT_JOB_S - startup - finish, finish, DEFAULT, run_known=False)


def _batch_ratio(job: JobConfig, profiled_batch: Optional[int]) -> float:
    batch = job.hyperparameters.get("batch_size") if job.is_builtin else None
    return float(batch) / profiled_batch if isinstance(batch, (int, float)) and profiled_batch else 1.0


def _own_cost(job: JobConfig, profile: OwnProfile, step_time_s: float, scale: float) -> JobCost:
    """One run from a profile measured here: its step rate (``step_time_s``, the profile's) times
    the run's steps where they are known (a built-in's epochs; a command workload's whole run seen
    in the profile)."""
    step = step_time_s * _batch_ratio(job, profile.batch_size)
    steps = _steps(job, scale) if job.is_builtin else None
    train = steps * step if steps is not None else profile.run_train_s()
    known = train is not None
    return JobCost(profile.startup_s or 0.0, train if train is not None else DEFAULT_JOB_S, 0.0, OWN, profile.util_avg_pct or 0.0,
                   step, profile.report_gap_s or report_gap(step), known, profile.source)


def job_cost(job: JobConfig, device: str, scale: float, own: Optional[OwnProfiles] = None) -> JobCost:
    """One run of ``job`` from a profile measured here, else the package's profiles, else the
    stated default where nothing is known of it."""
    mine = own.for_job(job, device) if own is not None else None
    if mine is not None and mine.step_time_s:
        return _own_cost(job, mine, mine.step_time_s, scale)
    table = packaged()
    row = table.get(job.model) if job.is_builtin else None
    steps = _steps(job, scale) if row is not None else None
    profiled_device = row is not None and (row.device == device or row.device == "cpu")
    if row is None or steps is None or not profiled_device or not row.step_time_s or not row.batch_size:
        return _default(device)
    step = row.step_time_s * _batch_ratio(job, row.batch_size)
    startup = row.startup_s if row.startup_s is not None else table.typical_startup_s or 0.0
    finish = row.finish_s if row.finish_s is not None else table.typical_finish_s or 0.0
    return JobCost(startup, steps * step, finish, PROFILE, round(row.util_pct or 0.0, 1), step, report_gap(step))


def _weakest(*bases: str) -> str:
    return max(bases, key=BASES.index)


def _run_basis(cost: JobCost) -> str:
    return cost.basis if cost.run_known else DEFAULT


def _slowdown(fg: JobCost, bg: JobCost) -> float:
    return max(1.0, (fg.util_pct + bg.util_pct) / 100.0)


def phases(case: Case, jobs: Sequence[JobCost]) -> tuple[float, float]:
    """Measured and settling seconds of a phase, as the runner sets them after the warm-up: a phase
    holds ``REPORTS_PER_PHASE`` reports of the job that reports least often (in whole multiples of
    ``phase_s``), settling outlasts ``STEPS_PER_SETTLE`` steps of the slower job."""
    gaps = [j.report_gap_s for j in jobs if j.report_gap_s]
    needed = max([REPORTS_PER_PHASE * g for g in gaps], default=0.0)
    phase = case.phase_s * max(1, math.ceil(needed / case.phase_s - 1e-9))
    settle = max([case.settle_s] + [STEPS_PER_SETTLE * j.step_s for j in jobs if j.step_s])
    return phase, settle


@dataclass(frozen=True)
class Rounds:
    """An interleaved case played out: complete rounds, seconds from the jobs' start to the end, and why it stopped."""

    count: int
    seconds: float
    round_s: float
    stop: str


def play_rounds(start_s: float, phase_s: float, target: Optional[int], max_rounds: Optional[int],
                cap_s: float, jobs: int = 2) -> Rounds:
    """As the runner does: each round's solo phases (one per job), then the stopping rule (from the
    second round on: ``target`` rounds reached, ``max_rounds``, or one more round past ``cap_s``;
    None: no such limit), then the pair."""
    round_s = (jobs + 1) * phase_s
    most = min((n for n in (target, max_rounds) if n is not None), default=None)
    t, done = start_s, 0
    while True:
        t += jobs * phase_s
        if done and most is not None and done >= most:
            return Rounds(done, t, round_s, f"{done} rounds")
        if done and t + round_s > cap_s:
            return Rounds(done, t, round_s, f"the {cap_s:g} s cap")
        t += phase_s
        done += 1


class Estimator:
    """Estimates cases in the order they will run; solo baselines are charged once, to the first
    case that measures them, as the session caches them."""

    def __init__(self, options: GpuPairsOptions, device: str, earlier: Optional[Earlier] = None,
                 own: Optional[OwnProfiles] = None):
        self.options, self.device = options, device
        self.earlier = earlier if earlier is not None else earlier_results(options.out_dir, options.scale, device)
        self.own = own if own is not None else read_own_profiles(options.out_dir)
        self.measured: set[JobConfig] = set()
        self.fitted = {_fit_key(p.workload, p.hyperparameters, p.card_mb) for p in fit_profiles(options.out_dir)}

    def job(self, job: JobConfig) -> JobCost:
        return job_cost(job, self.device, self.options.scale, self.own)

    def _solo(self, job: JobConfig) -> tuple[float, str]:
        known = self.earlier.solo_s.get(_job_key(job.model, job.hyperparameters)) if job.runs == 1 else None
        cost = self.job(job)
        return (known, EARLIER) if known is not None else (_runs_s(cost, job.runs), _run_basis(cost))

    def _solos(self, jobs: Iterable[JobConfig]) -> tuple[float, list[str], tuple[JobConfig, ...]]:
        seconds, bases, charged = 0.0, list[str](), list[JobConfig]()
        for job in jobs:
            if job in self.measured:
                continue
            self.measured.add(job)
            spent, basis = self._solo(job)
            seconds, charged = seconds + spent, [*charged, job]
            bases.append(basis)
        return seconds, bases, tuple(charged)

    def _epoch_round(self, case: Case) -> tuple[float, str]:
        fg = self.job(case.fg)
        if case.bg is None:
            return _runs_s(fg, case.fg.runs), _run_basis(fg)
        bg = self.job(case.bg)
        spent = max(fg.startup_s, bg.startup_s) + fg.train_s * _slowdown(fg, bg) + fg.finish_s
        return spent + _alone_windows_s(case, bg), _weakest(_run_basis(fg), bg.basis)

    def _target_rounds(self, rule) -> tuple[Optional[int], str]:
        """The H100 study's median rounds, scaled to this rule's target: an interval narrows with the
        square root of the rounds."""
        if rule.precision is None:
            return rule.min_rounds, "fixed"
        table = packaged()
        if table.precision_rounds is None or table.precision_target is None:
            return None, f"to ±{rule.precision:.1%} (rounds unknown: to the cap)"
        rounds = max(rule.min_rounds, math.ceil(table.precision_rounds * (table.precision_target / rule.precision) ** 2))
        return rounds, (f"to ±{rule.precision:.1%} (about {rounds}: the H100 default-method study's median, "
                        f"{table.precision_rounds:g} to ±{table.precision_target:.1%})")

    def _fits(self, case: Case) -> tuple[float, str]:
        """The fit profiles this case measures first: those of its jobs on its card that neither the
        results folder nor an earlier case of this plan has."""
        if self.device != "cuda" or case.mode != "concurrent" or case.bg is None:
            return 0.0, ""
        card = self.options.gpu_memory_mb if self.options.gpu_memory_mb is not None else case.card_mb
        seconds, names = 0.0, []
        for job in case.jobs:
            key = _fit_key(job.model, job.hyperparameters, card)
            if key in self.fitted:
                continue
            self.fitted.add(key)
            row = packaged().get(job.model) if job.is_builtin else None
            known = row is not None and row.fit_s is not None
            seconds += row.fit_s if row is not None and row.fit_s is not None else DEFAULT_FIT_S
            names.append(job.model if known else f"{job.model} ({DEFAULT_FIT_S:g} s assumed)")
        return seconds, f", fit profiles of {' and '.join(names)} first ({seconds:.1f} s)" if names else ""

    def _interleaved_rounds(self, case: Case) -> tuple[float, str, str]:
        """Its rounds played out: a solo phase for each job and one with all of them, per round."""
        costs = [self.job(job) for job in case.jobs]
        rule = interleaved_rule(case, self.device)
        phase, settle = phases(case, costs)
        target, how = self._target_rounds(rule)
        if self.device == "cuda" and rule.precision is not None:
            target, how = None, (f"over the pair's starts to the cap (the interval covers where the next start lands; "
                                 f"the ±{rule.precision:.0%} target lies beyond the cap on the H100s)")
        startup = max(c.startup_s for c in costs)
        played = play_rounds(startup + case.warmup_s, phase + settle, target, rule.max_rounds, rule.max_seconds,
                             len(costs))
        detail = (f"{played.count} rounds of {played.round_s:.1f} s {how}, stopped by {played.stop}; "
                  f"start-up {startup:.0f} s, warm-up {case.warmup_s:g} s")
        basis = _weakest(*(c.basis for c in costs))
        if basis == DEFAULT:
            detail += f"; step rates unknown ({PROFILE_HINT})"
        return played.seconds, basis, detail

    def scaling(self, case: Case) -> Estimate:
        """A scaling case: its ranks start together and run their steps at the profiled step time of
        the per-GPU batch; the all-reduce is not counted."""
        earlier = self.earlier.rounds_s.get(case.id)
        if earlier is not None:
            return Estimate(case.id, earlier + case.cool_down_s, EARLIER, "as timed before")
        if case.scaling is None:
            raise ValueError(f"{case.id}: a scaling case without its plan")
        plan = case.scaling.scaled(self.options.scale)
        steps = plan.warmup_steps + plan.steps + plan.comm_probe_steps
        job = self.job(case.fg)
        if job.basis == DEFAULT or not job.step_s:
            return Estimate(case.id, DEFAULT_JOB_S + case.cool_down_s, DEFAULT,
                            f"{plan.gpus} rank(s); {DEFAULT_JOB_S:g} s assumed where nothing is known")
        spent = job.startup_s + steps * job.step_s + job.finish_s
        return Estimate(case.id, spent + case.cool_down_s, job.basis, f"{plan.gpus} rank(s), {steps} steps")

    def case(self, case: Case) -> Estimate:
        """The estimate the case's method names (``run.methods``)."""
        return method_of(case).estimate(self, case)

    def interleaved(self, case: Case) -> Estimate:
        """An interleaved case: its rounds played to the stopping rule, and the pair's fit profiles."""
        if case.bg is None:
            raise ValueError(f"{case.id}: an interleaved case is a pair")
        spent, basis, detail = self._interleaved_rounds(case)
        earlier = self.earlier.rounds_s.get(case.id)
        if earlier is not None:
            spent, basis, detail = earlier, EARLIER, "as timed before"
        fit_s, fit_detail = self._fits(case)
        return Estimate(case.id, spent + fit_s + case.cool_down_s, basis, detail + fit_detail)

    def epoch(self, case: Case) -> Estimate:
        """An epoch case, solo or a pair: its solo baselines (charged to the first case needing
        them) and ``runs_per_config`` rounds."""
        solo_s, solo_bases, charged = self._solos([case.fg] if case.mode == "solo" else
                                                  [j for j in (case.fg, case.bg) if j is not None])
        earlier, timed = self.earlier.rounds_s.get(case.id), "rounds as timed before"
        key = seedless(case.id, case.variant)
        if earlier is None and key is not None and key in self.earlier.other_seed_s:
            earlier, timed = self.earlier.other_seed_s[key], "rounds as timed for another seed"
        if earlier is not None and case.mode == "solo":
            solo_s, solo_bases = 0.0, []  # its run is the job's baseline: the time on record holds it
        solos = f", {len(charged)} solo baseline(s)" if charged else ""
        if earlier is not None:
            rounds_s, round_basis, detail = earlier, EARLIER, f"{timed}{solos}"
        else:
            one, round_basis = self._epoch_round(case)
            runs = case.runs_per_config - (1 if case.mode == "solo" and charged else 0)
            rounds_s = runs * (one + case.cool_down_s)
            detail = f"{case.runs_per_config} round(s){solos}"
        basis = _weakest(round_basis, *solo_bases)
        if basis == DEFAULT:
            detail += f"; {DEFAULT_JOB_S:g} s per job run assumed where nothing is known ({PROFILE_HINT})"
        return Estimate(case.id, solo_s + rounds_s, basis, detail, solo_s, charged)


SESSION_START_S = {"cuda": 8.0, "cpu": 3.0}  # pytest's start, the idle-power reading on a GPU (3 s), the summary:
# one-case sessions on the H100 of the verdicts study took 8-9 s more than their case


def session_total(estimates: Sequence[Estimate], device: str) -> float:
    """What the whole selection takes: its cases and the session's own start and end."""
    return sum(e.seconds for e in estimates) + SESSION_START_S.get(device, SESSION_START_S["cpu"])


def _fit_key(model: str, hparams: Mapping[str, Any], card_mb: Optional[float]) -> tuple[str, str, Optional[float]]:
    return (*_job_key(model, hparams), card_mb)


def estimate_cases(cases: Sequence[Case], options: GpuPairsOptions, device: str,
                   earlier: Optional[Earlier] = None, own: Optional[OwnProfiles] = None) -> list[Estimate]:
    """Every case's estimate, in run order (solo baselines charged to the first case needing them)."""
    estimator = Estimator(options, device, earlier, own)
    return [estimator.case(case) for case in cases]


def standalone(case: Case, options: GpuPairsOptions, device: str, earlier: Optional[Earlier] = None,
               own: Optional[OwnProfiles] = None) -> Estimate:
    """One case as if it ran first in its own session (a worker or shard measures its own baselines)."""
    return Estimator(options, device, earlier, own).case(case)


def case_costs(cases: Sequence[Case], options: GpuPairsOptions, device: str,
               earlier: Optional[Earlier] = None, own: Optional[OwnProfiles] = None) -> list[CaseCost]:
    """Every case's cost for the scheduler: its rounds, and each solo baseline it needs with its own
    seconds, so a bin charges a baseline once however many of its cases share it. A solo-mode
    case whose first round is its baseline counts that round as the baseline."""
    earlier = earlier if earlier is not None else earlier_results(options.out_dir, options.scale, device)
    own = own if own is not None else read_own_profiles(options.out_dir)
    costs = []
    for case in cases:
        estimator = Estimator(options, device, earlier, own)
        estimate = estimator.case(case)
        solos = tuple((job, estimator._solo(job)[0]) for job in estimate.solo_jobs)
        costs.append(CaseCost(case.id, max(0.0, estimate.seconds - estimate.solo_s), solos))
    return costs


def long_cases(estimates: Sequence[Estimate]) -> list[Estimate]:
    """Cases that will run far longer than the rest: over ``LONG_FACTOR`` times the median case and
    over ``LONG_MIN_S``."""
    if len(estimates) < 2:
        return []
    median = statistics.median(e.seconds for e in estimates)
    return [e for e in estimates if e.seconds > max(LONG_FACTOR * median, LONG_MIN_S)]
