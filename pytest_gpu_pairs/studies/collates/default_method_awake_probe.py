"""The awake probe: does a host-bound job step faster while another process keeps the card a little
busy? Each light foreground of the default-method study runs beside a keeper (one small matmul every
5 ms, no memory held), with the default method; a foreground slowdown whose interval lies wholly
below 1 would be the effect that makes light pairs read efficiencies above 2.

    gpu-pairs study collect default_method_awake_probe --out reports/reference/default_method/awake-probe

The committed probe keeps its session's benchmark JSON (``awake.json``) and the card (``awake.gpu.txt``);
a folder ``gpu-pairs study run`` made holds the session's results folder ``awake/``, the card in its
records.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import Run, StoreError, load_run
from pytest_gpu_pairs.studies.collates.default_method import card_of

FIGURES = ("fg_model", "bg_model", "failure", "n_rounds", "fg_solo_steps_per_s", "fg_solo_gpu_busy", "pair_gpu_busy",
           "fg_slowdown", "fg_slowdown_ci", "bg_progress_ratio", "concurrency_efficiency",
           "concurrency_efficiency_ci")


def probe_run(folder: Path) -> Run:
    for path in (folder / "awake.json", folder / "awake"):
        if path.exists():
            return load_run(path)
    raise StoreError(f"{folder}: no awake.json and no awake/ results folder: not an awake probe")


def gpu_of(folder: Path, run: Run) -> str:
    path = folder / "awake.gpu.txt"
    return path.read_text(encoding="utf-8").strip() if path.exists() else card_of(run.machine)


def faster(record: Record) -> bool:
    """The foreground stepped faster beside the keeper than alone, beyond its interval."""
    ci = record.get("fg_slowdown_ci")
    return isinstance(ci, list) and len(ci) == 2 and ci[1] is not None and ci[1] < 1.0


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    run = probe_run(folder)
    cases = {case_id: {key: record.get(key) for key in FIGURES} for case_id, record in sorted(run.records.items())}
    return {"gpu": gpu_of(folder, run), "cases": cases,
            "faster_beside_the_keeper": sorted(c for c, r in run.records.items() if faster(r))}


def interval_cell(ci: Any) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) and len(ci) == 2 and None not in ci else "-"


def number_cell(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(summary: dict[str, Any]) -> str:
    lines = ["# Awake probe: each light foreground beside a keeper of the card", "", f"GPU: {summary['gpu']}", "",
             "| case | rounds | fg alone steps/s | fg busy alone / pair busy | `fg_slowdown` [95 %] | efficiency [95 %] |",
             "|---|---|---|---|---|---|"]
    for case_id, c in summary["cases"].items():
        slowdown = f"{number_cell(c['fg_slowdown'], '.3f')} {interval_cell(c['fg_slowdown_ci'])}"
        efficiency = f"{number_cell(c['concurrency_efficiency'], '.3f')} {interval_cell(c['concurrency_efficiency_ci'])}"
        lines.append(f"| {case_id.split('-')[0]} {c['fg_model']} + {c['bg_model']} | {number_cell(c['n_rounds'], 'd')} | "
                     f"{number_cell(c['fg_solo_steps_per_s'], '.0f')} | {number_cell(c['fg_solo_gpu_busy'], '.2f')} / "
                     f"{number_cell(c['pair_gpu_busy'], '.2f')} | {slowdown} | {efficiency} |")
    found = summary["faster_beside_the_keeper"]
    lines += ["", "Stepped faster beside the keeper, beyond the interval: "
              + (", ".join(c.split("-")[0] for c in found) if found else "none") + "."]
    return "\n".join(lines) + "\n"
