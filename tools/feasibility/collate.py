"""The feasibility study's committed reference, from the GPU machine's pytest-benchmark files.

Reads the pytest-benchmark JSON of each call of tools/feasibility/run_on_gpu.sh (the groups measured
at full scale) and writes ``reports/reference/feasibility/feasibility_full_scale.{json,md}`` (one row
per case, with why it failed).

Usage: python tools/feasibility/collate.py FETCHED/feasibility_A.json FETCHED/feasibility_B.json ...
       [--keep reports/reference/feasibility/feasibility_full_scale.json]  (its cases stay unless measured again)
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

COLUMNS = (("case", "case_id", "{}"), ("efficiency", "concurrency_efficiency", "{:.2f}"),
           ("fg slowdown", "fg_slowdown", "{:.2f}"), ("bg progress", "bg_progress_ratio", "{:.2f}"),
           ("bg coverage", "bg_coverage", "{:.2f}"), ("fg train s", "fg_duration_s", "{:.1f}"),
           ("GPU J", "gpu_energy_j", "{:.0f}"), ("fg J", "fg_gpu_energy_j", "{:.0f}"),
           ("bg J", "bg_gpu_energy_j", "{:.0f}"), ("split", "energy_split_method", "{}"),
           ("peak VRAM MB (NVML)", "peak_vram_mb", "{:.0f}"), ("fg / bg NVML MB", None, None),
           ("fg / bg torch reserved MB", None, None), ("oom", "oom", "{}"))


def _fmt(fmt, value):
    return "-" if value is None else fmt.format(value)


def _pair(record, a, b):
    return f"{_fmt('{:.0f}', record.get(a))} / {_fmt('{:.0f}', record.get(b))}"


def row(record: dict, outcome: str) -> list[str]:
    cells = []
    for title, key, fmt in COLUMNS:
        if title == "fg / bg NVML MB":
            cells.append(_pair(record, "fg_peak_vram_mb", "bg_peak_vram_mb"))
        elif title == "fg / bg torch reserved MB":
            cells.append(_pair(record, "fg_peak_mem_reserved_mb", "bg_peak_mem_reserved_mb"))
        else:
            cells.append(_fmt(fmt, record.get(key)))
    return cells + [outcome]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=Path("reports/reference/feasibility/feasibility_full_scale"))
    parser.add_argument("--keep", type=Path, default=None, help="an earlier reference JSON whose cases stay")
    parser.add_argument("--note", action="append", default=[], help="a line for the Notes under the table")
    args = parser.parse_args()
    records, machine = [], None
    if args.keep is not None:
        kept = json.loads(args.keep.read_text())
        records, machine = list(kept["cases"]), kept.get("machine")
    for path in args.inputs:
        data = json.loads(path.read_text())
        machine = machine or data.get("machine_info", {}).get("gpu_pairs")
        for bench in data["benchmarks"]:
            record = {**bench["extra_info"], "benchmark_fg_wall_s": bench["stats"]["mean"], "source": path.name}
            records = [r for r in records if r["case_id"] != record["case_id"]] + [record]
    records.sort(key=lambda r: r["case_id"])
    notes = args.note or (kept.get("notes", []) if args.keep is not None else [])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"machine": machine, "cases": records, "notes": notes},
                                                        indent=1, default=str))
    header = [c[0] for c in COLUMNS] + ["outcome"]
    lines = [f"# Feasibility groups at full scale on {machine['gpu_name'] if machine else 'the GPU machine'}", "",
             f"Driver {machine.get('driver')}, CUDA {machine.get('cuda_driver_version')}, idle "
             f"{machine.get('idle_power_w'):.1f} W. Full scale (`--gpu-pairs-scale 1`, one real epoch per job, "
             "the predecessor's hyperparameters), VRAM budget 7500 MB, min efficiency 1.0.", "" if machine else "",
             "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for record in records:
        problems = []
        if record.get("oom"):
            problems.append("OOM")
        if record.get("peak_vram_mb") and record["peak_vram_mb"] > record.get("vram_budget_mb", 7500):
            problems.append(f"VRAM over budget ({record['peak_vram_mb']:.0f} > {record['vram_budget_mb']:.0f} MB)")
        if record.get("failure"):
            problems.append(record["failure"])
        outcome = "failed: " + "; ".join(problems) if problems else "passed"
        lines.append("| " + " | ".join(row(record, outcome)) + " |")
    if notes:
        lines += ["", "Notes:", *(f"- {note}" for note in notes)]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}.json and {args.out}.md ({len(records)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
