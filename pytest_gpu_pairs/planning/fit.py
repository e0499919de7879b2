"""The correction learned from measured pairs, and intervals from its leave-one-out residuals.

The residual of a measured pair (measured minus base model) is modelled as a ridge regression on
``[1, contention, mps, mps x contention]`` plus one effect per workload, added for both workloads of
the pair (so the correction is symmetric in the pair, and a workload measured beside others carries
what was learned to its untried pairs, as matrix completion would). The ridge penalty pulls every
coefficient towards zero: with no measured pairs the correction is nothing and the base model
stands alone; with few, it moves little.

An interval is ``t(0.975, n - 1) * s * sqrt(1 + 1/n)`` around the prediction, where ``s`` is the
root mean square of the leave-one-pair-out residuals of the ``n`` measured pairs: the spread of a
new pair's error, not of the fit's, widening as ``n`` shrinks. Below ``MIN_PAIRS`` no spread can be
estimated and the interval is the physical range.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from pytest_gpu_pairs.record.stats import t_quantile

MIN_PAIRS = 3
RIDGE_GLOBAL = 0.5
RIDGE_WORKLOAD = 2.0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Observation:
    """One measured pair: its two workloads, its features and its residual against the base model."""

    models: tuple[str, str]
    mps: bool
    contention: float
    residual: float


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
    size = len(rows[0])
    penalty = [RIDGE_GLOBAL] * 4 + [RIDGE_WORKLOAD] * len(workloads)
    matrix = [[sum(r[i] * r[j] for r in rows) + (penalty[i] if i == j else 0.0) for j in range(size)]
              for i in range(size)]
    vector = [sum(r[i] * o.residual for r, o in zip(rows, observations)) for i in range(size)]
    return Correction(tuple(_solve(matrix, vector)), workloads)


def leave_one_out(observations: Sequence[Observation]) -> list[float]:
    """Each observation's residual left after a correction fitted without it."""
    errors = []
    for index, held_out in enumerate(observations):
        rest = [o for i, o in enumerate(observations) if i != index]
        errors.append(held_out.residual - fit(rest)(held_out.models, held_out.mps, held_out.contention))
    return errors


def half_width(spread: Optional[float], n: int) -> Optional[float]:
    """Half the prediction interval of a new pair from ``n`` measured pairs with LOO spread
    ``spread``; None (no estimate: use the physical range) below ``MIN_PAIRS``."""
    if n < MIN_PAIRS or spread is None:
        return None
    return t_quantile(0.5 + CONFIDENCE / 2.0, n - 1) * spread * math.sqrt(1.0 + 1.0 / n)


@dataclass(frozen=True)
class Learned:
    """A fitted correction with what its intervals need."""

    correction: Correction
    n: int
    spread: Optional[float]

    @property
    def half_width(self) -> Optional[float]:
        return half_width(self.spread, self.n)


def learn(observations: Sequence[Observation]) -> Learned:
    errors = leave_one_out(observations) if len(observations) >= 2 else []
    spread = math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else None
    return Learned(fit(observations), len(observations), spread)
