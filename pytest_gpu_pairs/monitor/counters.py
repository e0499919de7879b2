"""Energy from cumulative counters (NVML's millijoules, RAPL's microjoules): unwrapped and interpolated."""
from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Optional


def value_at(points: Sequence[tuple[float, float]], t: float) -> float:
    """Linear interpolation in time-ordered (t, value) points, clamped at the ends."""
    i = bisect.bisect_left(points, t, key=lambda p: p[0])
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (t0, v0), (t1, v1) = points[i - 1], points[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1


def unwrap_counter(readings: Iterable[tuple[float, Optional[float]]],
                   wrap: Optional[float] = None) -> list[tuple[float, float]]:
    """Time-ordered (t, cumulative value) of a counter that may wrap or reset.

    A reading lower than the previous one is a wrap (when ``wrap`` is known) or a counter reset;
    a reset contributes nothing rather than a negative or invented amount.
    """
    points = sorted((t, float(v)) for t, v in readings if v is not None)
    if not points:
        return []
    unwrapped, offset = [points[0]], 0.0
    for (_, previous), (t, value) in zip(points, points[1:]):
        if value < previous:
            offset += wrap if wrap else previous - value
        unwrapped.append((t, value + offset))
    return unwrapped


class EnergyCounter:
    """A cumulative energy counter in mJ, unwrapped once so that many windows read it cheaply
    (an interleaved case asks for hundreds of phases after every round)."""

    def __init__(self, readings: Iterable[tuple[float, Optional[float]]], wrap_mj: Optional[float] = None):
        self.points = unwrap_counter(readings, wrap_mj)

    def joules(self, start: float, end: float) -> Optional[float]:
        """Energy over [start, end], its ends interpolated between the readings around them; a
        window the readings do not cover is None."""
        points = self.points
        if len(points) < 2 or end <= start or points[0][0] > start or points[-1][0] < end:
            return None
        return (value_at(points, end) - value_at(points, start)) / 1000.0


def counter_energy_j(readings: Iterable[tuple[float, Optional[float]]], start: float, end: float,
                     wrap_mj: Optional[float] = None) -> Optional[float]:
    """Energy in joules over [start, end] from a cumulative counter in mJ read at times t."""
    return EnergyCounter(readings, wrap_mj).joules(start, end)
