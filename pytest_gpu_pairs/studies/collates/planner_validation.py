"""The planner study's summary: ``gpu-pairs plan-validate`` on the measured pairs the package carries,
and each pair of the study's own session (``fresh/``, pairs no reference holds) beside what the
planner predicts for it without it.

    gpu-pairs study run planner_validation          # measures settings/planner_fresh.json's pairs on this GPU
    gpu-pairs study collect planner_validation --out reports/reference/planner_validation

Records are read through the store. Without a ``fresh/`` session the summary is the validation alone.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.planning.measured import read_measured, read_reference
from pytest_gpu_pairs.planning.predict import Planner, interval_basis
from pytest_gpu_pairs.planning.profiles import read_profiles
from pytest_gpu_pairs.planning.validate import HeldOut, validate
from pytest_gpu_pairs.planning.validate_command import markdown, shown

FRESH = "fresh"
CARD_MB = 81_559.0


def fresh_pairs(folder: Path, planner: Planner) -> list[dict[str, Any]]:
    """Every pair the study measured, predicted by the planner without it."""
    if not (folder / FRESH).is_dir():
        return []
    measured = read_measured([folder / FRESH])
    return [HeldOut(p.models, p.sharing, "pair", min(p.efficiency, 2.0), p.efficiency_ci,
                    planner.without((p.models[0], p.models[1])).efficiency((p.models[0], p.models[1]), p.sharing)).as_dict()
            for _, p in sorted(measured.pairs.items()) if p.efficiency is not None]


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    profiles, reference = read_profiles(), read_reference()
    planner = Planner(profiles, reference.measured)
    return {"profiles": shown(profiles.source), "reference": shown(reference.source), "results": [],
            "interval": interval_basis(planner), **validate(planner, CARD_MB), "fresh": fresh_pairs(folder, planner)}


def table(summary: dict[str, Any]) -> str:
    lines = [markdown(summary)]
    if summary["fresh"]:
        lines += ["## Pairs measured in this study's session, predicted without them", "",
                  "| pair | mechanism | measured [95 %] | predicted [interval] | error | covered |", "|---|---|---|---|---|---|"]
        for p in summary["fresh"]:
            interval = f"[{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]" if p["interval"] else "[none estimated]"
            ci = f"[{p['measured_ci'][0]:.3f}, {p['measured_ci'][1]:.3f}]" if p["measured_ci"] else "[-]"
            lines.append(f"| {'+'.join(p['pair'])} | {p['sharing']} | {p['measured']:.3f} {ci} | {p['predicted']:.3f} "
                         f"{interval} | {100 * p['error']:.1f} % | {p['covered']} |")
        lines.append("")
    return "\n".join(lines)
