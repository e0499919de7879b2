"""The host study's summary: four pairs, each beside three predictions: the package table's (which never
reads the host), the plan made before the run from the study's profile step on that host and GPU
(``plan.json``: ``gpu-pairs plan --out <profiled>``; ``before/<session>/plan.json`` where each mechanism
ran on a GPU of its own), and the prediction from the busy fractions the pairs' own solo phases read
there. The last two differ only in where the busy fractions come from: a short steady profile before
the run, or the cases' half-second solo phases; the model learnt from the reference pairs is the same
and never saw these pairs.

    gpu-pairs study run planner_validation_host
    gpu-pairs study collect planner_validation_host --out reports/reference/planner_validation/host
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.planning.measured import read_measured
from pytest_gpu_pairs.planning.validate import held_out_row
from pytest_gpu_pairs.studies.collates import planner_validation_unseen

FOLDERS = planner_validation_unseen.FOLDERS


def _from_solo_phases(folder: Path, gpu: Optional[str]) -> list[dict[str, Any]]:
    planner = planner_validation_unseen.planner_for(gpu)
    if planner is None or not (folder / "session.json").exists():
        return []
    rows = []
    for (models, sharing), pair in sorted(read_measured([folder]).pairs.items()):
        if pair.efficiency is None:
            continue
        figure = planner.efficiency_from_busy((models[0], models[1]), sharing, dict(pair.solo_busy))
        table = {m: p.busy for m in models if (p := planner.solo.get(m)) is not None}
        rows.append({**held_out_row(pair, "pair", figure).as_dict(), "busy_here": dict(pair.solo_busy),
                     "busy_table": table})
    return rows


def _errors(rows: list[dict[str, Any]]) -> dict[str, Any]:
    found = [r["error"] for r in rows if r["error"] is not None]
    return {"n": len(found), "median_error": statistics.median(found) if found else None,
            "max_error": max(found) if found else None,
            "covered": sum(1 for r in rows if r["covered"])}


def _planned_errors(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``_errors`` of the plans made before the run, where a plan named the pair."""
    found = []
    for r in rows:
        figure = r["planned_before"] or {}
        value, interval = figure.get("value"), figure.get("interval")
        if isinstance(value, (int, float)) and r["measured"]:
            bounds = interval if isinstance(interval, list) and len(interval) == 2 else [None, None]
            low, high = (b if isinstance(b, (int, float)) else None for b in bounds)
            found.append({"error": abs(value - r["measured"]) / r["measured"],
                          "covered": low is not None and high is not None and low <= r["measured"] <= high})
    return _errors(found)


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    summary = planner_validation_unseen.summarize(folder, root)
    gpus = {r["sharing"]: r["gpu"] for r in summary["measured"]}
    here = [row for name in FOLDERS for row in _from_solo_phases(folder / name, gpus.get(name))]
    table_rows = summary["measured"]
    summary["from_busy_here"] = here
    summary["by_mechanism"] = {m: {"table": _errors([r for r in table_rows if r["sharing"] == m]),
                                   "planned": _planned_errors([r for r in table_rows if r["sharing"] == m]),
                                   "busy_here": _errors([r for r in here if r["sharing"] == m])}
                               for m in sorted({r["sharing"] for r in table_rows})}
    return summary


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def table(summary: dict[str, Any]) -> str:
    lines = [planner_validation_unseen.table(summary, title="Four pairs planned from this host's profiles",
                                             study="planner_validation_host"), "",
             "## From the busy fractions read on this host (the pairs' own solo phases)", "",
             "| pair | mechanism | busy here (table) | measured | predicted [90 %] | error | covered |",
             "|---|---|---|---|---|---|---|"]
    for r in summary.get("from_busy_here", []):
        busy = ", ".join(f"{m} {b:.2f} ({r['busy_table'].get(m, float('nan')):.2f})" for m, b in sorted(r["busy_here"].items()))
        interval = f" [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}]" if r["interval"] else ""
        predicted = "-" if r["predicted"] is None else f"{r['predicted']:.3f}{interval}"
        lines.append(f"| {'+'.join(r['pair'])} | {r['sharing']} | {busy} | {r['measured']:.3f} | {predicted} | "
                     f"{_percent(r['error'])} | {r['covered']} |")
    lines += ["", "| mechanism | from | n | median error | worst | inside 90 % |", "|---|---|---|---|---|---|"]
    for mechanism, by in summary.get("by_mechanism", {}).items():
        for source, label in (("table", "the package's table"), ("planned", "this host's profile, before the run"),
                              ("busy_here", "the pairs' solo phases")):
            e = by[source]
            lines.append(f"| {mechanism} | {label} | {e['n']} | {_percent(e['median_error'])} | "
                         f"{_percent(e['max_error'])} | {e['covered']} of {e['n']} |")
    return "\n".join(lines) + "\n"
