"""The inputs of a report -> one pandas DataFrame with one row per run and the columns below.

Inputs: pytest-benchmark JSON (records in ``extra_info``), ``--gpu-pairs-out`` run directories,
single ``result.json`` files, and the predecessor tool's ``raw_data.csv``. Every later step (analysis,
plots, ``summary.csv``) reads only this frame, so a new input format is one function here.

Columns beyond ``COLUMNS``: ``hp_<name>`` (the foreground's hyperparameters), ``perf_<name>``
(its model metrics) and ``<metric>_std`` (spread over repeats, where a record has it).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.compat import raw_data as seed
from pytest_gpu_pairs.inputs import open_regular, printable
from pytest_gpu_pairs.record.keys import KEYS, meaning, perf_higher_is_better
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.plausible import LARGEST_FIGURE
from pytest_gpu_pairs.record.store import StoreError, load_run


def _key(name: str, source: str = "") -> str:
    """A record key's column text: its meaning from the key table, then where the report's inputs
    take it from when that differs between them."""
    return f"{meaning(name)} ({source})" if source else meaning(name)


# A record key's text is the key table's meaning (with where each input takes it from); only the
# report's own columns are written here.
COLUMNS: dict[str, str] = {
    "source": "the input (file or folder) the row came from",
    "source_kind": "benchmark_json | run_dir | result_json | seed_csv",
    "source_row": "position of the row in its input",
    "run_id": "the predecessor's experiment_id, or our case_id",
    "case_id": _key("case_id", "empty for predecessor rows"),
    "timestamp": "when the run started, where the input says",
    "mode": _key("mode", "predecessor rows: solo or concurrent"),
    "fg_model": _key("fg_model", "built-in name; repo/model for a seed model we do not know"),
    "bg_model": _key("bg_model", "empty where the input does not name it; bg+bg2 for a group of more jobs"),
    "pair": "fg_model+bg_model for a concurrent run with a known background (every job's model for a group of "
            "more), [mps] when not time-sliced",
    "sharing": _key("sharing", "predecessor rows: timeslice, the driver's default"),
    "success": "the run finished without failure or OOM",
    "failure": _key("failure"),
    "experiment_source": "the predecessor's experiment_source, or our design",
    "variant": _key("variant", "empty for predecessor rows"),
    "campaign": "the batch of runs this one belongs to (seed: the experiment_id prefix); only runs of one "
                "campaign are compared with each other",
    "mutated_param": "the predecessor's mutated hyperparameter",
    "fg_duration_s": _key("fg_duration_s", "seed: duration_seconds / fg_duration_seconds"),
    "fg_solo_duration_s": _key("fg_solo_duration_s", "ours only"),
    "fg_slowdown": _key("fg_slowdown", "ours; the analysis fills it for predecessor rows"),
    "bg_progress_ratio": _key("bg_progress_ratio", "ours only"),
    "concurrency_efficiency": _key("concurrency_efficiency", "ours only"),
    "concurrent_overhead": _key("concurrent_overhead"),
    "gpu_energy_j": _key("gpu_energy_j", "seed: energy_gpu_total_joules"),
    "gpu_energy_above_idle_j": _key("gpu_energy_above_idle_j", "ours only"),
    "fg_gpu_energy_j": _key("fg_gpu_energy_j", "ours only"),
    "bg_gpu_energy_j": _key("bg_gpu_energy_j", "ours only"),
    "cpu_energy_j": _key("cpu_energy_j", "seed: energy_cpu_total_joules"),
    "gpu_power_avg_w": _key("gpu_power_avg_w"),
    "gpu_power_max_w": _key("gpu_power_max_w"),
    "gpu_util_avg_pct": _key("gpu_util_avg_pct"),
    "gpu_temp_max_c": _key("gpu_temp_max_c"),
    "peak_vram_mb": _key("peak_vram_mb"),
    "fg_peak_vram_mb": _key("fg_peak_vram_mb"),
    "bg_peak_vram_mb": _key("bg_peak_vram_mb"),
    "vram_budget_mb": _key("vram_budget_mb"),
    "min_efficiency": _key("min_efficiency"),
    "oom": _key("oom", "in either job"),
    "perf_name": "the foreground model's metric: its primary one, or the one --perf-metric chose (the same for every run of one model)",
    "perf_value": "its value",
    "perf_higher_is_better": "False for losses, errors, perplexities",
    "device": _key("device"),
    "gpu_name": "GPU model",
    "driver": "NVIDIA driver",
    "cuda_driver_version": "CUDA version of the driver",
    "repeats": _key("repeats"),
    "method": _key("method", "predecessor rows: epoch, whole runs"),
    "duplicate_of": "run_id of an identical row kept instead (same model, mode, duration and energy)",
}
RECORD_NUMBERS = ("fg_duration_s", "fg_wall_s", "fg_solo_duration_s", "fg_slowdown", "bg_progress_ratio",
                  "bg_speed_ratio", "concurrency_efficiency", "concurrent_overhead", "gpu_energy_j",
                  "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "cpu_energy_j",
                  "gpu_power_avg_w", "gpu_power_max_w", "gpu_util_avg_pct", "gpu_temp_max_c", "peak_vram_mb",
                  "fg_peak_vram_mb", "bg_peak_vram_mb", "fg_peak_mem_reserved_mb", "vram_budget_mb",
                  "min_efficiency", "bg_coverage", "bg_runs", "bg_failures", "idle_power_w", "window_s", "repeats",
                  "serial_energy_j", "energy_saved_vs_serial", "other_peak_vram_mb", "mps_server_vram_mb")
PERF_FALLBACK = ("test_accuracy", "accuracy", "rank1", "map", "top1_accuracy", "best_val_accuracy", "precision",
                 "recall", "f1", "eval_loss", "test_loss")
PERF_COLUMNS = ("perf_name", "perf_value", "perf_higher_is_better")
BOUNDED_PERF = re.compile(r"accuracy|precision|recall|f1|rank|map", re.IGNORECASE)


class ReportInputError(ValueError):
    """One line: the input, where in it, and what was expected."""


@dataclass
class Input:
    path: str
    kind: str
    rows: int
    machine: dict[str, Any] = field(default_factory=dict)
    refused: int = 0  # records left out: a run its background did not share (coverage_refused)


@dataclass
class Loaded:
    runs: pd.DataFrame
    inputs: list[Input]
    notes: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return int(self.runs["duplicate_of"].notna().sum())


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def record_run(record: Record, source: str, kind: str, index: int, machine: dict[str, Any]) -> dict[str, Any]:
    """One of our result records as a run; ``timestamp`` is the predecessor's column, which our
    records do not have (their times are in ``timeline``)."""
    run: dict[str, Any] = {
        "source": source, "source_kind": kind, "source_row": index, "run_id": record.case_id,
        "case_id": record.case_id, "timestamp": None, "mode": record.mode,
        "fg_model": record.fg_model, "bg_model": backgrounds(record),
        "success": not record.failure and not record.oom,
        "failure": printable(record.failure) if isinstance(record.failure, str) else record.failure,
        "experiment_source": record.design, "variant": record.variant, "mutated_param": None,
        "oom": record.oom, "sharing": record.sharing, "method": record.method,
        "device": record.device or machine.get("device"), "gpu_name": machine.get("gpu_name"),
        "driver": machine.get("driver"), "cuda_driver_version": machine.get("cuda_driver_version")}
    for key in RECORD_NUMBERS:
        run[key] = _number(record.get(key))
        if _number(record.get(f"{key}_std")) is not None:
            run[f"{key}_std"] = _number(record.get(f"{key}_std"))
    for name, value in (record.fg_hparams or {}).items():
        run[f"hp_{name}"] = value
    for name, value in (record.perf or {}).items():
        if _number(value) is not None:
            run[f"perf_{name}"] = _number(value)
    return run


def _load_ours(path: Path) -> tuple[list[dict[str, Any]], Input]:
    try:
        run = load_run(path)
    except StoreError as exc:
        raise ReportInputError(str(exc)) from None
    kind = "run_dir" if path.is_dir() else ("result_json" if path.name == "result.json" else "benchmark_json")
    for case_id, record in run.records.items():
        _refuse_beyond_measurement(path, case_id, record)
    counted = [r for r in run.records.values() if not r.coverage_refused]
    rows = [record_run(r, str(path), kind, i, run.machine) for i, r in enumerate(counted)]
    return rows, Input(str(path), kind, len(rows), run.machine, refused=len(run.records) - len(counted))


DRAWABLE = 1e15  # past any measurement (a year of a thousand GPUs is 1e13 J), and where matplotlib's transforms still hold
DRAWABLE_RATIO = 1e6  # a ratio or fraction this far from 1 is no measurement (an efficiency lies in 0-2)


def _refuse_beyond_measurement(path: Path, case_id: str, record: Record) -> None:
    """A figure like 1e40 is finite and typed, yet no measurement: drawn, it overflows matplotlib's
    transforms or asks for a figure of more pixels than exist. One line naming the file and JSON
    path, as the comparison gate says it (which takes figures up to ``LARGEST_FIGURE``)."""
    for key in RECORD_NUMBERS:
        value = _number(record.get(key))
        bound = min(LARGEST_FIGURE, DRAWABLE_RATIO if key in KEYS and KEYS[key].unit in ("ratio", "fraction")
                    else DRAWABLE)
        if value is not None and abs(value) > bound:
            raise ReportInputError(f"{path}: $[{case_id!r}].{key}: expected a measured figure (at most "
                                   f"{bound:g} in size), got {value:.3g}")
        if value is not None and value < 0 and key in KEYS and KEYS[key].unit in ("MB", "ratio"):
            raise ReportInputError(f"{path}: $[{case_id!r}].{key}: expected 0 or more ({KEYS[key].unit}), "
                                   f"got {value:.3g}")


def _load_seed(path: Path) -> tuple[list[dict[str, Any]], Input]:
    try:
        with open_regular(path) as handle:
            frame = pd.read_csv(handle, low_memory=False)
    except (OSError, ValueError) as exc:
        raise ReportInputError(f"{path}: $: expected a readable CSV file ({exc})") from None
    missing = [c for c in seed.REQUIRED if c not in frame.columns]
    if missing:
        raise ReportInputError(f"{path}: columns: expected the predecessor's raw_data.csv columns, "
                               f"missing {', '.join(missing)}")
    rows = [seed.seed_run(row, str(path), i) for i, row in enumerate(frame.to_dict("records"))]
    return rows, Input(str(path), "seed_csv", len(rows))


def _load_one(path: Path) -> tuple[list[dict[str, Any]], Input]:
    if not path.exists():
        raise ReportInputError(f"{path}: $: expected a benchmark JSON file, a run directory or the predecessor's raw_data.csv")
    if path.suffix.lower() == ".csv":
        return _load_seed(path)
    return _load_ours(path)


def off_scale(values: pd.Series, name: str) -> pd.Series:
    """Values of a bounded metric (accuracy, precision, rank-1, mAP, ...) that cannot be right
    next to the others: above 100, below 0, or on the minority side of a fraction/percent mix
    (a log regex that caught another number)."""
    if not BOUNDED_PERF.search(name):
        return pd.Series(False, index=values.index)
    wrong = (values > 100) | (values < 0)
    fractions, percents = (values <= 1) & ~wrong, (values > 1) & ~wrong
    if fractions.any() and percents.any():
        wrong |= percents if fractions.sum() >= percents.sum() else fractions
    return wrong


def assign_primary_perf(runs: pd.DataFrame, notes: list[str],
                        chosen: Optional[Mapping[str, str]] = None) -> pd.DataFrame:
    """One primary metric per foreground model, the same for all its runs: the one ``chosen`` names
    for the model, else the first of the workload's own metrics (catalog order) that any run
    reports, else a common fallback."""
    runs = runs.copy()
    runs["perf_name"], runs["perf_value"], runs["perf_higher_is_better"] = None, float("nan"), None
    chosen = dict(chosen or {})
    for model in sorted(set(chosen) - set(runs["fg_model"].dropna())):
        notes.append(f"--perf-metric {model}={chosen[model]}: no run of {model} in the inputs")
    for model, rows in runs.groupby("fg_model", dropna=True):
        name = chosen.get(model) or _first_recorded(rows, BUILTINS[model].metrics if model in BUILTINS else ())
        if name is None:
            continue
        if not _recorded(rows, name):
            raise ReportInputError(f"--perf-metric {model}={name}: no run of {model} records {name} "
                                   f"(they record: {', '.join(_recorded_metrics(rows)) or 'no metric'})")
        values = rows[f"perf_{name}"].astype(float)
        wrong = off_scale(values, name)
        if wrong.any():
            notes.append(f"{model}: {int(wrong.sum())} of {int(values.notna().sum())} {name} values are off the "
                         f"scale of the others (e.g. {values[wrong].iloc[0]:g}); left out of the performance analyses")
        runs.loc[rows.index, "perf_name"] = name
        runs.loc[rows.index, "perf_value"] = values.mask(wrong)
        runs.loc[rows.index, "perf_higher_is_better"] = perf_higher_is_better(name)
    return runs


def _recorded(rows: pd.DataFrame, name: str) -> bool:
    return f"perf_{name}" in rows and bool(rows[f"perf_{name}"].notna().any())


def _recorded_metrics(rows: pd.DataFrame) -> list[str]:
    return sorted(c[5:] for c in rows.columns
                  if c.startswith("perf_") and c not in PERF_COLUMNS and rows[c].notna().any())


def _first_recorded(rows: pd.DataFrame, preferred: Iterable[str]) -> Optional[str]:
    return next((n for n in (*preferred, *PERF_FALLBACK) if _recorded(rows, n)), None)


def mark_duplicates(runs: pd.DataFrame) -> pd.DataFrame:
    """The predecessor's CSV holds some runs twice (merged exports); a run counted twice would fake
    significance. Rows with the same model, mode, duration (µs) and energy (mJ) are one run: the
    most complete row is kept, the others point to it in ``duplicate_of``."""
    runs = runs.copy()
    runs["duplicate_of"] = None
    timed = runs[runs["fg_duration_s"].notna()]
    key = [timed["fg_model"].astype(str), timed["mode"].astype(str), timed["fg_duration_s"].round(6).astype(str),
           timed["gpu_energy_j"].round(3).astype(str)]
    completeness = timed.notna().sum(axis=1)
    for _, group in timed.groupby(key, sort=False, dropna=False):  # a CPU run has no energy: NaN is a value here
        if len(group) > 1:
            keep = completeness.loc[group.index].idxmax()
            runs.loc[group.index.drop(keep), "duplicate_of"] = runs.at[keep, "run_id"]
    return runs


def backgrounds(record: Record) -> Optional[str]:
    """The background's model; for a group of more than two jobs every background's, ``bg+bg2``, so
    that its run is never analysed as the pair of its first two jobs."""
    models = [job.model for job in record.jobs or [] if job.model]
    return "+".join(models[1:]) if len(models) > 2 else record.bg_model


def pair_label(fg: Any, bg: Any, mode: Any, sharing: Any) -> Optional[str]:
    """``fg+bg`` for a concurrent run with a known background; a pair shared through MPS is another
    pair than the same one time-sliced, so the mechanism is part of the label."""
    if mode != "concurrent" or not isinstance(bg, str):
        return None
    return f"{fg}+{bg}" if sharing in (None, "timeslice") else f"{fg}+{bg} [{sharing}]"


def load_runs(paths: Iterable[str | Path], perf_metrics: Optional[Mapping[str, str]] = None) -> Loaded:
    """Every run of the inputs, one row each; ``perf_metrics`` (model to metric) overrides which
    metric judges a model's runs."""
    rows: list[dict[str, Any]] = []
    inputs = []
    for path in paths:
        found, info = _load_one(Path(path))
        rows += found
        inputs.append(info)
    frame = pd.DataFrame(rows)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["sharing"] = frame["sharing"].fillna("timeslice")
    frame["method"] = frame["method"].fillna("epoch")  # the predecessor's runs and records older than the key
    frame["pair"] = [pair_label(fg, bg, mode, sharing) for fg, bg, mode, sharing
                     in zip(frame["fg_model"], frame["bg_model"], frame["mode"], frame["sharing"])]
    numeric = [c for c in frame.columns if c in RECORD_NUMBERS or c.endswith("_std") or c.startswith("perf_")]
    for column in numeric:
        if column not in ("perf_name", "perf_higher_is_better"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    notes = [f"{i.path}: {i.refused} run(s) left out, not shared from start to end (coverage_refused)"
             for i in inputs if i.refused]
    frame = mark_duplicates(assign_primary_perf(frame, notes, perf_metrics))
    ordered = list(COLUMNS) + sorted(c for c in frame.columns if c not in COLUMNS)
    return Loaded(frame[ordered], inputs, notes)
