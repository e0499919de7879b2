"""Cases onto GPUs or shards by estimated cost: longest-processing-time-first list scheduling.

One rule serves three callers: ``--gpu-pairs-shard K/N`` (N bins, one per machine), the xdist
hand-out (a free worker takes the longest case left, which is the same greedy rule played out in
time) and ``gpu-pairs plan --gpus`` (the predicted makespan on G GPUs).

**Solo baselines.** Every worker and every shard is a session of its own and measures each solo
baseline its cases need once, in its own solo cache. So a case's cost is its own rounds plus the
baselines its bin has not measured yet: the scheduler charges a baseline to the first case placed
in a bin that needs it, once per bin, and the same baseline is charged again in every other bin
whose cases need it (as it will be measured there again). Bins are chosen by their load before the
case, ties to the lowest bin; cases are taken by their cost with every baseline counted (their
cost in a fresh session), longest first, ties by case id, so the result depends on nothing but
the costs and ids.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CaseCost:
    """One case's estimated seconds without its solo baselines, and the baselines it needs, each
    with its own seconds (measured once per session)."""

    case_id: str
    rounds_s: float
    solos: tuple[tuple[Hashable, float], ...] = ()

    @property
    def fresh_s(self) -> float:
        """The case's cost in a session that has measured none of its baselines."""
        return self.rounds_s + sum(seconds for _, seconds in self.solos)


@dataclass
class Bin:
    """One GPU's or one shard's cases, in the order they were placed, and its load in seconds."""

    index: int
    case_ids: list[str] = field(default_factory=list)
    load_s: float = 0.0
    solos: set = field(default_factory=set)

    def charge(self, cost: CaseCost) -> float:
        """The case's seconds in this bin: its rounds and the baselines the bin has not measured."""
        return cost.rounds_s + sum(seconds for key, seconds in cost.solos if key not in self.solos)

    def place(self, cost: CaseCost) -> None:
        self.load_s += self.charge(cost)
        self.solos.update(key for key, _ in cost.solos)
        self.case_ids.append(cost.case_id)


def longest_first(costs: Sequence[CaseCost]) -> list[CaseCost]:
    return sorted(costs, key=lambda c: (-c.fresh_s, c.case_id))


def schedule(costs: Sequence[CaseCost], bins: int) -> list[Bin]:
    """Longest case first onto the least loaded bin (ties: the lowest bin)."""
    if bins < 1:
        raise ValueError(f"expected at least one bin, got {bins}")
    placed = [Bin(i) for i in range(bins)]
    for cost in longest_first(costs):
        min(placed, key=lambda b: (b.load_s, b.index)).place(cost)
    return placed


def shard_ids(costs: Sequence[CaseCost], index: int, count: int) -> list[str]:
    """The case ids of shard ``index`` (1-based) of ``count``, in the order of ``costs``."""
    if not 1 <= index <= count:
        raise ValueError(f"expected a shard from 1 to {count}, got {index}")
    mine = set(schedule(costs, count)[index - 1].case_ids)
    return [c.case_id for c in costs if c.case_id in mine]


@dataclass(frozen=True)
class Prediction:
    """What ``G`` GPUs would do with a selection: the makespan (the busiest GPU's load), the GPU
    time held (``G`` x makespan), the GPU time spent on cases, and the idle tail (GPUs done early
    waiting for the last one)."""

    gpus: int
    makespan_s: float
    busy_s: float
    loads_s: tuple[float, ...]
    bins: tuple[tuple[str, ...], ...]

    @property
    def held_s(self) -> float:
        return self.gpus * self.makespan_s

    @property
    def idle_s(self) -> float:
        return self.held_s - self.busy_s

    @property
    def gpu_hours(self) -> float:
        return self.held_s / 3600.0


def predict(costs: Sequence[CaseCost], gpus: int) -> Prediction:
    placed = schedule(costs, gpus)
    loads = tuple(b.load_s for b in placed)
    return Prediction(gpus, max(loads, default=0.0), sum(loads), loads, tuple(tuple(b.case_ids) for b in placed))


MAX_BINS = 10_000  # shards or GPUs: each is a bin the scheduler fills, and more than cases is nothing


def small_count(text: str) -> int | None:
    """``text`` as a whole number of plain digits up to ``MAX_BINS``, else None (never a huge int)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_BINS)):
        return None
    value = int(text)
    return value if value <= MAX_BINS else None


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N <= ``MAX_BINS``; ``ValueError`` naming what was expected."""
    parts = text.split("/")
    index, count = (small_count(parts[0]), small_count(parts[1])) if len(parts) == 2 else (None, None)
    if index is None or count is None:
        raise ValueError(f"expected K/N such as 2/4, with N at most {MAX_BINS}, got {text!r}")
    if not 1 <= index <= count:
        raise ValueError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return index, count
