"""Scaling cases in: the records of any results folders (or benchmark JSON, or result.json files),
read through ``record.store`` and grouped by workload. Records are untrusted: a figure the model
needs that is missing, of the wrong kind or inconsistent (an interval that does not hold its
mean) is one line naming the file, the JSON path and what was expected. Failed, incomplete and
other designs' records are left out and counted.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.scaling import Estimate, estimate_from_interval
from pytest_gpu_pairs.record.store import StoreError, load_run


@dataclass(frozen=True)
class Case:
    """One measured GPU count of one workload, as its record gives it."""

    gpus: int
    step: Estimate
    source: str
    per_gpu_batch: Optional[int] = None
    comm_share: Optional[float] = None
    comm_share_ci: Optional[list[float]] = None
    memory_fraction: Optional[float] = None
    card_memory_mb: Optional[float] = None
    headroom_mb: Optional[float] = None
    util_pct: Optional[float] = None
    energy_per_sample_j: Optional[float] = None
    device: Optional[str] = None
    no_sync_step_s: Optional[float] = None
    data_share: Optional[float] = None
    val_s_per_sample: Optional[float] = None


@dataclass
class Workload:
    """The scaling cases of one workload (its group, model and hyperparameters) across the inputs."""

    group: str
    model: str
    hparams: dict[str, Any]
    cases: list[Case] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.group}-{self.model}"

    @property
    def counts(self) -> list[int]:
        return sorted({c.gpus for c in self.cases})

    @property
    def per_gpu_batch(self) -> Optional[int]:
        return next((c.per_gpu_batch for c in self.cases if c.per_gpu_batch), None)

    def at(self, gpus: int) -> list[Case]:
        return [c for c in self.cases if c.gpus == gpus]

    @property
    def devices(self) -> list[str]:
        return sorted({c.device for c in self.cases if c.device})


@dataclass
class Scaling:
    workloads: dict[str, Workload] = field(default_factory=dict)
    skipped: int = 0  # failed or incomplete scaling records


def _number(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _problem(source: str, key: str, expected: str, value: Any) -> StoreError:
    return StoreError(f"{source}: $.{key}: expected {expected}, got {value!r}")


def _step(record: dict[str, Any], source: str) -> Estimate:
    mean = _number(record.get("step_time_s"))
    if mean is None or mean <= 0:
        raise _problem(source, "step_time_s", "a step time in seconds above 0", record.get("step_time_s"))
    ci = record.get("step_time_ci")
    if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(_number(v) is not None for v in ci)
                               and ci[0] <= mean <= ci[1]):
        raise _problem(source, "step_time_ci", "[low, high] holding step_time_s, or null", ci)
    blocks = record.get("step_time_blocks")
    if ci is not None and not (isinstance(blocks, int) and not isinstance(blocks, bool) and blocks >= 2):
        raise _problem(source, "step_time_blocks", "the number of batch means behind step_time_ci (2 or more)", blocks)
    return estimate_from_interval(mean, ci, blocks)


def _gpus(record: dict[str, Any], source: str) -> int:
    gpus = record.get("gpus")
    if not (isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1):
        raise _problem(source, "gpus", "the case's GPU count, a whole number of 1 or more", gpus)
    return gpus


def _fraction(value: Any) -> Optional[float]:
    number = _number(value)
    return number if number is not None and number >= 0 else None


def read_case(record: dict[str, Any], source: str) -> Case:
    """One scaling record's figures; ``StoreError`` in one line for the first one unusable."""
    batch = record.get("per_gpu_batch")
    comm_ci = record.get("comm_share_ci")
    return Case(_gpus(record, source), _step(record, source), source,
                per_gpu_batch=batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else None,
                comm_share=_number(record.get("comm_share")),
                comm_share_ci=comm_ci if isinstance(comm_ci, list) and len(comm_ci) == 2
                and all(_number(v) is not None for v in comm_ci) else None,
                memory_fraction=_fraction(record.get("peak_memory_fraction")),
                card_memory_mb=_fraction(record.get("card_memory_mb")), headroom_mb=_number(record.get("memory_headroom_mb")),
                util_pct=_fraction(record.get("gpu_util_avg_pct")),
                energy_per_sample_j=_fraction(record.get("energy_per_sample_j")),
                device=record.get("device") if isinstance(record.get("device"), str) else None,
                no_sync_step_s=_fraction(record.get("no_sync_step_time_s")), data_share=_fraction(record.get("data_share")),
                val_s_per_sample=_fraction(record.get("val_s_per_sample")))


def _usable(record: dict[str, Any]) -> Optional[bool]:
    """True for a complete scaling record that ran, False for a failed or cut one, None for another design's."""
    if record.get("design") != "scaling":
        return None
    return record.get("complete") is not False and not record.get("failure") and not record.get("oom")


def _source(run_source: str, case_id: str) -> str:
    path = Path(run_source)
    return str(path / case_id / "result.json") if path.is_dir() else run_source


def read_scaling(paths: Sequence[str | Path]) -> Scaling:
    """Every usable scaling record of ``paths``, grouped by workload; ``StoreError`` for the first
    unreadable file or unusable record."""
    found = Scaling()
    for path in paths:
        run = load_run(path)
        for case_id, typed in sorted(run.records.items()):
            record = typed.to_dict()
            usable = _usable(record)
            if usable is None:
                continue
            if not usable:
                found.skipped += 1
                continue
            source = _source(run.source, case_id)
            group, model = str(record.get("case_id", case_id)).rsplit("-gpus", 1)[0], record.get("fg_model")
            given = record.get("fg_hparams")
            hparams = given if isinstance(given, dict) else {}
            key = json.dumps([group, model, hparams], sort_keys=True, default=str)
            workload = found.workloads.setdefault(key, Workload(_group(group, model), str(model), hparams))
            workload.cases.append(read_case(record, source))
    return found


def _group(case_stem: str, model: Any) -> str:
    """The group of ``<group>-<model>``, the case id without its count."""
    suffix = f"-{model}"
    return case_stem[:-len(suffix)] if isinstance(model, str) and case_stem.endswith(suffix) else case_stem
