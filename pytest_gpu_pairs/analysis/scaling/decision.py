"""The decision: move a data-parallel job from its current GPU count to N, or not, each criterion
shown with its value, its threshold and its verdict.

**Time.** The job's remaining work is a number of samples (its epochs), given as the optimiser
steps left at the current count C (or the hours left there): on N GPUs a step trains N/C times
as many samples, so C/N times as many steps remain, each ``t(N)/t(C)`` as long as now (the fitted
model's ratio, with its interval). With ``work="steps"`` the schedule is a fixed number of
optimiser steps instead, and only the step time changes. The job's own step time at C anchors
the absolute figures; without it the measured workload's step time stands in.

**Memory.** At a fixed per-GPU batch each GPU holds the same model, optimiser state and
activations at any count; only the all-reduce's buffers are new, and they appear at the first
peer. The memory per GPU on N is the job's at C, plus the measured change from one GPU to two
when C is one; without the job's own figure, the measured workload's at its largest count.

**Beyond the measured counts** (``analysis.scaling.bounds``) the time saved is judged on its
bounds: the worst case (each added GPU costing what the last measured ones did, or an all-reduce
backward does not hide) to the best (no cost beyond the largest count measured); the fitted model's
figure is shown beside them, and with two measured counts, which leave it no degree of freedom, it
is not used for a target beyond them at all. Energy per sample at the target is bounded the same way.

**Verdicts.** A criterion passes when its whole interval lies on the right side of its
threshold, fails when the whole interval lies on the wrong side, and is uncertain when the
interval straddles it; a figure not given is not evaluated. The recommendation is to switch when
every evaluated criterion passes, to stay when one fails, and uncertain otherwise. The defaults are
the predecessor's rules of thumb (memory under 85 %, utilisation under 80 %, fewer than 100
iterations done, a global batch below 4, the time saved above the restart cost), settable; a rule of thumb measured is
still a rule of thumb, and each one's value is shown so that a reader can judge it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from pytest_gpu_pairs.analysis.scaling.bounds import Bandwidth, StepBounds, energy_bounds, step_bounds
from pytest_gpu_pairs.analysis.scaling.measured import Workload
from pytest_gpu_pairs.analysis.scaling.model import Fit
from pytest_gpu_pairs.record.scaling import Estimate

PASS, FAIL, UNCERTAIN, NOT_GIVEN = "pass", "fail", "uncertain", "not given"
SWITCH, STAY, UNDECIDED = "switch", "stay", "uncertain"
LR_RULE = ("linear scaling rule (Goyal et al. 2017, SGD): multiply the learning rate by the global-batch ratio and "
           "ramp up to it over the first epochs; for adaptive optimisers (Adam, AdamW) the square-root rule "
           "(Hoffer et al. 2017; Malladi et al. 2022): multiply by its square root. Stated, not tuned: validate the "
           "first epochs' loss against the current run")


@dataclass(frozen=True)
class Thresholds:
    """The predecessor's rules of thumb, as defaults."""

    memory: float = 0.85
    utilization: float = 0.80
    max_iterations_done: int = 100
    max_global_batch: int = 4  # switch while the global batch is still small: below this


@dataclass(frozen=True)
class Job:
    """What is known of the job to move: where it runs now and how much work it has left."""

    current_gpus: int = 1
    remaining_steps: Optional[float] = None
    remaining_hours: Optional[float] = None
    step_time_s: Optional[float] = None
    restart_cost_min: float = 0.0
    iterations_done: Optional[int] = None
    memory_fraction: Optional[float] = None
    card_memory_mb: Optional[float] = None  # the job's card, for its headroom in MB
    utilization: Optional[float] = None
    learning_rate: Optional[float] = None
    work: str = "samples"  # or "steps": a schedule of a fixed number of optimiser steps


@dataclass(frozen=True)
class Criterion:
    name: str
    value: Optional[float]
    interval: Optional[list[float]]
    threshold: float
    below: bool  # passes when the value is below the threshold
    unit: str
    verdict: str
    why: str = ""


@dataclass
class Decision:
    """The answer for one target count, with every figure it rests on."""

    current_gpus: int
    target_gpus: int
    basis: str  # measured or predicted: what the target's step time rests on
    step_ratio: Optional[Estimate]  # the fitted model's; None beyond two measured counts
    time_current_h: Optional[Estimate]
    time_target_h: Optional[Estimate]
    saved_h: Optional[Estimate]
    memory_fraction: Optional[float]
    memory_basis: str
    headroom_mb: Optional[float]
    global_batch: tuple[Optional[int], Optional[int]]
    learning_rates: dict[str, float] = field(default_factory=dict)
    criteria: list[Criterion] = field(default_factory=list)
    recommendation: str = UNDECIDED
    reasons: list[str] = field(default_factory=list)
    bounds: Optional[Bounds] = None


@dataclass(frozen=True)
class Bounds:
    """The target's figures as bounds (best, worst), where it lies beyond the measured counts."""

    step_ratio: tuple[float, float]  # t(target) / t(current)
    saved_h: Optional[tuple[float, float]]
    energy_per_sample_j: Optional[tuple[float, float]]
    energy_ratio: Optional[tuple[float, float]]  # energy per sample on the target over that on the current count
    worst_basis: str
    allreduce_s: Optional[float]


def verdict(value: Optional[float], interval: Optional[list[float]], threshold: float, below: bool) -> str:
    """pass, fail or uncertain by where the value's interval lies against the threshold."""
    if value is None:
        return NOT_GIVEN
    low, high = interval if interval is not None else (value, value)
    good, bad = (high < threshold, low >= threshold) if below else (low > threshold, high <= threshold)
    return PASS if good else FAIL if bad else UNCERTAIN


def recommend(criteria: list[Criterion]) -> tuple[str, list[str]]:
    """switch when every evaluated criterion passes, stay when one fails, else uncertain."""
    failed = [c.name for c in criteria if c.verdict == FAIL]
    unsure = [c.name for c in criteria if c.verdict == UNCERTAIN]
    if failed:
        return STAY, [f"fails: {', '.join(failed)}"]
    if unsure:
        return UNDECIDED, [f"uncertain: {', '.join(unsure)}"]
    if not any(c.verdict == PASS for c in criteria):
        return UNDECIDED, ["no criterion could be evaluated"]
    return SWITCH, ["every evaluated criterion passes"]


def _scaled(estimate: Estimate, factor: float) -> Estimate:
    return Estimate(estimate.mean * factor, None if estimate.se is None else estimate.se * abs(factor), estimate.df)


def remaining_hours(fit: Fit, job: Job) -> Optional[Estimate]:
    """Time left at the current count: as given, or the steps left at the job's (else the fitted) step time."""
    if job.remaining_hours is not None:
        return Estimate(job.remaining_hours, None, 0.0)  # given: exact, no interval
    if job.remaining_steps is None:
        return None
    if job.step_time_s is not None:
        return Estimate(job.remaining_steps * job.step_time_s / 3600.0, None, 0.0)
    return _scaled(fit.step_time(job.current_gpus), job.remaining_steps / 3600.0)


def _hours_left_known(fit: Fit, job: Job) -> Optional[Estimate]:
    """Time left at the current count where the job says it (its hours, or its steps at its own
    step time): then only the ratio of step times is taken from the fit."""
    if job.remaining_hours is None and job.step_time_s is None:
        return None
    return remaining_hours(fit, job)


def target_hours(fit: Fit, job: Job, target: int) -> Optional[Estimate]:
    """Time to finish on ``target`` GPUs: the work left, in its unit, at the target's step time."""
    steps_factor = job.current_gpus / target if job.work == "samples" else 1.0
    left = _hours_left_known(fit, job)
    if left is not None:
        return _scaled(fit.ratio(target, job.current_gpus), left.mean * steps_factor)
    if job.remaining_steps is None:
        return None
    return _scaled(fit.step_time(target), job.remaining_steps * steps_factor / 3600.0)


def saved_hours(fit: Fit, job: Job, target: int) -> Optional[Estimate]:
    """Time left now minus time on ``target``, with the fitted model's error carried through once
    (both come from the same measured means)."""
    steps_factor = job.current_gpus / target if job.work == "samples" else 1.0
    left = _hours_left_known(fit, job)
    if left is not None:
        now = left.mean
        return fit.propagate(lambda means: now - now * steps_factor * fit.step_at(target, means)
                             / fit.step_at(job.current_gpus, means))
    if job.remaining_steps is None:
        return None
    steps_h = job.remaining_steps / 3600.0
    return fit.propagate(lambda means: steps_h * (fit.step_at(job.current_gpus, means)
                                                  - steps_factor * fit.step_at(target, means)))


def memory_on(workload: Workload, job: Job, target: int) -> tuple[Optional[float], str]:
    """The memory per GPU on ``target`` GPUs as a share of the card, and what it rests on."""
    change = _one_to_two_change(workload)
    if job.memory_fraction is not None:
        if job.current_gpus == 1 and target > 1 and change is not None:
            return job.memory_fraction + change, f"the job's {job.memory_fraction:.1%} plus the measured change from 1 to 2 GPUs ({change:+.1%})"
        return job.memory_fraction, (f"the job's {job.memory_fraction:.1%} on {job.current_gpus}: the same per GPU at a fixed "
                                     f"per-GPU batch" + (f" (measured 1 to 2 GPUs: {change:+.1%})" if change is not None else ""))
    measured = [c for c in workload.cases if c.memory_fraction is not None]
    if not measured:
        return None, "no memory was measured (a CPU run) and --memory-fraction was not given"
    exact = [c for c in measured if c.gpus == target]
    chosen = exact or [c for c in measured if c.gpus == max(x.gpus for x in measured)]
    fraction = max(c.memory_fraction for c in chosen if c.memory_fraction is not None)
    basis = "measured" if exact else f"measured on {chosen[0].gpus}: the same per GPU at a fixed per-GPU batch"
    return fraction, basis


def _one_to_two_change(workload: Workload) -> Optional[float]:
    one = [c.memory_fraction for c in workload.at(1) if c.memory_fraction is not None]
    two = [c.memory_fraction for c in workload.at(2) if c.memory_fraction is not None]
    return max(two) - max(one) if one and two else None


def headroom_mb(workload: Workload, job: Job, fraction: Optional[float]) -> Optional[float]:
    """What is left of one card at ``fraction``: on the job's card where its own figure was given
    (None without its size), else on the card the workload was measured on."""
    if fraction is None:
        return None
    if job.memory_fraction is not None:
        return None if job.card_memory_mb is None else (1.0 - fraction) * job.card_memory_mb
    cards = [c.card_memory_mb for c in workload.cases if c.card_memory_mb]
    return (1.0 - fraction) * max(cards) if cards else None


def utilization_now(workload: Workload, job: Job) -> tuple[Optional[float], str]:
    if job.utilization is not None:
        return job.utilization, "given"
    measured = [c.util_pct for c in workload.at(job.current_gpus) if c.util_pct is not None]
    if measured:
        return max(measured) / 100.0, "measured"
    return None, f"not measured on {job.current_gpus} GPU(s) and --utilization not given"


def learning_rates(job: Job, ratio: float) -> dict[str, float]:
    if job.learning_rate is None:
        return {}
    return {"linear": job.learning_rate * ratio, "square_root": job.learning_rate * math.sqrt(ratio)}


def bounds_for(workload: Workload, fit: Fit, job: Job, target: int, found: Optional[StepBounds]) -> Optional[Bounds]:
    """The target's step ratio, time saved and energy per sample as (best, worst) bounds."""
    if found is None:
        return None
    measured_now = workload.at(job.current_gpus)
    now_s = max(c.step.mean for c in measured_now) if measured_now else fit.step_time(job.current_gpus).mean
    ratios = found.ratio_to(now_s)
    factor = job.current_gpus / target if job.work == "samples" else 1.0
    left = _hours_left_known(fit, job)
    if left is None and job.remaining_steps is not None:
        left = Estimate(job.remaining_steps * now_s / 3600.0, None, 0.0)
    saved = (left.mean * (1 - factor * ratios[0]), left.mean * (1 - factor * ratios[1])) if left is not None else None
    energy = energy_bounds(workload, found)
    energy_now = [c.energy_per_sample_j for c in measured_now if c.energy_per_sample_j]
    energy_ratio = (energy[0] / max(energy_now), energy[1] / max(energy_now)) if energy and energy_now else None
    return Bounds(ratios, saved, energy, energy_ratio, found.worst_basis, found.allreduce_s)


def _time_criterion(saved: Optional[Estimate], bounds: Optional[Bounds], cost_h: float) -> Criterion:
    if bounds is not None and bounds.saved_h is not None:
        low, high = sorted(bounds.saved_h)
        return Criterion("time saved vs restart cost", saved.mean if saved else low, [low, high], cost_h,
                         False, "h", verdict(low, [low, high], cost_h, False),
                         "bounded: worst case to best case beyond the measured counts"
                         + ("" if saved else "; the value is the worst case"))
    saved_ci = saved.interval() if saved is not None else None
    return Criterion("time saved vs restart cost", saved.mean if saved else None, saved_ci, cost_h, False, "h",
                     verdict(saved.mean if saved else None, saved_ci, cost_h, False),
                     "predicted" if saved is not None else "--remaining-steps or --remaining-hours not given")


def criteria_for(workload: Workload, fit: Fit, job: Job, target: int, thresholds: Thresholds,
                 saved: Optional[Estimate], memory: Optional[float], memory_basis: str,
                 bounds: Optional[Bounds] = None) -> list[Criterion]:
    util, util_basis = utilization_now(workload, job)
    cost_h = job.restart_cost_min / 60.0
    batch = workload.per_gpu_batch * job.current_gpus if workload.per_gpu_batch else None
    return [
        Criterion(f"memory per GPU on {target}", memory, None, thresholds.memory, True, "fraction",
                  verdict(memory, None, thresholds.memory, True), memory_basis),
        Criterion(f"GPU utilisation on {job.current_gpus}", util, None, thresholds.utilization, True, "fraction",
                  verdict(util, None, thresholds.utilization, True), util_basis),
        Criterion("iterations done", job.iterations_done, None, thresholds.max_iterations_done, True, "iterations",
                  verdict(job.iterations_done, None, thresholds.max_iterations_done, True),
                  "given" if job.iterations_done is not None else "--iterations-done not given"),
        Criterion(f"global batch on {job.current_gpus}", batch, None, thresholds.max_global_batch, True, "samples",
                  verdict(batch, None, thresholds.max_global_batch, True),
                  "per-GPU batch x current GPUs" if batch is not None else "the per-GPU batch is not known"),
        _time_criterion(saved, bounds, cost_h),
    ]


def decide(workload: Workload, fit: Fit, job: Job, target: int, thresholds: Thresholds = Thresholds(),
           bandwidth: Optional[Bandwidth] = None) -> Decision:
    """The answer to: move the job from its current count to ``target`` GPUs?"""
    bounds = bounds_for(workload, fit, job, target, step_bounds(workload, target, bandwidth))
    fitted = bounds is None or fit.free > 0  # two counts leave the fit nothing to extrapolate with
    saved = saved_hours(fit, job, target) if fitted else None
    memory, memory_basis = memory_on(workload, job, target)
    batch = workload.per_gpu_batch
    criteria = criteria_for(workload, fit, job, target, thresholds, saved, memory, memory_basis, bounds)
    recommendation, reasons = recommend(criteria)
    return Decision(job.current_gpus, target, "measured" if workload.at(target) else "predicted",
                    fit.ratio(target, job.current_gpus) if fitted else None, remaining_hours(fit, job),
                    target_hours(fit, job, target) if fitted else None,
                    saved, memory, memory_basis, headroom_mb(workload, job, memory),
                    (batch * job.current_gpus if batch else None, batch * target if batch else None),
                    learning_rates(job, target / job.current_gpus), criteria, recommendation, reasons, bounds)
