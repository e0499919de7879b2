"""The feasibility study's history: the 12 groups measured first with interleaved rounds, time-sliced
and under MPS with 52 % of the SMs per job, against the peak VRAM sampled while both jobs trained.

Per group of ``settings/parallel_feasibility_test.json``: fit or out of memory, the pair's peak
VRAM (NVML per-process memory of both jobs, CUDA contexts included) against the 7500 MB budget, the
concurrency efficiency and the energy saved against serial, each with its 95 % interval and rounds,
the same under MPS with 52 % of the SMs per job (the RTX 3080's 68 of the H100's 132), the
planner's prediction, and the predecessor's own foreground slowdown on its RTX 3080 for the pair.
These are committed figures: the default-method sessions (``feasibility_10g.py``) replaced them as
the study's answer, and this module keeps them as they were.

An efficiency whose reading is above 2, the bound no sharing can pass, is not printed as a figure:
the table says "about 2" and the summary keeps the reading beside the investigation's numbers.
The planner's prediction is the study folder's ``plan.json`` (``gpu-pairs plan
settings/parallel_feasibility_test.json --gpu-memory-mb 10240 --json``), and a folder without one
(a run on the CPU) has no planner column.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.inputs import read_json
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import case_records, load_result, read_session
from pytest_gpu_pairs.studies.collates import rtx3080

SETTINGS = "settings/parallel_feasibility_test.json"
PREDECESSOR = rtx3080.PREDECESSOR
TIMESLICE_FOLDERS = ("session-1", "session-2")
MPS_FOLDER = "mps"
RECHECK_FOLDERS = ("phase2", "g01-repeat")
BOUND = 2.0


def _records(folder: Path) -> dict[str, tuple[Record, str]]:
    """group -> its complete record and the folder it lies in, relative to the study's."""
    out = {}
    found, _ = case_records(folder) if folder.is_dir() else ([], [])
    for path, record in sorted(found, key=lambda pair: str(pair[0])):
        if record.complete and record.case_id and path.parent.name.startswith("g"):
            out[record.case_id[:3]] = (record, str(path.parent.relative_to(folder.parent)))
    return out


def _interval(record: Record, key: str) -> Optional[list[float]]:
    ci = record.get(f"{key}_ci")
    return [float(ci[0]), float(ci[1])] if isinstance(ci, (list, tuple)) and None not in ci else None


def _figure(record: Record, key: str) -> dict[str, Any]:
    return {"value": record.get(key), "ci95": _interval(record, key)}


def _efficiency(record: Record) -> dict[str, Any]:
    figure = _figure(record, "concurrency_efficiency")
    value, ci = figure["value"], figure["ci95"]
    figure["above_bound"] = value is not None and value > BOUND
    figure["interval_above_bound"] = ci is not None and ci[0] > BOUND
    return figure


def _measurement(found: Optional[tuple[Record, str]]) -> Optional[dict[str, Any]]:
    if found is None:
        return None
    record, folder = found
    peak, budget = record.get("peak_vram_mb"), record.get("vram_budget_mb")
    return {
        "case_id": record.case_id, "record": folder, "sharing": record.get("sharing"),
        "fit": "out of memory" if record.get("oom") else "fits" if peak is not None else "not measured",
        "peak_vram_mb": peak, "vram_budget_mb": budget,
        "within_budget": None if peak is None or budget is None else peak <= budget,
        "efficiency": _efficiency(record), "fg_slowdown": _figure(record, "fg_slowdown"),
        "bg_progress_ratio": _figure(record, "bg_progress_ratio"),
        "energy_saved_vs_serial": _figure(record, "energy_saved_vs_serial"),
        "rounds": record.get("n_rounds"), "rounds_excluded": record.get("rounds_excluded"),
        "warmup_s": record.get("warmup_s"), "phase_s": record.get("phase_s"),
        "precision_achieved": record.get("precision_achieved"), "stop_reason": record.get("stop_reason"),
    }


def _planner(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for row in plan["pairs"]:
        timeslice = row["mechanisms"]["timeslice"]
        for group in row.get("groups", []):
            out[group] = {"fit": row["fit"]["verdict"], "need_mb": row["fit"].get("need_mb"),
                          "fit_basis": row["fit"].get("basis"),
                          "efficiency": timeslice["efficiency"]["value"],
                          "efficiency_interval": timeslice["efficiency"]["interval"],
                          "energy_saved": timeslice["energy_saved"]["value"],
                          "basis": timeslice["efficiency"]["basis"], "use": row.get("use")}
    return out


def _rechecks(folder: Path) -> list[dict[str, Any]]:
    """The readings above 2 measured again, on other machines and with longer phases: each recheck
    folder's ``summary.csv`` (one of them kept that table and not its records), each row's phase
    length from its record where the folder holds one. A study folder without them adds none."""
    import pandas as pd

    out = []
    for name in RECHECK_FOLDERS:
        if not (folder / name / "summary.csv").is_file():
            continue
        session = read_session(folder / name) or {}
        gpu = (session.get("gpu") or {}).get("uuid")
        for row in pd.read_csv(folder / name / "summary.csv").itertuples():
            record = load_result(folder / name / row.case_id) if (folder / name / row.case_id).is_dir() else None
            out.append({"group": row.case_id[:3], "folder": name, "phase_s": record.phase_s if record else 0.5,
                        "gpu": gpu, "efficiency": row.concurrency_efficiency,
                        "ci95": [row.concurrency_efficiency_ci_low, row.concurrency_efficiency_ci_high]})
    return out


def collate(folder: Path, plan: dict[str, Any], settings: dict[str, Any], predecessor: Path) -> dict[str, Any]:
    timeslice: dict[str, tuple[Record, str]] = {}
    for name in TIMESLICE_FOLDERS:
        timeslice.update(_records(folder / name))
    mps = _records(folder / MPS_FOLDER)
    planner = _planner(plan)
    slowdowns = rtx3080.slowdowns(predecessor)
    groups = []
    for pair in settings["pairs"]:
        group, fg, bg = pair["group"], pair["foreground"]["model"], pair["background"]["model"]
        groups.append({"group": group, "foreground": fg, "background": bg,
                       "timeslice": _measurement(timeslice.get(group)), "mps_52pct": _measurement(mps.get(group)),
                       "planner": planner.get(group), "predecessor": rtx3080.pair_slowdown(slowdowns, fg, bg)})
    return {"card_mb": 10240, "vram_budget_mb": 7500, "method": "interleaved", "groups": groups,
            "rechecks_above_bound": _rechecks(folder),
            "measured": {"timeslice": sum(g["timeslice"] is not None for g in groups),
                         "mps_52pct": sum(g["mps_52pct"] is not None for g in groups)}}


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    """The history's figures from the study folder, its ``plan.json`` and the predecessor's table."""
    plan = read_json(folder / "plan.json") if (folder / "plan.json").exists() else {"pairs": []}
    return collate(folder, plan, read_json(root / SETTINGS), root / PREDECESSOR)


def _num(value: Optional[float], digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _eff_cell(m: Optional[dict[str, Any]]) -> str:
    if m is None:
        return "not measured"
    eff = m["efficiency"]
    ci = eff["ci95"] or [None, None]
    figure = f"{_num(eff['value'])} [{_num(ci[0])}, {_num(ci[1])}] ({m['rounds']} r)"
    return f"about 2 (read {figure}, above the bound)" if eff["above_bound"] else figure


def _saved_cell(m: Optional[dict[str, Any]]) -> str:
    if m is None:
        return "–"
    saved = m["energy_saved_vs_serial"]
    ci = saved["ci95"]
    if saved["value"] is None:
        return "–"
    return f"{100 * saved['value']:.0f} %" + (f" [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]" if ci else "")


def _slow_cell(m: Optional[dict[str, Any]]) -> str:
    if m is None:
        return "–"
    ci = m["fg_slowdown"]["ci95"] or [None, None]
    return f"{_num(m['fg_slowdown']['value'])} [{_num(ci[0])}, {_num(ci[1])}]"


def _verdict(m: Optional[dict[str, Any]]) -> str:
    if m is None:
        return "not measured"
    if m["peak_vram_mb"] is None:
        return f"{m['fit']} (no peak VRAM)"
    budget = "within" if m["within_budget"] else "over"
    return f"{m['fit']}, {m['peak_vram_mb']:.0f} MB ({budget} 7500)"


def _planner_cell(p: Optional[dict[str, Any]]) -> str:
    if p is None:
        return "–"
    lo, hi = p["efficiency_interval"]
    interval = "no interval" if lo is None or hi is None else f"[{_num(lo)}, {_num(hi)}]"
    return f"{p['fit']}; {_num(p['efficiency'])} {interval}"


def markdown(result: dict[str, Any]) -> str:
    head = ("| group | pair (fg + bg) | fit, peak VRAM | efficiency [95 %] | energy saved [95 %] | "
            "fg slowdown [95 %] | MPS 52 %: efficiency | MPS 52 %: fg slowdown | planner: fit; efficiency | "
            "predecessor RTX 3080: fg slowdown |")
    lines = [head, "|" + " --- |" * 10]
    for g in result["groups"]:
        t, m = g["timeslice"], g["mps_52pct"]
        lines.append(f"| {g['group']} | {g['foreground']} + {g['background']} | {_verdict(t)} | {_eff_cell(t)} | "
                     f"{_saved_cell(t)} | {_slow_cell(t)} | {_eff_cell(m)} | {_slow_cell(m)} | "
                     f"{_planner_cell(g['planner'])} | {rtx3080.cell(g['predecessor'])} |")
    return "\n".join(lines) + "\n"
