"""Collate the command-workload study: per method and case, every headline figure with the basis it
was measured on (where the jobs' steps came from, the duration basis, the energy split), and every
headline figure that is null with the record's reason. Exit code 1 when one is null: the study's
point is that a script that only prints is measured like a built-in.

    python -m tools.command_workloads.collate epoch.json interleaved.json --out reports/reference/command_workloads
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.store import StoreError, atomic_write_json, atomic_write_text, load_run

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="pytest-benchmark JSON files, one per method")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        summary = collate(args.runs)
    except StoreError as exc:
        print(f"gpu-pairs: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "summary.json", summary)
    text = markdown(summary)
    atomic_write_text(args.out / "summary.md", text)
    print(text)
    return 1 if any(entry["unmeasured"] for cases in summary["runs"].values() for entry in cases.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
