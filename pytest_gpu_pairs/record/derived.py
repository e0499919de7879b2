"""The hyperparameter study's figures: a round's record against the records of
its solo baselines (the same foreground job alone, the background job alone).

- ``concurrent_overhead``: relative increase of the foreground's training time over its solo run
  with the same model and hyperparameters (``fg_slowdown - 1``); ``concurrent_energy_overhead``
  the same for the card's energy over that run. This reads the predecessor's parallel rows
  (``fg_duration_seconds``, ``fg_energy_gpu_total_joules``: the whole card during the foreground)
  against its solo rows (``duration_seconds``, ``energy_gpu_total_joules``).
- ``interference``: relative change of the foreground's performance metric (``perf_metric``, the
  workload's first) concurrent vs solo; its sign means better or worse by that metric's direction.
- ``fg_energy_per_epoch_j``, ``fg_energy_per_perf_j``: the foreground's energy above idle
  (``fg_gpu_energy_j``) per configured epoch and per unit of a higher-is-better metric.
- ``sharing_energy_saved_j``: ``serial_energy_j`` (the window's work, each job's steps at its solo
  energy per step: the two solo runs) minus the card's energy over the concurrent window, in
  joules; ``energy_saved_vs_serial`` is the same as a fraction. Total counter energy on both
  sides, because running serially also pays the idle power for longer.
"""
from __future__ import annotations

from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.record import metrics
from pytest_gpu_pairs.record.keys import COMPARISONS, perf_higher_is_better
from pytest_gpu_pairs.record.model import Record


def perf_metric(job: JobConfig, perf: dict[str, Any]) -> Optional[str]:
    """The metric the study compares: the built-in's first, a command's first log pattern, else any."""
    if job.is_builtin and job.model in BUILTINS:
        return BUILTINS[job.model].primary_metric
    if job.command is not None and job.command.log_patterns:
        return next(iter(job.command.log_patterns))
    return next(iter(perf), None)


def higher_is_better(metric: str) -> bool:
    return perf_higher_is_better(metric)


def _note(record: dict[str, Any], key: str, reason: str) -> None:
    if record.get(key) is None:
        record.setdefault("notes", {}).setdefault(key, reason)


def own_figures(record: dict[str, Any], job: JobConfig) -> dict[str, Any]:
    """Figures of one round alone (either mode): its energy per unit of work and of performance."""
    perf = record.get("perf") or {}
    metric = perf_metric(job, perf)
    epochs = job.hyperparameters.get("epochs")
    energy = record.get("fg_gpu_energy_j")
    value = perf.get(metric) if metric else None
    figures = {"perf_metric": metric, "fg_epochs": epochs,
               "fg_energy_per_epoch_j": metrics.per_unit(energy, epochs),
               "fg_energy_per_perf_j": metrics.per_unit(energy, value) if metric and higher_is_better(metric) else None}
    out = {**record, **figures}
    reason = (record.get("notes") or {}).get("fg_gpu_energy_j", "the foreground's GPU energy was not measured")
    _note(out, "fg_energy_per_epoch_j", reason if energy is None else "the job has no epochs hyperparameter")
    if metric and not higher_is_better(metric):
        _note(out, "fg_energy_per_perf_j", f"{metric} is lower-is-better: energy per unit of it means nothing")
    else:
        _note(out, "fg_energy_per_perf_j", reason if energy is None else f"no positive {metric} was reported")
    return {**figures, "notes": out.get("notes", {})}


def comparison_figures(record: dict[str, Any], solo_fg: Optional[Record]) -> dict[str, Any]:
    """A concurrent round (the dict being built) against its foreground's solo record; None for a solo round."""
    out = {**record, **dict.fromkeys(COMPARISONS)}
    if record.get("mode") == "solo" or solo_fg is None:
        for key in COMPARISONS:
            _note(out, key, "solo case: nothing shares the device")
        return {key: out[key] for key in COMPARISONS + ("notes",)}
    out["concurrent_overhead"] = metrics.relative_change(record.get("fg_duration_s"), solo_fg.fg_duration_s)
    out["concurrent_energy_overhead"] = metrics.relative_change(record.get("gpu_energy_j"), solo_fg.gpu_energy_j)
    metric = record.get("perf_metric")
    solo_perf = (solo_fg.perf or {}).get(metric) if metric else None
    out["interference"] = metrics.relative_change((record.get("perf") or {}).get(metric), solo_perf)
    out["sharing_energy_saved_j"] = metrics.energy_saved_j(record.get("gpu_energy_j"), record.get("serial_energy_j"))
    _explain_missing(out, solo_fg)
    return {key: out[key] for key in COMPARISONS + ("notes",)}


def _explain_missing(out: dict[str, Any], solo_fg: Record) -> None:
    notes = out.get("notes") or {}
    energy_reason = notes.get("gpu_energy_j") or (solo_fg.notes or {}).get("gpu_energy_j")
    energy_reason = energy_reason or "the GPU energy of this run or of a solo run was not measured"
    _note(out, "concurrent_overhead", "the foreground's solo duration is missing")
    _note(out, "concurrent_energy_overhead", energy_reason)
    _note(out, "interference", f"no {out.get('perf_metric')} from this run and its solo run to compare")
    _note(out, "sharing_energy_saved_j", notes.get("gpu_energy_j") or notes.get("serial_energy_j") or energy_reason)


def with_derived(record: dict[str, Any], job: JobConfig, solo_fg: Optional[Record]) -> dict[str, Any]:
    """The record with its own figures and, for a concurrent round, the comparisons added."""
    record.update(own_figures(record, job))
    record.update(comparison_figures(record, solo_fg))
    return record
