"""What measured pairs teach the base model: time-slicing's two numbers for the card, the
correction learned from the residuals, and intervals calibrated on workloads it never saw.

Time-slicing's collision weight and capacity (``timeslicing``), and MPS's stretch and capacity
(``mps``), are chosen on a grid to fit the card's measured pairs: with them the base model alone
predicts pairs of workloads never measured at all.

The residual of a measured pair (measured minus base model) is modelled as a ridge regression on
``[1, contention, mps, mps x contention]`` plus one effect per workload, added for both workloads of
the pair (so the correction is symmetric in the pair, and a workload measured beside others carries
what was learned to its untried pairs, as matrix completion would). The ridge penalty pulls every
coefficient towards zero: with no measured pairs the correction is nothing and the base model
stands alone; with few, it moves little.

An interval is split conformal prediction over workloads: every measured pair is predicted by a
correction fitted without any pair of one of its workloads (once for each of them), its error is
divided by the figure's scale at that prediction, and the half-width of a new pair's interval is
that scale at its own prediction times the ``CONFIDENCE`` quantile of those ratios (rank
``ceil((n + 1) x CONFIDENCE)`` of ``n``). So the interval is calibrated on pairs whose workloads
the correction never saw, the harder case of the two a user meets, and narrow where the scale says
errors are small. The quantile is taken per mechanism; with too few ratios for the rank, no interval
is estimated and the physical range stands.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from pytest_gpu_pairs.planning import model
from pytest_gpu_pairs.planning.profiles import SoloProfile

MIN_PAIRS = 3
MIN_TIMESLICED_PAIRS = 5  # fewer measured pairs leave time-slicing's physics as it is before any
MIN_MPS_PAIRS = 5  # likewise MPS's
COLLISION_WEIGHTS = tuple(w / 10 for w in range(10, -1, -1))  # the whole overlap first: ties keep it
CAPACITIES = tuple(1.0 - c / 40 for c in range(9))  # 1.0 down to 0.8 of the card's time
MPS_CAPACITIES = tuple(1.5 - c / 40 for c in range(29))  # 1.5 down to 0.8 of busy time: two clients' kernels overlap
MPS_STRETCHES = COLLISION_WEIGHTS  # the whole stretch first: ties keep it
RIDGE_GLOBAL = 0.5
RIDGE_WORKLOAD = 2.0
CONFIDENCE = 0.90  # the stated interval: on held-out pairs it holds the measurement nine times in ten


@dataclass(frozen=True)
class Observation:
    """One measured pair: its two workloads, its features and its residual against the base model."""

    models: tuple[str, str]
    mps: bool
    contention: float
    residual: float
    base: float = 0.0  # the base model's value: the scale of an error is read at base + correction


def _globals(mps: bool, contention: float) -> list[float]:
    return [1.0, contention, 1.0 if mps else 0.0, contention if mps else 0.0]


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the matrix is symmetric positive definite)."""
    n = len(vector)
    rows = [row[:] + [vector[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(col + 1, n):
            factor = rows[r][col] / rows[col][col]
            for c in range(col, n + 1):
                rows[r][c] -= factor * rows[col][c]
    solution = [0.0] * n
    for r in range(n - 1, -1, -1):
        solution[r] = (rows[r][n] - sum(rows[r][c] * solution[c] for c in range(r + 1, n))) / rows[r][r]
    return solution


@dataclass(frozen=True)
class Correction:
    coefficients: tuple[float, ...]
    workloads: tuple[str, ...]

    def features(self, models: tuple[str, str], mps: bool, contention: float) -> list[float]:
        effects = [float(models.count(name)) for name in self.workloads]
        return _globals(mps, contention) + effects

    def __call__(self, models: tuple[str, str], mps: bool, contention: float) -> float:
        if not self.coefficients:
            return 0.0
        return sum(c * x for c, x in zip(self.coefficients, self.features(models, mps, contention)))


def fit(observations: Sequence[Observation]) -> Correction:
    """Ridge regression of the residuals; the empty correction without observations."""
    if not observations:
        return Correction((), ())
    workloads = tuple(sorted({m for o in observations for m in o.models}))
    empty = Correction((0.0,) * (4 + len(workloads)), workloads)
    rows = [empty.features(o.models, o.mps, o.contention) for o in observations]
    columns = list(zip(*rows))
    size = len(columns)
    penalty = [RIDGE_GLOBAL] * 4 + [RIDGE_WORKLOAD] * len(workloads)
    matrix = [[0.0] * size for _ in range(size)]
    for i in range(size):
        for j in range(i, size):
            matrix[i][j] = matrix[j][i] = sum(map(operator.mul, columns[i], columns[j]))
        matrix[i][i] += penalty[i]
    residuals = [o.residual for o in observations]
    vector = [sum(map(operator.mul, column, residuals)) for column in columns]
    return Correction(tuple(_solve(matrix, vector)), workloads)


def leave_one_out(observations: Sequence[Observation]) -> list[float]:
    """Each observation's residual left after a correction fitted without it."""
    errors = []
    for index, held_out in enumerate(observations):
        rest = [o for i, o in enumerate(observations) if i != index]
        errors.append(held_out.residual - fit(rest)(held_out.models, held_out.mps, held_out.contention))
    return errors


Folds = Callable[[str], Sequence[Observation]]


def leave_one_workload_out(observations: Sequence[Observation],
                           folds: Optional[Folds] = None) -> list[tuple[Observation, float]]:
    """(observation, its residual after a correction fitted without any pair of one of its
    workloads), once for each workload of the pair: the error on a workload never measured. Where
    the base model itself learns from measured pairs, ``folds(name)`` gives every observation as a
    planner that never measured ``name`` would see it."""
    found = []
    for name in sorted({m for o in observations for m in o.models}):
        fold = folds(name) if folds is not None else observations
        correction = fit([o for o in fold if name not in o.models])
        found += [(o, o.residual - correction(o.models, o.mps, o.contention)) for o in fold if name in o.models]
    return found


Scale = Callable[[float], float]


def unit_scale(value: float) -> float:
    return 1.0


def conformal_quantile(scores: Sequence[float], confidence: float = CONFIDENCE) -> Optional[float]:
    """The ``ceil((n + 1) x confidence)``-th smallest score; None when there are too few for that rank."""
    rank = math.ceil((len(scores) + 1) * confidence)
    if len(scores) < MIN_PAIRS or rank > len(scores):
        return None
    return sorted(scores)[rank - 1]


@dataclass(frozen=True)
class Learned:
    """A fitted correction with what its intervals need: per mechanism the quantile of the held-out
    errors over the scale, and the scale."""

    correction: Correction
    n: int
    quantiles: dict[bool, Optional[float]]  # mps -> quantile of |error| / scale
    scale: Scale = unit_scale
    scores: dict[bool, int] = field(default_factory=dict)  # mps -> how many held-out errors the quantile rests on

    def half_width(self, mps: bool, value: float) -> Optional[float]:
        quantile = self.quantiles.get(mps)
        return None if quantile is None else quantile * self.scale(value)


def learn(observations: Sequence[Observation], scale: Scale = unit_scale,
          bounds: tuple[float, float] = (-math.inf, math.inf), confidence: float = CONFIDENCE,
          folds: Optional[Folds] = None) -> Learned:
    """The correction from all observations, and intervals calibrated on held-out workloads."""
    low, high = bounds
    scores: dict[bool, list[float]] = {False: [], True: []}
    for o, error in leave_one_workload_out(observations, folds) if len(observations) >= 2 else []:
        predicted = min(high, max(low, o.base + o.residual - error))
        scores[o.mps].append(abs(error) / scale(predicted))
    quantiles = {mps: conformal_quantile(found, confidence) for mps, found in scores.items()}
    return Learned(fit(observations), len(observations), quantiles, scale, {m: len(f) for m, f in scores.items()})


def timeslicing(pairs: Sequence[tuple[float, float, float]]) -> model.TimeSlicing:
    """The collision weight and capacity under which the base model's efficiency errs least (mean
    relative error) on a card's measured time-sliced pairs, each given as (busy of one job, busy of
    the other, measured efficiency); the unmeasured physics with fewer than ``MIN_TIMESLICED_PAIRS``.
    Two numbers for the whole card, learnt where the ridge correction cannot reach: a pair of two
    workloads it has never seen has no workload effect, only this base."""
    if len(pairs) < MIN_TIMESLICED_PAIRS:
        return model.UNMEASURED
    best, best_error = model.UNMEASURED, math.inf
    for weight in COLLISION_WEIGHTS:
        rates = [(model.unbounded_rates(a, b, weight), measured) for a, b, measured in pairs]
        for capacity in CAPACITIES:
            error = sum(abs(sum(model.within_capacity((ra, rb), (da, db), capacity)) - measured) / measured
                        for (ra, rb, da, db), measured in rates) / len(rates)
            if error < best_error:
                best, best_error = model.TimeSlicing(weight, capacity), error
    return best


def mps(pairs: Sequence[tuple[SoloProfile, SoloProfile, float]], card: model.Card) -> model.Mps:
    """The stretch and capacity under which MPS's base model errs least (mean relative error) on a
    card's measured MPS pairs, each given as (one job's profile, the other's, measured efficiency); the
    unmeasured physics with fewer than ``MIN_MPS_PAIRS``. Two numbers for the whole card, learnt as
    time-slicing's are, where the ridge correction cannot reach."""
    if len(pairs) < MIN_MPS_PAIRS:
        return model.MPS_UNMEASURED
    best, best_error = model.MPS_UNMEASURED, math.inf
    for stretch in MPS_STRETCHES:
        asked = [(model.unbounded(a, b, "mps", card, mps=model.Mps(stretch=stretch)), measured)
                 for a, b, measured in pairs]
        for capacity in MPS_CAPACITIES:
            chosen = model.Mps(capacity, stretch)
            error = 0.0
            for pair, measured in asked:
                if pair is not None:
                    error += abs(model.bounded(pair, "mps", mps=chosen).efficiency - measured) / measured
            if error / len(pairs) < best_error:
                best, best_error = chosen, error / len(pairs)
    return best
