"""The physical base model of a pair, from solo profiles alone.

Each job alternates between GPU work (a fraction ``busy`` of its solo time, NVML's utilisation) and
host work. Beside another job, a job's GPU work is stretched wherever the other job occupies the
GPU: its relative rate ``r`` satisfies ``1/r_a = 1 + w_ab * busy_a * r_b * busy_b`` (and the same with
a and b swapped), solved as a fixed point, where ``w_ab`` is the share of a collision with b that
costs a time:

- **time-slicing** runs one context at a time; how much of a collision costs time (``w``) is
  learnt from the card's measured pairs (``TimeSlicing``: a job's host work goes on while its kernels
  wait, so less than the whole overlap), else the whole overlap (``w = 1``);
- **MPS** runs both jobs' kernels at once, and a collision costs only what the kernels ask beyond
  the card. A kernel that needs a share ``s_a`` of the SMs (GPM SM utilisation while busy, else
  power above idle as a stand-in) beside one holding ``s_b`` finds ``1 - s_b`` free and runs in
  ``s_a / (1 - s_b)`` waves where alone it runs in one, so the cost runs one way: a light job's
  kernels wait behind a job that fills the card, far more than the other way round (resnet20 beside
  vulberta_cnn on an H200 ran at 0.58 of its pace, vulberta_cnn at 0.91). The share of that stretch
  that costs time is learnt from the card's MPS pairs (``Mps``), and may pass the whole overlap:
  MPS has no time slices, so a light job can lose more beside a card-filling one than time-slicing
  would cost it (dense_aspp + vulberta_cnn on an H200: 1.575 under MPS, 1.785 time-sliced). The
  memory bandwidth (GPM DRAM bandwidth, else NVML memory utilisation, per busy time) costs both what
  the two ask beyond it.

The GPU cannot be busier than always: where the jobs ask for more busy time than the card's
capacity (under time-slicing one or less, where measured pairs show that switching contexts takes
the rest; under MPS more than one, since two clients' kernels run at once, learnt likewise), the
capacity is shared max-min fairly: a job asking less than a fair share keeps its pace, the others
split what is left. Concurrency efficiency is ``r_a + r_b``, within ``[0, 2]`` by construction, and
symmetric in the pair.

Energy: the card draws idle power plus each job's dynamic power in proportion to its rate (capped at
the power limit); serially the same work costs each job's solo power for ``r`` of the time, so the
saving is what the shared idle power and any slowdown leave.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from pytest_gpu_pairs.experiment.vocabulary import SHARING_MODES
from pytest_gpu_pairs.planning.profiles import SoloProfile

ITERATIONS = 200
MIN_FREE_SMS = 0.05
MECHANISMS = SHARING_MODES


@dataclass(frozen=True)
class Card:
    """What the energy model needs of the card the profiles were measured on."""

    idle_w: Optional[float]
    limit_w: Optional[float]


@dataclass(frozen=True)
class TimeSlicing:
    """How two contexts share a card under time-slicing: the share of a collision's overlap that
    costs a job time, and the share of the card's time the jobs' kernels can fill together (the
    rest goes to switching contexts). The defaults are the physics before any pair is measured:
    every collision costs the whole overlap, and the card can be filled to the last moment;
    ``fit.timeslicing`` learns both from a card's measured pairs."""

    collision_weight: float = 1.0
    capacity: float = 1.0


UNMEASURED = TimeSlicing()


@dataclass(frozen=True)
class Mps:
    """How MPS clients share a card: the share of a kernel's stretch beside another's that costs its
    job time (``stretch``: a job's host work goes on while its kernels wait, and a kernel's blocks
    start as SMs free up rather than after the other's whole kernel), and how much busy time, each
    job's as it reads alone, the card gives the clients together (``capacity``: their kernels run at
    once, so it passes one; on the H200's 29 contended MPS pairs the busy time used summed to 1.15
    with a spread of 5 %, where weighting each job by its SM share, as the model did before, read 0.83
    with a spread of 12 %: GPM's SM share counts the SMs that hold a warp, not how much of them a
    kernel leaves to another). A job alone runs at its own pace, so the bound is never below the
    busiest job's own share. The defaults are the physics before any pair is measured (the whole
    stretch, a card filled once), and ``fit.mps`` learns both from a card's MPS pairs."""

    capacity: float = 1.0
    stretch: float = 1.0


MPS_UNMEASURED = Mps()


@dataclass(frozen=True)
class Base:
    rate_a: float
    rate_b: float
    collision_weight: float  # the larger of the two directions' (under MPS a job's kernels wait behind the other's)
    contention: float  # busy_a x busy_b: how often the two would want the GPU at the same time

    @property
    def efficiency(self) -> float:
        return self.rate_a + self.rate_b


def _clip(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return min(high, max(low, value))


def intensity(p: SoloProfile, card: Card) -> float:
    """Share of the card's SMs a job's kernels occupy while they run: GPM's SM utilisation per busy
    time where measured, else its power above idle per busy time as a share of the headroom."""
    if p.sm_share is not None:
        return p.sm_share
    if not p.busy or p.power_w is None or card.idle_w is None or not card.limit_w or card.limit_w <= card.idle_w:
        return 1.0 if p.busy else 0.0
    return _clip((p.power_w - card.idle_w) / (card.limit_w - card.idle_w) / p.busy, 0.05, 1.0)


def bandwidth(p: SoloProfile) -> Optional[float]:
    if p.dram_share is not None:
        return p.dram_share
    if p.mem_busy is None or not p.busy:
        return None
    return _clip(p.mem_busy / p.busy)


def _sm_stretch(waiting: SoloProfile, holding: SoloProfile, card: Card) -> float:
    """How much longer a kernel of ``waiting`` runs while one of ``holding`` holds its SMs: it finds
    ``1 - s_holding`` of them free and needs ``s_waiting``, so it runs in that many more waves (a
    card held whole is read as ``MIN_FREE_SMS`` free, not divided by nothing)."""
    free = max(MIN_FREE_SMS, 1.0 - intensity(holding, card))
    return max(0.0, intensity(waiting, card) / free - 1.0)


def _mps_sm_weight(waiting: SoloProfile, holding: SoloProfile, card: Card, mps: Mps) -> float:
    """The learnt share of the stretch, not bounded by the whole overlap: with no time slices a
    light job's kernels can wait longer behind a card-filling job's than time-slicing would make them
    (bounded, the H200's leave-one-workload-out MPS worst read 10.7 % where it reads 8.2 %)."""
    return mps.stretch * _sm_stretch(waiting, holding, card)


def collision_weight(a: SoloProfile, b: SoloProfile, mechanism: str, card: Card,
                     timeslicing: TimeSlicing = UNMEASURED, mps: Mps = MPS_UNMEASURED) -> float:
    """The share of a collision with ``b`` that costs ``a`` time: under time-slicing the same both
    ways, under MPS ``a``'s kernels' stretch beside ``b``'s, or the memory bandwidth both ask beyond
    the card, whichever is more."""
    if mechanism == "timeslice":
        return timeslicing.collision_weight
    bw_a, bw_b = bandwidth(a), bandwidth(b)
    memory = _clip(bw_a + bw_b - 1.0) if bw_a is not None and bw_b is not None else 0.0
    return max(_mps_sm_weight(a, b, card, mps), memory)


@lru_cache(maxsize=65536)
def _fixed_point(busy_a: float, busy_b: float, weight_ab: float, weight_ba: float) -> tuple[float, float]:
    """Kept once computed: validation refits the same pairs at every weight of the grid in every fold."""
    rate_a = rate_b = 1.0
    for _ in range(ITERATIONS):
        rate_a, rate_b = (1.0 / (1.0 + weight_ab * busy_a * rate_b * busy_b),
                          1.0 / (1.0 + weight_ba * busy_b * rate_a * busy_a))
    return rate_a, rate_b


def _bound(occupied: Sequence[float], mechanism: str, timeslicing: TimeSlicing, mps: Mps) -> float:
    """The card's capacity; under MPS never below what one of the jobs fills alone (alone, it runs
    at its pace), a learnt capacity there being free to fall below a card-filling job's share."""
    if mechanism == "timeslice":
        return timeslicing.capacity
    return max([mps.capacity, *occupied])


def fair_level(demands: Sequence[float], capacity: float) -> float:
    """The share every job may fill when the card is shared max-min fairly: a job asking less keeps
    all it asks, the others split what is left equally; infinite where everything fits."""
    if sum(demands) <= capacity:
        return math.inf
    left, ordered = capacity, sorted(demands)
    for index, demand in enumerate(ordered):
        level = left / (len(ordered) - index)
        if demand >= level:
            return level
        left -= demand
    return math.inf


def within_capacity(rates: Sequence[float], demands: Sequence[float], capacity: float) -> list[float]:
    """The rates once the shares of the card they ask for (``demands``) fit its capacity, shared
    max-min fairly: time-sliced, the scheduler gives each context with work ready its turn, and under
    MPS a light job's few blocks find SMs between the others', so a light job beside jobs that fill the
    card keeps its pace and only the jobs asking more than a fair share slow down (scaling every job
    alike predicted mnist_ff + mrt_oast + pcb on an H200 at 1.71; it measured 1.97, 0.84 above the pair)."""
    level = fair_level(demands, capacity)
    return [r * min(1.0, level / d) if d > 0 else r for r, d in zip(rates, demands)]


def unbounded_rates(busy_a: float, busy_b: float, collision_weight: float) -> tuple[float, float, float, float]:
    """Two jobs' rates under time-slicing before the card's capacity bounds them, and the busy time
    each would ask for: what ``fit.timeslicing`` reads once per collision weight."""
    rate_a, rate_b = _fixed_point(busy_a, busy_b, collision_weight, collision_weight)
    return rate_a, rate_b, rate_a * busy_a, rate_b * busy_b


def occupancy(p: SoloProfile) -> float:
    """The share of the card's time a job asks for: its busy time alone, under either mechanism
    (under MPS the capacity, not the demand, says how far two clients' kernels overlap)."""
    return float(p.busy or 0.0)


@dataclass(frozen=True)
class Unbounded:
    """A pair's rates before the card's capacity bounds them, with the shares of the card they ask
    for: the capacity is the one number of a mechanism that does not move them, so a fit that tries
    many capacities computes them once (``bounded`` applies each)."""

    rates: tuple[float, float]
    demands: tuple[float, float]
    occupied: tuple[float, float]
    collision_weight: float
    contention: float


@lru_cache(maxsize=65536)
def unbounded(a: SoloProfile, b: SoloProfile, mechanism: str, card: Card,
              timeslicing: TimeSlicing = UNMEASURED, mps: Mps = MPS_UNMEASURED) -> Optional[Unbounded]:
    """None where a profile lacks its busy fraction. Kept once computed (and ``bounded`` likewise):
    validation builds a planner for every held-out pair and workload, and each asks the same pairs
    again under every capacity of the grid."""
    if a.busy is None or b.busy is None:
        return None
    weight_ab = collision_weight(a, b, mechanism, card, timeslicing, mps)
    weight_ba = collision_weight(b, a, mechanism, card, timeslicing, mps)
    rate_a, rate_b = _fixed_point(a.busy, b.busy, weight_ab, weight_ba)
    occupied = (occupancy(a), occupancy(b))
    demands = (rate_a * occupied[0], rate_b * occupied[1])
    return Unbounded((rate_a, rate_b), demands, occupied, max(weight_ab, weight_ba), a.busy * b.busy)


@lru_cache(maxsize=262144)
def bounded(pair: Unbounded, mechanism: str, timeslicing: TimeSlicing = UNMEASURED,
            mps: Mps = MPS_UNMEASURED) -> Base:
    rate_a, rate_b = within_capacity(pair.rates, pair.demands, _bound(pair.occupied, mechanism, timeslicing, mps))
    return Base(rate_a, rate_b, pair.collision_weight, pair.contention)


def base(a: SoloProfile, b: SoloProfile, mechanism: str, card: Card,
         timeslicing: TimeSlicing = UNMEASURED, mps: Mps = MPS_UNMEASURED) -> Optional[Base]:
    """Both jobs' relative rates beside each other; None where a profile lacks its busy fraction."""
    pair = unbounded(a, b, mechanism, card, timeslicing, mps)
    return None if pair is None else bounded(pair, mechanism, timeslicing, mps)


def group_rates(profiles: Sequence[SoloProfile], mechanism: str, card: Card,
                timeslicing: TimeSlicing = UNMEASURED, mps: Mps = MPS_UNMEASURED) -> Optional[list[float]]:
    """Every job's relative rate in a group of any size: the pair's rule with the other jobs' occupancy
    summed (``1/r_i = 1 + busy_i x sum_j w_ij r_j busy_j``), then the card's capacity shared max-min
    fairly among what they ask; for two jobs, exactly ``base``. None where a profile lacks its busy
    fraction."""
    if any(p.busy is None for p in profiles):
        return None
    busy = [occupancy(p) for p in profiles]
    weights = [[collision_weight(a, b, mechanism, card, timeslicing, mps) for b in profiles] for a in profiles]
    rates = [1.0] * len(profiles)
    for _ in range(ITERATIONS):
        rates = [1.0 / (1.0 + busy[i] * sum(weights[i][j] * rates[j] * busy[j] for j in range(len(rates)) if j != i))
                 for i in range(len(rates))]
    demands = [r * b for r, b in zip(rates, busy)]
    return within_capacity(rates, demands, _bound(busy, mechanism, timeslicing, mps))


def _solo_power(p: SoloProfile, card: Card) -> Optional[float]:
    if not p.on_gpu:
        return card.idle_w
    return p.power_w


def energy_saved(a: SoloProfile, b: SoloProfile, rates: tuple[float, float], card: Card) -> Optional[float]:
    """``1 - pair energy / serial energy`` for the same work, from solo powers and the rates."""
    power_a, power_b = _solo_power(a, card), _solo_power(b, card)
    if power_a is None or power_b is None or card.idle_w is None:
        return None
    rate_a, rate_b = rates
    serial = rate_a * power_a + rate_b * power_b
    pair = card.idle_w + rate_a * max(0.0, power_a - card.idle_w) + rate_b * max(0.0, power_b - card.idle_w)
    if card.limit_w:
        pair = min(pair, card.limit_w)
    return 1.0 - pair / serial if serial > 0 else None
