"""``--gpu-pairs-time-limit``: a session that must end by a deadline (a batch allocation, a leased
machine) starts no case that its estimate says would end past it.

A replicate (a dependency group: a pair's solo and shared runs of one seed) is decided whole,
before its first case: one cut short is measured again whole on resume, so starting it spends the
time for nothing. A later, shorter unit may still fit where an earlier one did not, so every unit
is asked in turn. The cases left out are skipped with ``LEFT_OUT`` in their reason; the session
then ends with ``STOPPED_SHORT`` (pytest's "interrupted"), so a batch script and the study runner
see that work remains, and ``--gpu-pairs-resume`` measures it.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Optional

LEFT_OUT = "not started within --gpu-pairs-time-limit"
STOPPED_SHORT = 2  # pytest.ExitCode.INTERRUPTED: not every selected case ran
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)([smh]?)\s*")


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``25m``, ``1h30m`` or ``1.5h``; ValueError otherwise."""
    compact = text.strip().lower()
    parts = _DURATION.findall(compact)
    if not compact or _DURATION.sub("", compact):
        raise ValueError(f"expected a duration such as 1500, 25m or 1h30m, got {text!r}")
    if len(parts) > 1 and any(unit == "" for _, unit in parts):
        raise ValueError(f"expected a unit after each number of {text!r} (s, m or h)")
    seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"expected a duration above 0, got {text!r}")
    return seconds


def fits(elapsed_s: float, cost_s: float, limit_s: float) -> bool:
    return elapsed_s + cost_s <= limit_s


@dataclass(frozen=True)
class LeftOut:
    """A unit that does not start: its estimate, and how much of the limit had passed when it asked."""

    unit: str
    cost_s: float
    elapsed_s: float
    limit_s: float


@dataclass
class TimeLimit:
    """The session's deadline, counted from when the session began, and each unit's decision."""

    limit_s: float
    started: float = field(default_factory=time.monotonic)
    decided: dict[str, Optional[LeftOut]] = field(default_factory=dict)

    def left_out(self, unit: str, cost_s: Callable[[], float], now: Optional[float] = None) -> Optional[LeftOut]:
        """Whether ``unit`` is left out (None: it starts); decided once, when its first case asks,
        so its later cases follow its first."""
        if unit not in self.decided:
            elapsed = (time.monotonic() if now is None else now) - self.started
            cost = cost_s()
            self.decided[unit] = None if fits(elapsed, cost, self.limit_s) else LeftOut(unit, cost, elapsed, self.limit_s)
        return self.decided[unit]

    @property
    def units_left_out(self) -> list[str]:
        return [unit for unit, left in self.decided.items() if left is not None]


def played_out(units: Sequence[tuple[str, float]], limit_s: float, start_s: float = 0.0) -> list[str]:
    """The units a session would leave out, played out on the estimates alone: each starts where the
    time the units before it took (their estimates) and its own still fit the limit."""
    limit, now = TimeLimit(limit_s, started=0.0), start_s
    for unit, cost_s in units:
        if limit.left_out(unit, partial(float, cost_s), now=now) is None:
            now += cost_s
    return limit.units_left_out
