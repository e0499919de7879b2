"""One pair of the hyperparameter study, from a results folder (or its .tgz) to the committed
reference: ``reports/reference/hp_study/hp_study_<A>_<B>.json`` and ``.md``, and the table on stdout.

    python tools/hp_study/collate.py hp_results.tgz [--group hp06] [--out-dir reports/reference/hp_study]

The 11 runs are the group's concurrent cases and the solo records (cases or ``_solo/``
baselines) of the same jobs. "Effects" set each variant against the default, solo and concurrent:
does sharing the GPU change what the hyperparameter does to time, energy and the metric?
"""
from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Optional

COLUMNS = (("run", "case_id", "{}"), ("mode", "mode", "{}"), ("epochs", "fg_epochs", "{:g}"),
           ("lr", "learning_rate", "{:g}"), ("time s", "fg_duration_s", "{:.2f}"), ("slowdown", "fg_slowdown", "{:.2f}"),
           ("bg ratio", "bg_progress_ratio", "{:.2f}"), ("eff", "concurrency_efficiency", "{:.2f}"),
           ("GPU J", "gpu_energy_j", "{:.0f}"), ("fg J", "fg_gpu_energy_j", "{:.0f}"),
           ("J/epoch", "fg_energy_per_epoch_j", "{:.1f}"), ("metric", "perf_value", "{:.2f}"),
           ("overhead", "concurrent_overhead", "{:+.3f}"), ("E overhead", "concurrent_energy_overhead", "{:+.3f}"),
           ("interference", "interference", "{:+.3f}"), ("saved J", "sharing_energy_saved_j", "{:+.0f}"),
           ("saved", "energy_saved_vs_serial", "{:+.1%}"), ("VRAM MB", "peak_vram_mb", "{:.0f}"))
VARIANT_ORDER = ("default", "lr_min", "lr_max", "epochs_min", "epochs_max")
EFFECTS = (("time", "fg_duration_s"), ("energy/epoch", "fg_energy_per_epoch_j"), ("GPU energy", "gpu_energy_j"),
           ("metric", "perf_value"))


def results_folder(source: Path, scratch: Path) -> Path:
    if source.is_dir():
        return source
    with tarfile.open(source) as archive:
        archive.extractall(scratch, filter="data")
    sessions = sorted(scratch.glob("**/session.json"))
    if not sessions:
        sys.exit(f"{source}: no session.json inside: expected a --gpu-pairs-out folder or a .tgz of one")
    return sessions[0].parent


def load_records(folder: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(list(folder.glob("*/result.json")) + list(folder.glob("_solo/*/result.json"))):
        record = json.loads(path.read_text())
        if record.get("complete"):
            record["perf_value"] = (record.get("perf") or {}).get(record.get("perf_metric"))
            record["learning_rate"] = (record.get("fg_hparams") or {}).get("learning_rate")
            records.append(record)
    return records


def job(record: dict[str, Any], role: str = "fg") -> tuple:
    return record.get(f"{role}_model"), json.dumps(record.get(f"{role}_hparams"), sort_keys=True)


def pick_group(records: list[dict[str, Any]], group: Optional[str]) -> str:
    groups = sorted({r["case_id"].split("-")[0] for r in records if r.get("mode") == "concurrent"})
    if group:
        return group
    if len(groups) != 1:
        sys.exit(f"expected one study pair in the results, found {groups}: pick one with --group")
    return groups[0]


def pair_runs(records: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    """A solo, B solo per variant, then the concurrent runs, in the design's order."""
    concurrent = [r for r in records if r.get("mode") == "concurrent" and r["case_id"].startswith(f"{group}-")]
    concurrent.sort(key=lambda r: (VARIANT_ORDER.index(r["variant"]) if r["variant"] in VARIANT_ORDER
                                   else len(VARIANT_ORDER), r["variant"]))
    if not concurrent:
        sys.exit(f"no concurrent runs of {group} in the results")
    solos = {job(r): r for r in records if r.get("mode") == "solo"}
    order = [job(concurrent[0], "bg")] + [job(r) for r in concurrent]
    return [solos[key] for key in dict.fromkeys(order) if key in solos] + concurrent


def variant_of(record: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    if record.get("design") == "hp_study":
        return record["variant"]
    twin = next((r for r in runs if r.get("mode") == "concurrent" and job(r) == job(record)), None)
    return twin["variant"] if twin else record.get("variant", "?")


def effects(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """variant / default of each figure, solo and concurrent, and their difference."""
    by = {(variant_of(r, runs), r["mode"]): r for r in runs if r["mode"] == "concurrent" or job(r) != job(runs[-1], "bg")}
    rows = []
    for variant in [v for v, mode in by if mode == "concurrent" and v != "default"]:
        row = {"variant": variant}
        for label, key in EFFECTS:
            ratios = {}
            for mode in ("solo", "concurrent"):
                value = by.get((variant, mode), {}).get(key)
                base = by.get(("default", mode), {}).get(key)
                ratios[mode] = value / base if value is not None and base else None
            row[label] = ratios
        rows.append(row)
    return rows


def summary(runs: list[dict[str, Any]]) -> str:
    """The concurrent runs' spread, as a starting point for reading the tables."""
    concurrent = [r for r in runs if r["mode"] == "concurrent"]

    def spread(key: str, fmt: str) -> str:
        values = [r[key] for r in concurrent if r.get(key) is not None]
        return f"{fmt.format(min(values))} to {fmt.format(max(values))}" if values else "not measured"

    return (f"Across the {len(concurrent)} concurrent runs: concurrency efficiency "
            f"{spread('concurrency_efficiency', '{:.2f}')}, foreground slowdown {spread('fg_slowdown', '{:.2f}')}, "
            f"energy saved by sharing {spread('energy_saved_vs_serial', '{:+.1%}')}, "
            f"interference {spread('interference', '{:+.3f}')}, background coverage {spread('bg_coverage', '{:.2f}')}.")


def cell(fmt: str, value: Any) -> str:
    return "-" if value is None else fmt.format(value)


def markdown(group: str, runs: list[dict[str, Any]], effect_rows: list[dict[str, Any]], session: dict) -> str:
    a, b = runs[-1]["bg_model"], runs[-1]["fg_model"]
    lines = [f"# Hyperparameter study, pair {group}: {a} (A, background at default) + {b} (B, varied foreground)", "",
             f"Device: {session.get('device')}; scale {session.get('scale')}; idle power "
             f"{cell('{:.1f} W', session.get('idle_power_w'))}; sampling {session.get('sample_hz')} Hz; "
             f"{len(runs)} runs; metric: {runs[-1].get('perf_metric')}.", "",
             "| " + " | ".join(title for title, _, _ in COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(fmt, r.get(key)) for _, key, fmt in COLUMNS) + " |" for r in runs]
    lines += ["", "Effects: each variant over the default, alone and under A (1.00 = no effect).", "",
              "| variant | " + " | ".join(f"{label} solo | {label} concurrent" for label, _ in EFFECTS) + " |",
              "|" + " --- |" * (1 + 2 * len(EFFECTS))]
    for row in effect_rows:
        cells = [cell("{:.3f}", row[label][mode]) for label, _ in EFFECTS for mode in ("solo", "concurrent")]
        lines.append(f"| {row['variant']} | " + " | ".join(cells) + " |")
    lines += ["", summary(runs)]
    missing = sorted({f"{key}: {reason}" for r in runs for key, reason in (r.get("notes") or {}).items()
                      if r.get(key) is None and key in {k for _, k, _ in COLUMNS} and not reason.startswith("solo case")})
    if missing:
        lines += ["", "Not measured:", ""] + [f"- {line}" for line in missing]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a --gpu-pairs-out folder or a .tgz of one")
    parser.add_argument("--group", help="the study pair (default: the only one in the results)")
    parser.add_argument("--out-dir", type=Path, default=Path("reports/reference/hp_study"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = results_folder(args.source, Path(scratch))
        records = load_records(folder)
        session = json.loads((folder / "session.json").read_text()) if (folder / "session.json").exists() else {}
    group = pick_group(records, args.group)
    runs = pair_runs(records, group)
    effect_rows = effects(runs)
    name = f"hp_study_{runs[-1]['bg_model']}_{runs[-1]['fg_model']}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{name}.json").write_text(json.dumps(
        {"group": group, "session": session, "runs": runs, "effects": effect_rows}, indent=2, sort_keys=True) + "\n")
    text = markdown(group, runs, effect_rows, session)
    (args.out_dir / f"{name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
