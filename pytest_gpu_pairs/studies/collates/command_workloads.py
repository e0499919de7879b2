"""Collate the command-workload study: per method and case, every headline figure with the basis it
was measured on (where the jobs' steps came from, the duration basis, the energy split), and every
headline figure that is null with the record's reason (the study's point is that a script that only
prints is measured like a built-in, so every null names why).

    gpu-pairs study collect command_workloads --out reports/reference/command_workloads

Each method's run is read through the store: its pytest-benchmark JSON (``epoch.json``, as the
committed study keeps it) or else its results folder (``epoch/``, as ``gpu-pairs study run`` leaves it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.store import load_run

METHODS = ("epoch", "interleaved")

HEADLINE = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "fg_duration_s", "gpu_energy_j",
            "fg_gpu_energy_j", "bg_gpu_energy_j", "energy_saved_vs_serial", "peak_vram_mb", "fg_peak_vram_mb",
            "bg_peak_vram_mb")
BASIS = ("method", "fg_progress_source", "bg_progress_source", "duration_basis", "energy_split_method",
         "vram_budget_source")
COLUMNS = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "fg_gpu_energy_j", "bg_gpu_energy_j",
           "peak_vram_mb")


EPOCH_ONLY = ("fg_duration_s",)  # interleaved rounds measure rates over phases, not a run's duration


def headline(record: dict[str, Any]) -> tuple[str, ...]:
    return tuple(k for k in HEADLINE if record.get("method") != "interleaved" or k not in EPOCH_ONLY)


def case_entry(record: dict[str, Any]) -> dict[str, Any]:
    notes = record.get("notes") or {}
    keys = headline(record)
    return {"figures": {key: record.get(key) for key in keys},
            "intervals": {key: record.get(f"{key}_ci") for key in keys if record.get(f"{key}_ci")},
            "basis": {key: record.get(key) for key in BASIS},
            "rounds": record.get("n_rounds") or record.get("repeats"), "failure": record.get("failure"),
            "unmeasured": {key: notes.get(key, "no reason recorded") for key in keys if record.get(key) is None}}


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    runs = [folder / f"{m}.json" if (folder / f"{m}.json").is_file() else folder / m for m in METHODS]
    return collate([run for run in runs if run.exists()])


def table(summary: dict[str, Any]) -> str:
    return markdown(summary)


def collate(paths: list[Path]) -> dict[str, Any]:
    runs: dict[str, dict[str, Any]] = {}
    for path in paths:
        run = load_run(path)
        runs[path.stem] = {case_id: case_entry(record.to_dict()) for case_id, record in sorted(run.records.items())}
    return {"study": "command_workloads", "runs": runs}


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# Command workloads: a script that only prints, measured like a built-in", ""]
    for run, cases in summary["runs"].items():
        lines += [f"## {run}", "", "| case | " + " | ".join(COLUMNS) + " | steps from (fg / bg) | duration | split |",
                  "|---" * (len(COLUMNS) + 4) + "|"]
        for case_id, entry in cases.items():
            basis = entry["basis"]
            lines.append(f"| {case_id} | " + " | ".join(_cell(entry["figures"][k]) for k in COLUMNS)
                         + f" | {_cell(basis['fg_progress_source'])} / {_cell(basis['bg_progress_source'])}"
                         f" | {_cell(basis['duration_basis'])} | {_cell(basis['energy_split_method'])} |")
        missing = [(case_id, key, why) for case_id, entry in cases.items() for key, why in entry["unmeasured"].items()]
        failed = [(case_id, entry["failure"]) for case_id, entry in cases.items() if entry["failure"]]
        lines += [""] + [f"- {case_id}: `{key}` is null: {why}" for case_id, key, why in missing]
        lines += [f"- {case_id} failed: {failure}" for case_id, failure in failed]
        lines += ["- every headline figure was measured" if not missing else "", ""]
    return "\n".join(lines)
