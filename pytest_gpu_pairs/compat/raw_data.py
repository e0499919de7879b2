"""The predecessor tool's ``raw_data.csv``, both ways: predecessor rows -> runs, and runs -> the predecessor's columns.

In the predecessor's CSV a solo run fills the plain columns (``repository``, ``duration_seconds``,
``energy_gpu_total_joules``, ``hyperparam_*``, ``perf_*``) and leaves ``mode`` empty. A parallel
run has ``mode`` = ``parallel`` and records the foreground job either in ``fg_*`` columns (with
``bg_repository``/``bg_model``) or, in older rows, in the plain columns with no background named.
The background was "GPU load only (not monitored)": the energy of a parallel row is the whole
card's during the foreground job, background included, which is what our ``gpu_energy_j`` is.
Its ``perf_test_accuracy`` and ``perf_best_val_accuracy`` are percents; ours are fractions, so
the loader divides them by 100 (and ``seed_layout`` leaves our fractions as they are).
A hyperparameter the predecessor left empty had its default value; the loader fills it in so that runs
of one configuration compare.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS, seed_name

ENERGY_FIELDS = {  # predecessor column (without an fg_ prefix) -> our record key
    "duration_seconds": "fg_duration_s",
    "energy_gpu_total_joules": "gpu_energy_j",
    "energy_gpu_avg_watts": "gpu_power_avg_w",
    "energy_gpu_max_watts": "gpu_power_max_w",
    "energy_gpu_temp_max_celsius": "gpu_temp_max_c",
    "energy_gpu_util_avg_percent": "gpu_util_avg_pct",
    "energy_cpu_total_joules": "cpu_energy_j",
}
SUMMARY_LEAD = ("experiment_id", "timestamp", "repository", "model", "mode", "bg_repository", "bg_model",
                "training_success", "error_message", "experiment_source", "mutated_param")
SEED_PERCENT_METRICS = ("test_accuracy", "best_val_accuracy")
"""Metrics the predecessor wrote in percent (pytorch/examples, CIFAR ResNets); read as fractions,
the unit of every accuracy-like metric of ours and of the predecessor's others (rank1, precision, ...)."""
REQUIRED = ("experiment_id", "repository", "model", "mode", "duration_seconds", "energy_gpu_total_joules")


def is_seed_frame(columns) -> bool:
    return all(c in columns for c in REQUIRED)


def _present(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value)) and value != ""


def _flag(value: Any) -> Optional[bool]:
    if not _present(value):
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def workload_name(repo: Any, model: Any) -> Optional[str]:
    """The built-in name of a seed (repository, model), or ``repo/model`` for one we do not know."""
    if not _present(repo) or not _present(model):
        return None
    return seed_name(str(repo), str(model)) or f"{repo}/{model}"


def _hyperparameters(row: dict[str, Any], prefix: str, model: Optional[str]) -> dict[str, Any]:
    given = {key[len(prefix) + 11:]: value for key, value in row.items()
             if key.startswith(prefix + "hyperparam_") and _present(value)}
    defaults = BUILTINS[model].defaults() if model in BUILTINS else {}
    return {**defaults, **given}


def campaign(row: dict[str, Any]) -> Optional[str]:
    """The predecessor's campaign: the experiment_id prefix before ``__`` (``default``, ``mutation_1x``,
    ``mutation_2x_safe``), which ``experiment_source`` does not always match; None without one."""
    run_id = str(row.get("experiment_id") or "")
    return run_id.split("__", 1)[0] if "__" in run_id else None


def seed_run(row: dict[str, Any], source: str, index: int) -> dict[str, Any]:
    """One predecessor CSV row as a run (the columns of ``load.COLUMNS``)."""
    parallel = str(row.get("mode") or "").strip() == "parallel"
    prefix = "fg_" if parallel and _present(row.get("fg_model")) else ""
    model = workload_name(row.get(prefix + "repository"), row.get(prefix + "model"))
    success = _flag(row.get(prefix + "training_success"))
    run: dict[str, Any] = {
        "source": source, "source_kind": "seed_csv", "source_row": index, "run_id": row.get("experiment_id"),
        "case_id": None, "timestamp": row.get("timestamp"), "mode": "concurrent" if parallel else "solo",
        "fg_model": model, "bg_model": workload_name(row.get("bg_repository"), row.get("bg_model")),
        "success": success, "failure": row.get(prefix + "error_message") if success is False else None,
        "experiment_source": row.get("experiment_source"), "campaign": campaign(row),
        "mutated_param": row.get("mutated_param"), "device": None, "repeats": 1}
    for seed_key, ours in ENERGY_FIELDS.items():
        value = row.get(prefix + seed_key)
        run[ours] = float(value) if value is not None and _present(value) else None
    for name, value in _hyperparameters(row, prefix, model).items():
        run[f"hp_{name}"] = value
    for key, value in row.items():
        if key.startswith(prefix + "perf_") and _present(value):
            name = key[len(prefix) + 5:]
            run["perf_" + name] = float(value) / 100.0 if name in SEED_PERCENT_METRICS else float(value)
    return run


def _seed_names(name: Any) -> tuple[Optional[str], Optional[str]]:
    if not _present(name):
        return None, None
    if name in BUILTINS:
        return BUILTINS[name].seed_repo, BUILTINS[name].seed_model
    repo, _, model = str(name).partition("/")
    return (repo, model) if model else (None, repo)


def seed_layout(run: dict[str, Any]) -> dict[str, Any]:
    """A run in the predecessor's vocabulary: for a concurrent run the foreground's values sit in the
    plain columns (as one reads the predecessor's ``fg_*`` columns), ``mode`` is ``parallel`` or empty."""
    repo, model = _seed_names(run.get("fg_model"))
    bg_repo, bg_model = _seed_names(run.get("bg_model"))
    row = {"experiment_id": run.get("run_id"), "timestamp": run.get("timestamp"), "repository": repo,
           "model": model, "mode": "parallel" if run.get("mode") == "concurrent" else "",
           "bg_repository": bg_repo, "bg_model": bg_model, "training_success": run.get("success"),
           "error_message": run.get("failure"), "experiment_source": run.get("experiment_source"),
           "mutated_param": run.get("mutated_param")}
    for seed_key, ours in ENERGY_FIELDS.items():
        row[seed_key] = run.get(ours)
    for key, value in run.items():
        if key.startswith("hp_"):
            row["hyperparam_" + key[3:]] = value
        elif key.startswith("perf_") and key not in ("perf_name", "perf_value", "perf_higher_is_better"):
            row[key] = value
    return row


SEED_PARALLEL_SUFFIX = "_parallel"


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def seed_row_run(row: Mapping[str, str]) -> Optional[tuple[str, dict[str, Any], str]]:
    """(built-in model, effective hyperparameters, mode) of one predecessor CSV row, or None.

    Parallel rows keep the foreground in ``fg_*`` columns, except older ones that used the plain
    columns; values the predecessor did not pass were the workload's defaults, so defaults fill them.
    """
    parallel = row.get("mode") == "parallel" or (row.get("experiment_id") or "").endswith(SEED_PARALLEL_SUFFIX)
    prefix = "fg_" if parallel and row.get("fg_model") else ""
    model = seed_name(row.get(f"{prefix}repository") or "", row.get(f"{prefix}model") or "")
    if model is None:
        return None
    hparams = BUILTINS[model].defaults()
    for name in hparams:
        value = _number(row.get(f"{prefix}hyperparam_{name}"))
        if value is not None:
            hparams[name] = value
    return model, hparams, "concurrent" if parallel else "solo"
