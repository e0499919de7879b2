"""One summary of the default method's evidence, gathered from several collated studies: a study
re-measures only the cases a change of the default concerns, so each case's spread across
sessions comes from the newest study that measured it in every session, and says which study
and precision target that was; the gates count every pair of sessions of every study.

    python -m tools.default_method.combine NEWEST_STUDY OLDER_STUDY ... --out reports/reference/default_method
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.store import StoreError
from pytest_gpu_pairs.run.options import DEFAULT_PRECISION
from tools.summary_files import write_collated


def load_summary(folder: Path) -> dict[str, Any]:
    path = folder / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: not a collated study summary ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("cases"), dict):
        raise StoreError(f"{path}: $.cases: expected an object of cases, as tools.default_method.collate writes")
    return summary


def study_target(case_sessions: dict[str, dict[str, Any]]) -> float | None:
    targets = [e.get("precision_target") for e in case_sessions.values() if e.get("precision_target") is not None]
    return statistics.median(targets) if targets else None


def case_evidence(studies: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each case from the first (newest) study whose spread covers it."""
    chosen: dict[str, dict[str, Any]] = {}
    for name, summary in studies:
        for case, spread in summary.get("efficiency_spread", {}).items():
            if case in chosen or spread is None:
                continue
            sessions = summary["cases"][case]
            chosen[case] = {"study": name, "precision_target": study_target(sessions), "spread": spread,
                            "sessions": {s: {k: e.get(k) for k in ("efficiency", "efficiency_ci", "n_rounds",
                                                                   "precision_achieved", "stop_reason")}
                                         for s, e in sessions.items()},
                            "gpus": sorted({summary["sessions"].get(s, {}).get("gpu", "") for s in sessions})}
    return chosen


def all_of(studies: list[tuple[str, dict[str, Any]]], key: str) -> bool | None:
    """True when every study that could judge ``key`` said so; None when none could."""
    verdicts = [summary[key] for _, summary in studies if summary.get(key) is not None]
    return all(verdicts) if verdicts else None


def combine(folders: list[Path]) -> dict[str, Any]:
    studies = [(folder.name, load_summary(folder)) for folder in folders]
    cases = case_evidence(studies)
    spreads = {case: e["spread"] for case, e in sorted(cases.items())}
    return {
        "studies": [name for name, _ in studies],
        "current_precision_target": DEFAULT_PRECISION,
        "cases": dict(sorted(cases.items())),
        "efficiency_spread": spreads,
        "efficiency_spread_max": max(spreads.values(), default=None),
        "efficiency_spread_limit": studies[0][1].get("efficiency_spread_limit") if studies else None,
        "cases_not_at_current_target": sorted(c for c, e in cases.items() if e["precision_target"] != DEFAULT_PRECISION),
        "energy_gate_false_alarms": sum(s.get("energy_gate_false_alarms", 0) for _, s in studies),
        "energy_gate_session_pairs": sum(len(s.get("energy_gate_between_sessions", [])) for _, s in studies),
        "energy_gate_catches_heavy": all_of(studies, "energy_gate_catches_heavy"),
        "benchmark_compare_fail_ok": all_of(studies, "benchmark_compare_fail_ok"),
        "finite_script_cases_passed": sum(s.get("finite_script_cases_passed", 0) for _, s in studies),
        "finite_script_case_sessions": sum(s.get("finite_script_case_sessions", 0) for _, s in studies),
    }


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# The default method's evidence, case by case", "",
             f"Default precision now ±{summary['current_precision_target'] * 100:g} %; each case from the newest study "
             "that measured it in every session.", "",
             "| case | study | target | efficiency per session [95 % interval] | spread |", "|---|---|---|---|---|"]
    for case, e in summary["cases"].items():
        per_session = "; ".join(f"{s}: {v['efficiency']:.3f} [{v['efficiency_ci'][0]:.3f}, {v['efficiency_ci'][1]:.3f}]"
                                for s, v in e["sessions"].items() if v["efficiency_ci"])
        target = f"±{e['precision_target'] * 100:g} %" if e["precision_target"] is not None else "-"
        lines.append(f"| {case.split('-')[0]} | {e['study']} | {target} | {per_session} | {e['spread']:.1%} |")
    lines += ["", f"- largest spread {summary['efficiency_spread_max']:.1%} (limit {summary['efficiency_spread_limit'] * 100:g} %); "
              f"not measured at the current target: {', '.join(c.split('-')[0] for c in summary['cases_not_at_current_target']) or 'none'}",
              f"- energy gate false alarms: {summary['energy_gate_false_alarms']} in {summary['energy_gate_session_pairs']} "
              f"session pair(s); heavy caught: {summary['energy_gate_catches_heavy']}; "
              f"--benchmark-compare-fail ok: {summary['benchmark_compare_fail_ok']}",
              f"- finite-script case-sessions passed: {summary['finite_script_cases_passed']} of "
              f"{summary['finite_script_case_sessions']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="collated study folders, newest first")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return write_collated(lambda: combine(args.folders), markdown, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
