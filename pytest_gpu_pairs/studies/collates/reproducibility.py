"""Collate the reproducibility study: per case and session the mean, 95 % interval, rounds and device
time of every headline figure, then across sessions the spread of the means (max/min - 1), whether
the intervals agree, and the coefficient of variation of the per-job energy split.

    gpu-pairs study collect reproducibility --out reports/reference/reproducibility

The sessions compared are the pinned ones, ``session-1``, ``session-2``, ... of the study's folder,
each read through the store from its pytest-benchmark JSON (``session-1.json``, as committed) or its
results folder (``session-1/``, as the runner leaves it); the heavy and the unpinned sessions have
questions of their own (the gate, the pinning) and are compared with ``gpu-pairs compare``.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.metrics import energy_per_step
from pytest_gpu_pairs.record.stats import interval
from pytest_gpu_pairs.record.store import load_run

PINNED_SESSION = re.compile(r"session-\d+")

HEADLINE = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "gpu_energy_above_idle_j",
            "fg_gpu_energy_j", "bg_gpu_energy_j", "fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j",
            "energy_saved_vs_serial", "gpu_energy_j")
SPLIT = ("fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j")


def per_step_split(record: dict[str, Any]) -> dict[str, Any]:
    """The per-step energy split of a record written before the record carried it, from its rounds
    exactly as the record now computes it (each round's share over its steps in the pair phase,
    then the mean and 95 % interval over rounds)."""
    record = dict(record)
    for role in ("fg", "bg"):
        key = f"{role}_gpu_energy_per_step_j"
        if record.get(key) is not None or not record.get("rounds"):
            continue
        values = [energy_per_step(r.get(f"{role}_gpu_energy_j"), _steps(r.get(f"{role}_steps_per_s"), r.get("window_s")))
                  for r in record["rounds"]]
        ci = interval(values)
        record[key], record[f"{key}_ci"] = ci.mean, ci.as_list()
        record.setdefault("derived_in_collate", []).append(key)
    return record


def _steps(rate: Any, seconds: Any) -> Any:
    return rate * seconds if rate is not None and seconds is not None else None


def session_entry(record: dict[str, Any]) -> dict[str, Any]:
    record = per_step_split(record)
    figures = {key: {"mean": record.get(key), "ci": record.get(f"{key}_ci")} for key in HEADLINE}
    return {"n_rounds": record.get("n_rounds"), "gpu_seconds": record.get("gpu_seconds"),
            "precision_achieved": record.get("precision_achieved"), "precision_reached": record.get("precision_reached"),
            "stop_reason": record.get("stop_reason"), "warmup_s": record.get("warmup_s"), "failure": record.get("failure"),
            "phase_s": record.get("phase_s"), "derived_in_collate": record.get("derived_in_collate", []),
            "clocks": [{k: r.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "gpu_temp_max_c",
                                               "clock_event_reasons")} for r in record.get("rounds") or []],
            "figures": figures}


def across(sessions: list[dict[str, Any]], key: str) -> dict[str, Any]:
    means = [s["figures"][key]["mean"] for s in sessions if s["figures"][key]["mean"] is not None]
    cis = [s["figures"][key]["ci"] for s in sessions if s["figures"][key]["ci"]]
    out: dict[str, Any] = {"means": means, "spread": None, "cv": None, "intervals_agree": None}
    if len(means) >= 2 and min(means) > 0:
        out["spread"] = max(means) / min(means) - 1
        out["cv"] = statistics.stdev(means) / statistics.fmean(means)
    if len(cis) == len(sessions) and len(cis) >= 2:
        out["intervals_agree"] = max(low for low, _ in cis) <= min(high for _, high in cis)
    return out


def session_paths(folder: Path) -> list[Path]:
    """The pinned sessions in order: the benchmark JSON where there is one, else the results folder."""
    found: dict[str, Path] = {}
    for path in folder.glob("session-*"):
        is_json = path.suffix == ".json"
        name = path.stem if is_json else path.name
        if PINNED_SESSION.fullmatch(name) and (is_json or (path.is_dir() and name not in found)):
            found[name] = path
    return [found[name] for name in sorted(found, key=lambda n: int(n.removeprefix("session-")))]


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    return collate(session_paths(folder))


def table(summary: dict[str, Any]) -> str:
    return markdown(summary)


def collate(paths: list[Path]) -> dict[str, Any]:
    cases: dict[str, dict[str, Any]] = {}
    for path in paths:
        run = load_run(path)
        for case_id, record in sorted(run.records.items()):
            cases.setdefault(case_id, {"sessions": {}})["sessions"][path.stem] = session_entry(record.to_dict())
    for entry in cases.values():
        sessions = list(entry["sessions"].values())
        entry["across_sessions"] = {key: across(sessions, key) for key in HEADLINE}
    return {"study": "reproducibility", "sessions": [p.stem for p in paths], "cases": cases}


def _cell(figure: dict[str, Any], digits: int = 3) -> str:
    mean, ci = figure["mean"], figure["ci"]
    if mean is None:
        return "-"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else f"{mean:.{digits}f}"


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# Reproducibility: the same cases in separate pytest sessions", "",
             "Each cell: mean over the session's interleaved rounds [95 % interval]; n = rounds, s = device seconds "
             "the case held (warm-up included). Spread = max/min - 1 of the session means.", ""]
    for case_id, entry in summary["cases"].items():
        lines += [f"## {case_id}", "", "| session | n | s | efficiency | fg_slowdown | bg_progress | fg J/step | bg J/step | energy saved |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name, s in entry["sessions"].items():
            f = s["figures"]
            gpu_s = f"{s['gpu_seconds']:.0f}" if s["gpu_seconds"] is not None else "-"
            lines.append(f"| {name} | {s['n_rounds']} | {gpu_s} | {_cell(f['concurrency_efficiency'])} | "
                         f"{_cell(f['fg_slowdown'])} | {_cell(f['bg_progress_ratio'])} | {_cell(f['fg_gpu_energy_per_step_j'], 4)} | "
                         f"{_cell(f['bg_gpu_energy_per_step_j'], 3)} | {_cell(f['energy_saved_vs_serial'])} |")
        a = entry["across_sessions"]
        lines += ["", "| figure | spread | CV | intervals agree |", "|---|---|---|---|"]
        for key in ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "fg_gpu_energy_per_step_j",
                    "bg_gpu_energy_per_step_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "energy_saved_vs_serial"):
            x = a[key]
            spread = f"{x['spread']:.1%}" if x["spread"] is not None else "-"
            cv = f"{x['cv']:.1%}" if x["cv"] is not None else "-"
            lines.append(f"| {key} | {spread} | {cv} | {x['intervals_agree']} |")
        lines.append("")
    return "\n".join(lines)
