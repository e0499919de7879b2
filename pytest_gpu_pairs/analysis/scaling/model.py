"""The scaling model: a data-parallel step's time as a function of the GPU count, fitted to the
measured counts, and what follows from it, with intervals.

At a fixed per-GPU batch a step on N GPUs computes what a step on one GPU computes and adds the
gradient all-reduce that backward did not hide:

    t(N) = t1 + c * g(N),   g(1) = 0, g(2) = 1, so c is what a second GPU adds to a step

with ``g`` one of (``MODELS``):

- ``ring``: ``2 (N - 1) / N``, the share of the gradients each GPU sends and receives in a ring
  all-reduce (NCCL's on one host); bandwidth-bound, levelling off at twice the two-GPU cost;
- ``log2``: ``log2 N``, a tree all-reduce or a latency-bound one, growing with every doubling;
- ``linear``: ``N - 1``, a cost per peer; the pessimistic bound.

Throughput is ``N b / t(N)`` and the scaling efficiency against one GPU ``t1 / t(N)``.

**Fit.** Weighted least squares on the measured counts' mean step times, each weighted by one
over its squared standard error, with ``c`` held at 0 or more: a GPU that made the step shorter
is noise, not a negative all-reduce, so where the free fit gives ``c < 0`` the model is the
weighted mean step time with ``c = 0`` (``Fit.bounded``). With exactly the counts 1 and 2 it passes
through both: ``t1`` is the one-GPU time and ``c = t2 - t1``, a fit without a degree of freedom
left, which ``gpu-pairs scale`` does not extrapolate (``analysis.scaling.bounds`` gives bounds
instead). A prediction is then a function of the measured
means, and its interval is the measured means' intervals carried through it by the delta method
(first-order, the gradient taken by central differences), with Welch-Satterthwaite degrees of
freedom; with more counts than the two parameters, the errors are scaled up by the fit's reduced
chi-square where it exceeds one. The interval holds the measurement noise only: the form of
``g`` is an assumption that two points cannot test, so every prediction also carries the other
models' values as its model spread.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from pytest_gpu_pairs.record.scaling import Estimate, satterthwaite

MODELS: dict[str, Callable[[float], float]] = {
    "ring": lambda n: 2.0 * (n - 1.0) / n,
    "log2": lambda n: math.log2(n),
    "linear": lambda n: n - 1.0,
}
MODEL_TEXT = {
    "ring": "t(N) = t1 + c * 2(N-1)/N (ring all-reduce, bandwidth-bound)",
    "log2": "t(N) = t1 + c * log2 N (tree or latency-bound all-reduce)",
    "linear": "t(N) = t1 + c * (N-1) (a cost per peer, the pessimistic bound)",
}
DEFAULT_MODEL = "ring"
RELATIVE_STEP = 1e-4  # central differences: this share of each mean's standard error (or of the mean)


class FitError(ValueError):
    """The measured counts cannot carry the model (one count, or none); the message says what is missing."""


@dataclass(frozen=True)
class Point:
    """One measured GPU count: its mean step time with the error of that mean."""

    gpus: int
    step: Estimate


def _errors(points: Sequence[Point]) -> Optional[list[float]]:
    """Each mean's standard error; None where any mean has none (no interval) or a zero one."""
    errors = [p.step.se for p in points]
    known = [e for e in errors if e]
    return known if len(known) == len(errors) else None


def _weights(points: Sequence[Point]) -> list[float]:
    """One over each mean's variance; equal weights where any mean has no error (no interval)."""
    errors = _errors(points)
    return [1.0 / e**2 for e in errors] if errors is not None else [1.0] * len(points)


def least_squares(gpus: Sequence[int], means: Sequence[float], weights: Sequence[float],
                  growth: Callable[[float], float]) -> tuple[float, float]:
    """(t1, c) minimising the weighted squared misfit of ``t1 + c g(N)`` to the means (centred on
    the weighted mean, which keeps widely different weights from cancelling digits)."""
    xs = [growth(n) for n in gpus]
    total = math.fsum(weights)
    x_mean = math.fsum(w * x for w, x in zip(weights, xs)) / total
    y_mean = math.fsum(w * y for w, y in zip(weights, means)) / total
    spread = math.fsum(w * (x - x_mean) ** 2 for w, x in zip(weights, xs))
    c = math.fsum(w * (x - x_mean) * (y - y_mean) for w, x, y in zip(weights, xs, means)) / spread
    if c < 0:
        return y_mean, 0.0
    return y_mean - c * x_mean, c


@dataclass(frozen=True)
class Fit:
    """The model fitted to measured points; every figure it gives comes with its interval."""

    model: str
    points: tuple[Point, ...]

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise FitError(f"expected a scaling model of {', '.join(MODELS)}, got {self.model!r}")
        if len({p.gpus for p in self.points}) < 2:
            counts = sorted({p.gpus for p in self.points})
            raise FitError(f"expected step times at two GPU counts or more to fit {self.model}, got {counts or 'none'}")

    @property
    def growth(self) -> Callable[[float], float]:
        return MODELS[self.model]

    def _parameters(self, means: Sequence[float]) -> tuple[float, float]:
        return least_squares([p.gpus for p in self.points], means, _weights(self.points), self.growth)

    @property
    def parameters(self) -> tuple[float, float]:
        """(t1, c): the one-GPU step time and what a second GPU adds, as fitted."""
        return self._parameters([p.step.mean for p in self.points])

    @property
    def bounded(self) -> bool:
        """Whether ``c`` was held at 0: the free fit's step time fell with the GPU count."""
        return self.parameters[1] == 0.0

    @property
    def free(self) -> int:
        """Degrees of freedom the fit leaves: counts beyond the two parameters."""
        return len({p.gpus for p in self.points}) - 2

    def step_at(self, gpus: float, means: Sequence[float]) -> float:
        """The step time on ``gpus`` of the model fitted to ``means`` (one per point, in order)."""
        t1, c = self._parameters(means)
        return t1 + c * self.growth(gpus)

    @property
    def inflation(self) -> float:
        """sqrt(reduced chi-square) where the points scatter more than their errors say, else 1."""
        free, errors = len(self.points) - 2, _errors(self.points)
        if free <= 0 or errors is None:
            return 1.0
        chi2 = math.fsum(((p.step.mean - self.step_time(p.gpus, inflate=False).mean) / se) ** 2
                         for p, se in zip(self.points, errors))
        return math.sqrt(max(1.0, chi2 / free))

    def propagate(self, figure: Callable[[Sequence[float]], float], inflate: bool = True) -> Estimate:
        """``figure`` of the measured means, with the means' errors carried through it (delta method)."""
        means = [p.step.mean for p in self.points]
        value = figure(means)
        errors = [p.step.se for p in self.points]
        known = [e for e in errors if e is not None]
        if len(known) < len(errors):
            return Estimate(value, None, 0.0)
        parts = []
        for i, (point, se) in enumerate(zip(self.points, known)):
            h = RELATIVE_STEP * (se or abs(point.step.mean) or 1.0)
            up, down = list(means), list(means)
            up[i] += h
            down[i] -= h
            gradient = (figure(up) - figure(down)) / (2.0 * h)
            parts.append(((gradient * se) ** 2, point.step.df))
        variance = math.fsum(v for v, _ in parts)
        scale = self.inflation if inflate else 1.0
        return Estimate(value, math.sqrt(variance) * scale, satterthwaite(parts))

    def step_time(self, gpus: float, inflate: bool = True) -> Estimate:
        return self.propagate(lambda means: self.step_at(gpus, means), inflate)

    def ratio(self, gpus: float, reference: float) -> Estimate:
        """t(gpus) / t(reference): how much longer a step gets, the measured errors carried through."""
        return self.propagate(lambda means: self.step_at(gpus, means) / self.step_at(reference, means))

    def efficiency(self, gpus: float) -> Estimate:
        """t(1) / t(gpus): throughput per GPU against one GPU's, at a fixed per-GPU batch."""
        return self.ratio(1, gpus)

    def alternatives(self, gpus: float) -> dict[str, float]:
        """The other models' step times at ``gpus``, fitted to the same points: the model spread."""
        return {name: Fit(name, self.points).step_time(gpus).mean for name in MODELS if name != self.model}

