"""How well candidate normalisations of the per-job energy split reproduce across sessions.

Reads the studies' session JSON (records in ``extra_info``, every round under ``rounds``) and, for
each case, the CV across sessions of the session means of:

- per phase: the job's Shapley share of one pair phase (``fg_gpu_energy_j``, what the record gives);
- per step: that share over the job's steps in the phase (``*_gpu_energy_per_step_j``);
- per solo second: that share over the time the job alone would have needed for the same steps
  (a power: what the job costs per second of its own progress);
- fraction: the foreground's share of the pair's energy above idle.

A host that changes pace between sessions moves a host-bound job's steps but not its power, and a
GPU-bound job's energy with its steps: which candidate holds tells which kind of job it is.

    R=reports/reference/reproducibility
    python -m tools.reproducibility.split_candidates $R $R/drifting-host $R/half-second-10-rounds $R/two-second \\
        --out $R/split_candidates.md
"""
from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.store import load_run

Round = dict[str, Any]


def _solo_seconds(role: str) -> Callable[[Round], float]:
    return lambda r: r[f"{role}_steps_per_s"] * r["window_s"] / r[f"{role}_solo_steps_per_s"]


CANDIDATES: dict[str, Callable[[Round], float]] = {
    "fg per phase": lambda r: r["fg_gpu_energy_j"],
    "bg per phase": lambda r: r["bg_gpu_energy_j"],
    "fg per step": lambda r: r["fg_gpu_energy_per_step_j"],
    "bg per step": lambda r: r["bg_gpu_energy_per_step_j"],
    "fg per solo second": lambda r: r["fg_gpu_energy_j"] / _solo_seconds("fg")(r),
    "bg per solo second": lambda r: r["bg_gpu_energy_j"] / _solo_seconds("bg")(r),
    "fg fraction": lambda r: r["fg_gpu_energy_j"] / r["gpu_energy_above_idle_j"],
}
NEEDED = ("fg_gpu_energy_j", "bg_gpu_energy_j", "fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j",
          "fg_steps_per_s", "bg_steps_per_s", "fg_solo_steps_per_s", "bg_solo_steps_per_s", "window_s",
          "gpu_energy_above_idle_j")


def session_means(path: Path) -> dict[str, dict[str, float]]:
    """case id -> candidate -> the mean over the session's complete rounds."""
    out: dict[str, dict[str, float]] = {}
    for case_id, record in load_run(path).records.items():
        rounds = [r for r in record.get("rounds") or [] if all(r.get(k) for k in NEEDED)]
        if rounds:
            out[case_id] = {name: statistics.mean(f(r) for r in rounds) for name, f in CANDIDATES.items()}
    return out


def cv_table(folder: Path) -> dict[str, dict[str, float]]:
    sessions = [session_means(p) for p in sorted(folder.glob("session-[0-9].json"))]
    cases = set.intersection(*(set(s) for s in sessions)) if sessions else set()
    table = {}
    for case in sorted(cases):
        table[case] = {}
        for name in CANDIDATES:
            values = [s[case][name] for s in sessions]
            table[case][name] = statistics.stdev(values) / statistics.mean(values)
    return table


def markdown(tables: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["# Per-job energy split: CV across sessions of each candidate", "",
             "| study | case | " + " | ".join(CANDIDATES) + " |", "|---|---|" + "---|" * len(CANDIDATES)]
    for study, table in tables.items():
        for case, row in table.items():
            lines.append(f"| {study} | {case.split('-')[0]} | " + " | ".join(f"{row[n]:.1%}" for n in CANDIDATES) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="study folders holding session-N.json")
    parser.add_argument("--out", type=Path, help="write the table here (default: print it)")
    args = parser.parse_args(argv)
    text = markdown({folder.name: cv_table(folder) for folder in args.folders})
    if args.out:
        args.out.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
