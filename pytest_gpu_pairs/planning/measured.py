"""Measured pairs in: every concurrent case of any number of results folders (or benchmark JSON
files), through ``record.store``, the only reader of records. A pair's figures are the mean over
the records of the same two workloads and mechanism; fit evidence comes from the records made on an
emulated card (``gpu_memory_mb``). A bad record is one line naming the file and the JSON path.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.store import load_run


def pair_key(a: str, b: str) -> tuple[str, str]:
    """The order-free name of a pair: efficiency, energy and fit do not depend on which job is the foreground."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class MeasuredPair:
    """One pair under one mechanism, as measured: means over its records."""

    models: tuple[str, str]
    sharing: str
    efficiency: Optional[float]
    efficiency_ci: Optional[tuple[float, float]]
    energy_saved: Optional[float]
    peak_vram_mb: Optional[float]
    records: int
    sources: tuple[str, ...]


@dataclass(frozen=True)
class FitEvidence:
    """What emulated cards said about a pair: the smallest size it ran on, the largest it ran out of memory on."""

    ran_mb: Optional[float] = None
    oom_mb: Optional[float] = None

    def says(self, card_mb: float) -> Optional[bool]:
        if self.ran_mb is not None and card_mb >= self.ran_mb:
            return True
        if self.oom_mb is not None and card_mb <= self.oom_mb:
            return False
        return None


@dataclass
class Measured:
    pairs: dict[tuple[tuple[str, str], str], MeasuredPair] = field(default_factory=dict)
    fit: dict[tuple[str, str], FitEvidence] = field(default_factory=dict)
    skipped: int = 0  # concurrent GPU records of another measuring method

    def of(self, models: tuple[str, str], sharing: str) -> Optional[MeasuredPair]:
        return self.pairs.get((pair_key(*models), sharing))

    def count(self, sharing: str) -> int:
        return sum(1 for (_, s), p in self.pairs.items() if s == sharing and p.efficiency is not None)


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _concurrent(record) -> bool:
    return record.get("mode") == "concurrent" and bool(record.get("bg_model")) and record.get("complete") is not False


def _on_gpu(record) -> bool:
    return record.get("device") not in (None, "cpu")


def _mean(values: Iterable[Optional[float]]) -> Optional[float]:
    found = [v for v in values if v is not None]
    return statistics.fmean(found) if found else None


def _ci(records: Sequence) -> Optional[tuple[float, float]]:
    intervals = [r.get("concurrency_efficiency_ci") for r in records]
    intervals = [tuple(i) for i in intervals if isinstance(i, list) and None not in i]
    if not intervals:
        return None
    return statistics.fmean(i[0] for i in intervals), statistics.fmean(i[1] for i in intervals)


def _pair(models: tuple[str, str], sharing: str, found: list[tuple[str, Any]]) -> MeasuredPair:
    records = [r for _, r in found]
    ran = [r for r in records if not r.get("oom")]
    return MeasuredPair(models, sharing, _mean(_number(r.get("concurrency_efficiency")) for r in ran), _ci(ran),
                        _mean(_number(r.get("energy_saved_vs_serial")) for r in ran),
                        _mean(_number(r.get("peak_vram_mb")) for r in ran), len(records),
                        tuple(sorted({s for s, _ in found})))


def _fit_evidence(records: Iterable) -> FitEvidence:
    ran, oom = [], []
    for record in records:
        card = _number(record.get("gpu_memory_mb"))
        if card is None:
            continue
        (oom if record.get("oom") else ran).append(card)
    return FitEvidence(min(ran) if ran else None, max(oom) if oom else None)


def read_measured(paths: Sequence[Path], methods: Sequence[str] = ("interleaved",)) -> Measured:
    """The measured pairs of ``paths`` (results folders, benchmark JSON, result.json files);
    ``StoreError`` in one line for the first unusable file. Efficiency and energy come from every
    record that did not run out of memory, fit evidence from the records made on emulated cards.
    Only records of ``methods`` teach the model (the epoch method's figures carry start-up and a
    restart loop, and do not reproduce); the others are counted in ``skipped``."""
    grouped: dict[tuple[tuple[str, str], str], list[tuple[str, Any]]] = {}
    emulated: dict[tuple[str, str], list] = {}
    skipped = 0
    for path in paths:
        run = load_run(path)
        for record in run.records.values():
            if not (_concurrent(record) and _on_gpu(record)):
                continue
            models = pair_key(record.get("fg_model"), record.get("bg_model"))
            if record.get("gpu_memory_mb") is not None:
                emulated.setdefault(models, []).append(record)
            if (record.get("method") or "epoch") not in methods:
                skipped += 1
                continue
            grouped.setdefault((models, record.get("sharing") or "timeslice"), []).append((str(path), record))
    measured = Measured(skipped=skipped)
    for (models, sharing), found in grouped.items():
        measured.pairs[(models, sharing)] = _pair(models, sharing, found)
    for models, records in emulated.items():
        measured.fit[models] = _fit_evidence(records)
    return measured
