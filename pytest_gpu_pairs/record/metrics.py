"""The metric definitions as pure functions, shared by the record, the checks and the reports.

Every function returns None when its inputs do not allow an honest figure; the caller records
why in the result's notes.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Optional

from pytest_gpu_pairs.monitor.counters import value_at


def fg_slowdown(concurrent_s: Optional[float], solo_s: Optional[float]) -> Optional[float]:
    if not concurrent_s or not solo_s or solo_s <= 0:
        return None
    return concurrent_s / solo_s


def bg_progress_ratio(steps_in_window: Optional[float], window_s: float,
                      solo_steps_per_s: Optional[float]) -> Optional[float]:
    """Background work done in the window, as a fraction of what it does alone in that time."""
    if steps_in_window is None or not solo_steps_per_s or window_s <= 0:
        return None
    return steps_in_window / window_s / solo_steps_per_s


def concurrency_efficiency(slowdown: Optional[float], progress_ratio: Optional[float]) -> Optional[float]:
    """Normalised system throughput: 2.0 means sharing is free, below 1.0 serial is faster."""
    if not slowdown or progress_ratio is None:
        return None
    return 1.0 / slowdown + progress_ratio


def group_efficiency(fg_slowdown: Optional[float], bg_progress_ratios: Sequence[Optional[float]]) -> Optional[float]:
    """A group's work per second in units of one job alone: the foreground's progress (1 / its
    slowdown) plus each background's; at most the number of jobs while each keeps at most its
    solo pace. For a pair it is ``concurrency_efficiency``."""
    if not fg_slowdown or not bg_progress_ratios or any(r is None for r in bg_progress_ratios):
        return None
    total = 1.0 / fg_slowdown
    for ratio in bg_progress_ratios:
        total += ratio  # type: ignore[operator]  # None refused above
    return total


def energy_above_idle(total_j: Optional[float], idle_w: Optional[float], window_s: float) -> Optional[float]:
    """Energy beyond what the idle card would have drawn in the window (may be slightly negative)."""
    if total_j is None or idle_w is None:
        return None
    return total_j - idle_w * window_s


def split_energy(total_j: Optional[float], fg_weight: float, bg_weight: float) -> tuple[Optional[float], Optional[float]]:
    """Split ``total_j`` in proportion to the weights; the two parts sum to the total exactly.

    The larger part is computed first and the smaller one as the difference: the larger part is
    at least half the total, so that subtraction is exact in floating point (Sterbenz), and the
    two add back to the total bit for bit.
    """
    if total_j is None:
        return None, None
    weight = fg_weight + bg_weight
    if weight <= 0 or not math.isfinite(weight):
        return None, None
    if fg_weight >= bg_weight:
        fg = total_j * (fg_weight / weight)
        return fg, total_j - fg
    bg = total_j * (bg_weight / weight)
    return total_j - bg, bg


def energy_per_step(energy_j: Optional[float], steps: Optional[float]) -> Optional[float]:
    if energy_j is None or steps is None or steps <= 0:
        return None
    return energy_j / steps


def progress_energy_split(total_j: Optional[float], fg_steps: Optional[float], fg_j_per_step: Optional[float],
                          bg_steps: Optional[float], bg_j_per_step: Optional[float]
                          ) -> tuple[Optional[float], Optional[float]]:
    """Split by what each job's progress would have cost alone, normalised to the measured total.

    Under MPS, NVML reports utilisation for the MPS server rather than its clients, so there is
    no per-process share to split by. Each job's weight is its steps in the window times its solo
    energy per step; the parts then sum to ``total_j`` exactly (``split_energy``). Without a
    usable weight for both jobs (missing, negative, or both zero) there is no split.
    """
    if total_j is None or fg_steps is None or fg_j_per_step is None or bg_steps is None or bg_j_per_step is None:
        return None, None
    if any(not math.isfinite(v) or v < 0 for v in (fg_steps, fg_j_per_step, bg_steps, bg_j_per_step)):
        return None, None
    return split_energy(total_j, fg_steps * fg_j_per_step, bg_steps * bg_j_per_step)


def serial_energy_j(fg_steps: Optional[float], fg_j_per_step: Optional[float], bg_steps: Optional[float],
                    bg_j_per_step: Optional[float]) -> Optional[float]:
    """Energy the same work would have taken run one job after the other, each alone on the card."""
    if fg_steps is None or fg_j_per_step is None or bg_steps is None or bg_j_per_step is None:
        return None
    if min(fg_steps, fg_j_per_step, bg_steps, bg_j_per_step) < 0:
        return None
    return fg_steps * fg_j_per_step + bg_steps * bg_j_per_step


def energy_saved_fraction(concurrent_j: Optional[float], serial_j: Optional[float]) -> Optional[float]:
    """1 - concurrent / serial: 0.25 means sharing used a quarter less energy than serial runs."""
    if concurrent_j is None or not serial_j or serial_j <= 0:
        return None
    return 1.0 - concurrent_j / serial_j

def interval_energies_above_idle(points: Sequence[tuple[float, float]], edges: Sequence[float],
                                 idle_w: float) -> list[float]:
    """Energy above idle (J) between consecutive ``edges``, from unwrapped counter points in mJ."""
    at = [value_at(points, t) for t in edges]
    return [(b - a) / 1000.0 - idle_w * (t1 - t0) for a, b, t0, t1 in zip(at, at[1:], edges, edges[1:])]


def sm_split_weights(intervals: Iterable[tuple[float, float, float]]) -> tuple[float, float]:
    """fg and bg weights from (energy above idle, fg SM %, bg SM %) per interval.

    Each interval's energy goes to the jobs in proportion to their SM utilisation in it (the
    shares are normalised per interval), so a stretch where only one job computes is that job's
    alone. Energy below idle (noise) weighs nothing; if no interval has any energy above idle,
    the normalised shares count equally.
    """
    intervals = [(e, fg, bg) for e, fg, bg in intervals if fg + bg > 0]
    fg_w = sum(max(e, 0.0) * fg / (fg + bg) for e, fg, bg in intervals)
    bg_w = sum(max(e, 0.0) * bg / (fg + bg) for e, fg, bg in intervals)
    if fg_w + bg_w > 0:
        return fg_w, bg_w
    return (sum(fg / (fg + bg) for _, fg, bg in intervals), sum(bg / (fg + bg) for _, fg, bg in intervals))


def coverage(intervals: Iterable[tuple[float, float]], start: float, end: float) -> Optional[float]:
    """Share of [start, end] covered by the union of ``intervals``."""
    if end <= start:
        return None
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    covered, cursor = 0.0, start
    for a, b in clipped:
        a = max(a, cursor)
        if b > a:
            covered += b - a
            cursor = b
    return covered / (end - start)


def peak(values: Iterable[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def efficiency_bound(fg_busy: Optional[float], bg_busy: Optional[float]) -> Optional[float]:
    """The most work per second, in units of one job alone, that the card's time lets a pair do.

    A job that keeps the card busy a fraction u of the time alone needs u of it to keep its solo
    pace, so two whose fractions add up to at most 1 can both keep theirs; beyond that the card
    is the limit, and it yields the most when the less demanding job keeps its pace and the
    other gets the rest. A faster host raises a host-bound job's u, which is how it can lower
    the pair's efficiency.
    """
    if fg_busy is None or bg_busy is None:
        return None
    low, high = sorted(min(1.0, max(0.0, u)) for u in (fg_busy, bg_busy))
    if low + high <= 1.0:
        return 2.0
    return 1.0 + (1.0 - low) / high


def group_efficiency_bound(busy: Sequence[Optional[float]]) -> Optional[float]:
    """``efficiency_bound`` for any number of jobs: the card's time goes first to the jobs that need
    least of it (each keeps its solo pace while the time lasts), and the rest to the next one; the
    number of jobs where their fractions add up to at most 1. A pair's is ``efficiency_bound``'s."""
    if len(busy) == 2:
        return efficiency_bound(busy[0], busy[1])
    if not busy or any(u is None for u in busy):
        return None
    left, total = 1.0, 0.0
    for u in sorted(min(1.0, max(0.0, u)) for u in busy if u is not None):
        if u <= left:
            left, total = left - u, total + 1.0
        else:
            return total + left / u
    return total


def serial_energy_group(steps: Sequence[Optional[float]], j_per_step: Sequence[Optional[float]]) -> Optional[float]:
    """``serial_energy_j`` for any number of jobs: each job's steps at its own solo energy per step."""
    if len(steps) == 2 and len(j_per_step) == 2:
        return serial_energy_j(steps[0], j_per_step[0], steps[1], j_per_step[1])
    total = 0.0
    for count, each in zip(steps, j_per_step):
        if count is None or each is None or count < 0 or each < 0:
            return None
        total += count * each
    return total if steps else None


def measured_mean(values: Iterable[Optional[float]]) -> Optional[float]:
    """The mean of the values that were measured; None if none was (a bracket with one side
    missing falls back to the side it has)."""
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def mean_and_std(values: Sequence[Optional[float]]) -> tuple[Optional[float], Optional[float]]:
    """Mean and sample standard deviation of the measured values (None entries left out)."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return None, None
    return statistics.fmean(present), statistics.stdev(present) if len(present) > 1 else 0.0


def relative_change(value: Optional[float], reference: Optional[float], *,
                    infinite_from_zero: bool = False) -> Optional[float]:
    """(value - reference) / |reference|: 0.1 is 10 % more than the reference. From a zero
    reference there is no relative change: None for a record's key, or, for a comparison that must
    judge it (``infinite_from_zero``), 0 to 0 and an infinite change, signed, to anything else."""
    if value is None or reference is None:
        return None
    if reference == 0:
        return (0.0 if value == 0 else math.copysign(math.inf, value)) if infinite_from_zero else None
    return (value - reference) / abs(reference)


def per_unit(amount: Optional[float], units: Optional[float]) -> Optional[float]:
    if amount is None or units is None or units <= 0:
        return None
    return amount / units


def energy_saved_j(concurrent_j: Optional[float], serial_j: Optional[float]) -> Optional[float]:
    """Positive: sharing the card cost less energy than the same work run one job after the other."""
    if concurrent_j is None or serial_j is None:
        return None
    return serial_j - concurrent_j
