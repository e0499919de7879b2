"""What else a data-parallel job could change instead of (or beside) its GPU count, from measured
scaling cases: a data-loading worker per GPU, validating less often, switching from a checkpoint
instead of now, and the energy its remaining work takes. Pure arithmetic over measured figures
and the job's own; every figure says what it rests on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pytest_gpu_pairs.analysis.scaling.measured import Case
from pytest_gpu_pairs.record.scaling import Estimate, ratio

KWH_J = 3.6e6


def loader_gain(without: Case, with_worker: Case) -> Estimate:
    """The share of a step a loader worker saves at the same GPU count: 1 - t(worker) / t(none),
    both step times' intervals carried through."""
    return ratio(with_worker.step, without.step).shifted(1.0, -1.0)


def validation_share(case: Case, val_fraction: float) -> Optional[float]:
    """The share of an epoch's training time that one validation pass adds, for a validation set
    of ``val_fraction`` of the training set: a validated sample's time over a trained one's."""
    if case.val_s_per_sample is None or not case.per_gpu_batch:
        return None
    return val_fraction * case.val_s_per_sample / (case.step.mean / case.per_gpu_batch)


@dataclass(frozen=True)
class Switch:
    """Moving from ``current`` to ``target`` GPUs at some point of the remaining run."""

    when: str
    wait_h: float  # hours trained on the current count before the switch
    lost_h: float  # work thrown away (iterations since the last checkpoint)
    saved_h: tuple[float, float]  # (worst, best) against staying, the restart cost and lost work taken off


def switch_savings(when: str, hours_left: float, wait_h: float, lost_h: float, restart_h: float, current: int,
                   target: int, step_ratio: tuple[float, float]) -> Switch:
    """Hours saved by switching after ``wait_h`` hours: the rest of the run on ``target`` GPUs takes
    current / target of its steps, each ``step_ratio`` (best, worst) as long."""
    rest = max(0.0, hours_left - wait_h)
    saved = [rest * (1.0 - current / target * r) - restart_h - lost_h for r in step_ratio]
    return Switch(when, wait_h, lost_h, (min(saved), max(saved)))


def energy_to_solution_kwh(samples: float, energy_per_sample_j: float) -> float:
    return samples * energy_per_sample_j / KWH_J
