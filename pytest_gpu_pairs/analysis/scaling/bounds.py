"""Bounds on a step time at a GPU count beyond the measured ones: what the measurements allow
without choosing a model's shape.

- **Best case:** adding GPUs beyond the largest measured count ``M`` costs nothing more: the step
  takes what it took on ``M`` (its mean: at a fixed per-GPU batch a step does not get shorter).
- **Worst case:** the larger of two pessimisms, each from measurements alone:
  the cost of a GPU measured between the two largest counts goes on for every GPU added,
  ``t(M) + (T - M) (t(M) - t(P)) / (M - P)`` (the high ends of both intervals, never below
  ``t(M)``); and, where the host's all-reduce was timed (``workloads.allreduce_probe``), the step
  without its all-reduce (DDP's ``no_sync()`` steps on ``M``) plus a ring all-reduce of the
  gradients at the slowest bus bandwidth measured that backward hides none of,
  ``2 (T - 1) / T x bytes / bus bandwidth``.

Two measured counts leave a two-parameter model no degree of freedom, so ``gpu-pairs scale``
gives these bounds instead of a fitted prediction there; with more counts it gives both.
Energy per sample follows the step time at the largest count's power per GPU:
``E(T) = E(M) t(T) / t(M)`` (at a fixed per-GPU batch each GPU trains the same samples per step;
a GPU that waits longer draws less, so the worst case is an upper bound).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.analysis.scaling.measured import Case, Workload
from pytest_gpu_pairs.inputs import SettingsError, read_json


@dataclass(frozen=True)
class Bandwidth:
    """The host's all-reduce, as the probe timed it: the bytes it summed and the bus bandwidth per GPU count."""

    bytes: float
    bus_gb_s: dict[int, float]

    @property
    def slowest_gb_s(self) -> Optional[float]:
        return min(self.bus_gb_s.values()) if self.bus_gb_s else None

    def ring_s(self, gpus: int) -> Optional[float]:
        """A ring all-reduce's transfer time on ``gpus`` at the slowest bus bandwidth measured."""
        slowest = self.slowest_gb_s
        if slowest is None:
            return None
        return 0.0 if gpus < 2 else 2.0 * (gpus - 1) / gpus * self.bytes / (slowest * 1e9)


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def read_bandwidth(path: Path) -> Bandwidth:
    """``bandwidth.json`` as the scaling study's step writes it; one line naming the file, the
    JSON path and what was expected for anything else. A count the probe could not time is left out."""
    data = read_json(path)
    if not isinstance(data, dict) or not _positive(data.get("bytes")):
        raise SettingsError(path, "$.bytes", "expected the bytes the all-reduce probe summed, a number above 0")
    counts = data.get("counts")
    if not isinstance(counts, dict):
        raise SettingsError(path, "$.counts", "expected an object of GPU counts, each with the probe's result")
    found: dict[int, float] = {}
    for key, entry in counts.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) >= 2 and isinstance(entry, dict)):
            raise SettingsError(path, f"$.counts.{key}", "expected a GPU count of 2 or more holding the probe's result")
        if "failure" in entry:
            continue
        if not _positive(entry.get("busbw_gb_s")):
            raise SettingsError(path, f"$.counts.{key}.busbw_gb_s", "expected the bus bandwidth in GB/s, a number above 0")
        found[int(key)] = float(entry["busbw_gb_s"])
    return Bandwidth(float(data["bytes"]), found)


@dataclass(frozen=True)
class StepBounds:
    """Best and worst step time on ``gpus``, with what the worst rests on."""

    gpus: int
    best_s: float
    worst_s: float
    worst_basis: str
    allreduce_s: Optional[float] = None  # the ring all-reduce's transfer alone on ``gpus``, where timed

    def ratio_to(self, step_s: float) -> tuple[float, float]:
        """(best, worst) as a multiple of ``step_s``."""
        return self.best_s / step_s, self.worst_s / step_s


def _ends(case: Case) -> tuple[float, float]:
    ci = case.step.interval()
    return (ci[0], ci[1]) if ci is not None else (case.step.mean, case.step.mean)


def _largest(workload: Workload, count: int) -> Case:
    """The count's case with the longest step, where a count was measured more than once."""
    return max(workload.at(count), key=lambda c: c.step.mean)


def step_bounds(workload: Workload, gpus: int, bandwidth: Optional[Bandwidth] = None) -> Optional[StepBounds]:
    """Bounds on the step time on ``gpus`` GPUs, beyond the largest measured count; None at or
    below it (measured, or between measured counts) or with fewer than two counts."""
    counts = workload.counts
    if len(counts) < 2 or gpus <= counts[-1]:
        return None
    top, previous = _largest(workload, counts[-1]), _largest(workload, counts[-2])
    high = _ends(top)[1]
    slope = (high - _ends(previous)[0]) / (top.gpus - previous.gpus)
    per_gpu = max(high, high + (gpus - top.gpus) * slope)
    worst, basis = per_gpu, (f"the cost of a GPU between {previous.gpus} and {top.gpus} GPUs "
                             f"({max(0.0, slope) * 1e3:.3g} ms) for each GPU added")
    transfer = bandwidth.ring_s(gpus) if bandwidth is not None else None
    if (bandwidth is not None and transfer is not None and top.no_sync_step_s is not None
            and top.no_sync_step_s + transfer > worst):
        worst = top.no_sync_step_s + transfer
        basis = (f"the step without its all-reduce on {top.gpus} GPUs plus a ring all-reduce of "
                 f"{bandwidth.bytes / 1e6:.0f} MB at {bandwidth.slowest_gb_s:.0f} GB/s that backward does not hide")
    return StepBounds(gpus, top.step.mean, worst, basis, transfer)


def energy_bounds(workload: Workload, bounds: StepBounds) -> Optional[tuple[float, float]]:
    """(best, worst) energy per sample on ``bounds.gpus``, at the largest measured count's power per GPU."""
    top = _largest(workload, workload.counts[-1])
    if top.energy_per_sample_j is None:
        return None
    best, worst = bounds.ratio_to(top.step.mean)
    return top.energy_per_sample_j * best, top.energy_per_sample_j * worst
