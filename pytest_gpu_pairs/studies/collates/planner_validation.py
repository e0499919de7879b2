"""The planner study's summary: ``gpu-pairs plan-validate`` on the measured pairs the package carries,
and each pair of the study's own session (``fresh/``, pairs no reference holds) beside what the
planner of this commit predicts for it without it and what the planner said before the session ran
(``plan.json``, written by ``gpu-pairs study run`` before any case).

    gpu-pairs study run planner_validation          # measures settings/planner_fresh.json's pairs on this GPU
    gpu-pairs study collect planner_validation --out reports/reference/planner_validation

Records are read through the store. Without a ``fresh/`` session the summary is the validation alone.
A ``plan.json`` that is not a plan is one line naming the file and the JSON path.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.inputs import SettingsError, read_json
from pytest_gpu_pairs.planning.measured import read_measured, read_reference
from pytest_gpu_pairs.planning.predict import Planner, interval_basis
from pytest_gpu_pairs.planning.profiles import read_profiles
from pytest_gpu_pairs.planning.validate import held_out_row, validate
from pytest_gpu_pairs.planning.validate_command import markdown, shown

FRESH = "fresh"
PLAN = "plan.json"
CARD_MB = 81_559.0


def planned(folder: Path) -> dict[tuple[tuple[str, ...], str], dict[str, Any]]:
    """(pair, mechanism) -> the efficiency figure ``plan.json`` gave before the session ran."""
    path = folder / PLAN
    if not path.exists():
        return {}
    plan = read_json(path)
    pairs = plan.get("pairs") if isinstance(plan, dict) else None
    if not isinstance(pairs, list):
        raise SettingsError(path, "$.pairs", "expected gpu-pairs plan --json's list of pairs")
    found = {}
    for index, row in enumerate(pairs):
        mechanisms = row.get("mechanisms") if isinstance(row, dict) else None
        if not isinstance(mechanisms, dict) or not isinstance(row.get("pair"), list):
            raise SettingsError(path, f"$.pairs[{index}]", "expected a pair and its figures per mechanism")
        for sharing, figures in mechanisms.items():
            figure = figures.get("efficiency") if isinstance(figures, dict) else None
            if not isinstance(figure, dict):
                raise SettingsError(path, f"$.pairs[{index}].mechanisms.{sharing}.efficiency", "expected a figure")
            found[(tuple(sorted(map(str, row["pair"]))), str(sharing))] = figure
    return found


def fresh_pairs(folder: Path, planner: Planner) -> list[dict[str, Any]]:
    """Every pair the study measured, predicted by the planner without it, beside the plan made before the run."""
    if not (folder / FRESH).is_dir():
        return []
    measured, before = read_measured([folder / FRESH]), planned(folder)
    rows = []
    for _, p in sorted(measured.pairs.items()):
        if p.efficiency is None:
            continue
        two = (p.models[0], p.models[1])
        row = held_out_row(p, "pair", planner.without(two).efficiency(two, p.sharing)).as_dict()
        rows.append({**row, "planned_before": before.get((tuple(sorted(two)), p.sharing))})
    return rows


def planned_text(figure: Any) -> str:
    if not figure or not isinstance(figure.get("value"), (int, float)):
        return "-"
    interval = figure.get("interval")
    known = isinstance(interval, list) and len(interval) == 2 and all(isinstance(v, (int, float)) for v in interval)
    bounds = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if known else ""
    return f"{figure['value']:.3f}{bounds}"


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    profiles, reference = read_profiles(), read_reference()
    planner = Planner(profiles, reference.measured)
    return {"profiles": shown(profiles.source), "reference": shown(reference.source), "results": [],
            "interval": interval_basis(planner), **validate(planner, CARD_MB), "fresh": fresh_pairs(folder, planner)}


def table(summary: dict[str, Any]) -> str:
    lines = [markdown(summary)]
    if summary["fresh"]:
        lines += ["## Pairs measured in this study's session, predicted without them", "",
                  "| pair | mechanism | measured [95 %] | predicted [interval] | error | covered | planned before the run |",
                  "|---|---|---|---|---|---|---|"]
        for p in summary["fresh"]:
            interval = f"[{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]" if p["interval"] else "[none estimated]"
            ci = f"[{p['measured_ci'][0]:.3f}, {p['measured_ci'][1]:.3f}]" if p["measured_ci"] else "[-]"
            lines.append(f"| {'+'.join(p['pair'])} | {p['sharing']} | {p['measured']:.3f} {ci} | {p['predicted']:.3f} "
                         f"{interval} | {100 * p['error']:.1f} % | {p['covered']} | {planned_text(p['planned_before'])} |")
        lines.append("")
    return "\n".join(lines)
