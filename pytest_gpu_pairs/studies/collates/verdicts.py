"""The verdicts study's summary from its session folders: each pair's memory verdict, whole-run need,
efficiency with its interval over starts, and device time per session; whether the verdicts agree
and the intervals overlap across sessions; and how far the plan's estimate was from the measured time.

    gpu-pairs study collect verdicts --out reports/reference/verdicts

Records are read through the store. The plan is estimated afresh from the same inputs the session
had (the settings, the fit profiles its results folder held before each case: those measured before
the case began), so the error says what the estimator of this commit would have said.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from pydantic import TypeAdapter, ValidationError

from pytest_gpu_pairs.experiment.cases import expand_all
from pytest_gpu_pairs.experiment.load import load_experiment
from pytest_gpu_pairs.planning.estimate import estimate_cases, session_total
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import read_fit_profile, save_fit_profile
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.studies.collates.across_sessions import agreement, records_by_session

SETTINGS = "settings/parallel_feasibility_test.json"
SESSIONS = ("session-1", "session-2", "session-3")
STUDY_PAIRS = ("g01", "g06", "g07", "g09", "g10", "g12")
_SENTENCES = TypeAdapter(list[str])
TARGETS = {"vram_verdict_agreement": 1.0, "vram_peak_spread_max": 0.03, "efficiency_spread_max": 0.03,
           "gpu_s_per_case_median": 90.0, "plan_error_max": 0.10}


def session_records(folder: Path) -> dict[str, dict[str, Record]]:
    """session -> group -> its complete record."""
    return records_by_session(folder, SESSIONS)


def pair_rows(by_session: dict[str, dict[str, Record]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for group in STUDY_PAIRS:
        if not any(group in records for records in by_session.values()):
            continue
        seen = {s: r[group] for s, r in by_session.items() if group in r}
        rows[group] = {
            "case_id": next(iter(seen.values())).case_id if seen else None,
            "sessions": {s: _session_row(r) for s, r in seen.items()},
            **agreement(list(seen.values()))}
    return rows


def _session_row(r: Record) -> dict[str, Any]:
    return {"concurrency_efficiency": r.concurrency_efficiency, "ci": r.concurrency_efficiency_ci,
            "n_rounds": r.n_rounds, "n_starts": r.n_starts, "starts": [s.get("concurrency_efficiency") for s in r.starts or []],
            "between_start_sd": r.between_start_sd, "gpu_seconds": r.gpu_seconds, "case_wall_s": r.case_wall_s,
            "fit_profile_s": r.fit_profile_s, "vram_fit_mb": r.vram_fit_mb, "vram_steady_mb": r.vram_steady_mb,
            "vram_transient_mb": r.vram_transient_mb, "vram_peak_phase": r.vram_peak_phase,
            "vram_verdict": r.vram_verdict, "peak_vram_mb_sampled": r.peak_vram_mb,
            "fg_solo_steps_per_s": r.fg_solo_steps_per_s, "bg_solo_steps_per_s": r.bg_solo_steps_per_s,
            "efficiency_bound": r.efficiency_bound, "stop_reason": r.stop_reason}


def plan_errors(folder: Path, by_session: dict[str, dict[str, Record]], settings: Path) -> dict[str, Any]:
    """Each session's cases estimated in the order they ran, each from the fit profiles measured
    before it began, against their measured case time; the session's total against the sum."""
    profiles = [read_fit_profile(path) for path in sorted(_fit_profiles(folder).glob("*.json"))]
    cases = {c.group: c for c in expand_all([load_experiment(settings)])}
    out: dict[str, Any] = {}
    for session, records in by_session.items():
        timed = [(g, r, timing) for g, r in records.items() if g in STUDY_PAIRS and (timing := _timing(r))]
        ran = sorted(timed, key=lambda entry: entry[2][0])
        estimated, measured = [], []
        for group, _, (began, wall_s) in ran:
            with tempfile.TemporaryDirectory() as tmp:
                for profile in profiles:
                    if _measured_t(profile.measured_at) < began:
                        save_fit_profile(tmp, profile)
                options = GpuPairsOptions(settings=(settings,), device="cuda", scale=1.0, vram_budget_mb=None,
                                          min_efficiency=None, sample_hz=10.0, out_dir=Path(tmp))
                estimated.append(estimate_cases([cases[group]], options, "cuda")[0])
            measured.append(wall_s)
        per_case = [abs(e.seconds - m) / m for e, m in zip(estimated, measured)]
        total_est, total_measured = session_total(estimated, "cuda") - 8.0, sum(measured)
        out[session] = {"cases": [r.case_id for _, r, _ in ran], "estimated_s": [round(e.seconds, 1) for e in estimated],
                        "measured_s": [round(m, 1) for m in measured],
                        "case_error_max": max(per_case) if per_case else None,
                        "session_error": abs(total_est - total_measured) / total_measured if ran else None}
    return out


def _fit_profiles(folder: Path) -> Path:
    """An earlier run of the study, kept in a subfolder, shares the study's profiles."""
    own = folder / "fit-profiles"
    return own if own.is_dir() else folder.parent / "fit-profiles"


def _not_covered(folder: Path) -> list[str]:
    """What a run of the study leaves out is said by whoever ran it, beside its sessions."""
    path = folder / "not_covered.json"
    if not path.is_file():
        return []
    try:
        return _SENTENCES.validate_json(path.read_bytes())
    except ValidationError as exc:
        raise ValueError(f"{path}: $: expected a list of sentences ({exc.errors()[0]['msg']})") from None


def _timing(record: Record) -> Optional[tuple[float, float]]:
    """When the case began and how long it took, or None where its record does not say both."""
    began = (record.timeline or {}).get("case_start_t")
    return None if began is None or not record.case_wall_s else (began, record.case_wall_s)


def _measured_t(stamp: Optional[str]) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z")) if stamp else float("inf")


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    by_session = session_records(folder)
    rows = pair_rows(by_session)
    plans = plan_errors(folder, by_session, root / SETTINGS)
    gpu_s = [r.gpu_seconds for records in by_session.values() for g, r in records.items()
             if g in STUDY_PAIRS and r.gpu_seconds is not None]
    spreads = [row["efficiency_spread"] for row in rows.values() if row["efficiency_spread"] is not None]
    vram = [row["vram_peak_spread"] for row in rows.values() if row["vram_peak_spread"] is not None]
    errors = [p["session_error"] for p in plans.values() if p["session_error"] is not None]
    case_errors = [p["case_error_max"] for p in plans.values() if p["case_error_max"] is not None]
    return {
        "pairs": rows,
        "plan": plans,
        "vram_verdict_agreement": sum(len(row["vram_verdicts"]) == 1 for row in rows.values()) / len(rows),
        "vram_peak_spread_max": max(vram, default=None),
        "interval_overlap_all": all(row["intervals_overlap"] is not False for row in rows.values()),
        "efficiency_spread_max": max(spreads, default=None),
        "gpu_s_per_case_median": statistics.median(gpu_s) if gpu_s else None,
        "plan_error_max": max(errors, default=None),
        "plan_case_error_max": max(case_errors, default=None),
        "targets": TARGETS,
        "sessions_per_pair": {g: row["n_sessions"] for g, row in rows.items()},
        "not_covered": _not_covered(folder)}


def table(summary: dict[str, Any]) -> str:
    lines = ["| pair | session | efficiency [95 % interval] | starts (each start's mean) | device s | "
             "whole-run need MB (steady + transient) | verdict |", "|---|---|---|---|---|---|---|"]
    for group, row in summary["pairs"].items():
        for session, s in row["sessions"].items():
            ci = s["ci"] or [None, None]
            starts = ", ".join(f"{x:.3f}" for x in s["starts"] if x is not None)
            lines.append(f"| {group} | {session[-1]} | {_n(s['concurrency_efficiency'])} [{_n(ci[0])}, {_n(ci[1])}] | "
                         f"{s['n_starts']} ({starts}) | {_n(s['gpu_seconds'], '.0f')} | {_n(s['vram_fit_mb'], '.0f')} "
                         f"({_n(s['vram_steady_mb'], '.0f')} + {_n(s['vram_transient_mb'], '.0f')}: "
                         f"{s['vram_peak_phase']}) | {s['vram_verdict']} |")
    keys = ("vram_verdict_agreement", "vram_peak_spread_max", "interval_overlap_all", "efficiency_spread_max",
            "gpu_s_per_case_median", "plan_error_max")
    lines += ["", "| figure | value | target |", "|---|---|---|"]
    lines += [f"| {k} | {_fmt(summary[k])} | {_fmt(summary['targets'].get(k, True))} |" for k in keys]
    return "\n".join(lines) + "\n"


def _n(value: Any, spec: str = ".3f") -> str:
    """A figure, or "n/a" where none was measured (a GPU figure of a run on the CPU)."""
    return format(value, spec) if isinstance(value, (int, float)) else "n/a"


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
