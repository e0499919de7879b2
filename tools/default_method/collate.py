"""Collate the default-method study: the same cases in several pytest sessions, measured the way a
user gets them (no method option), judged the way a CI gate judges them.

Per case and session: the efficiency with its interval, rounds, device seconds, restarts and the
energy figures; across sessions: the spread of the efficiency means; every pair of sessions
through ``gpu-pairs compare`` with ``--fail gpu_energy_j:5%`` and the per-job shares (a failure
between sessions of one code is a false alarm), and through pytest-benchmark's own
``--benchmark-compare-fail=mean:5%`` check on the statistics it now holds (one value per round);
the heavy session (g01 with its background twice as heavy) must fail both.

    python -m tools.default_method.collate STUDY_FOLDER --out reports/reference/default_method
"""
from __future__ import annotations

import argparse
import itertools
import json
import re
from pathlib import Path
from typing import Any

from pytest_benchmark.utils import parse_compare_fail

from pytest_gpu_pairs.analysis.compare import compare_runs, parse_thresholds, refusal
from pytest_gpu_pairs.plugin.summary import energy_vs_serial
from pytest_gpu_pairs.record.store import load_run
from tools.summary_files import write_collated

ENERGY_GATE = "gpu_energy_j:5%,fg_gpu_energy_j:5%,bg_gpu_energy_j:5%"
BENCHMARK_GATE = "mean:5%"
FINITE_SCRIPT_GROUPS = ("c01", "c02", "c03", "c04")
EFFICIENCY_SPREAD_LIMIT = 0.05


def session_name(path: Path) -> str:
    return path.stem.removeprefix("session-")


def gpu_of(folder: Path, session: str) -> str:
    path = folder / f"session-{session}.gpu.txt"
    return path.read_text(encoding="utf-8").strip() if path.exists() else ""


def case_entry(record: dict[str, Any], bench: dict[str, Any]) -> dict[str, Any]:
    ratio = energy_vs_serial(record)
    return {"failure": record.get("failure"), "efficiency": record.get("concurrency_efficiency"),
            "efficiency_ci": record.get("concurrency_efficiency_ci"), "n_rounds": record.get("n_rounds"),
            "rounds_excluded": record.get("rounds_excluded"), "precision_target": record.get("precision_target"),
            "precision_achieved": record.get("precision_achieved"),
            "precision_reached": record.get("precision_reached"), "stop_reason": record.get("stop_reason"),
            "gpu_seconds": record.get("gpu_seconds"), "case_wall_s": record.get("case_wall_s"),
            "warmup_s": record.get("warmup_s"), "phase_s": record.get("phase_s"),
            "fg_restarts": record.get("fg_restarts"), "bg_restarts": record.get("bg_restarts"),
            "rounds_discarded": record.get("rounds_discarded"),
            "fg_progress_source": record.get("fg_progress_source"), "bg_progress_source": record.get("bg_progress_source"),
            "gpu_energy_j": record.get("gpu_energy_j"), "gpu_energy_j_ci": record.get("gpu_energy_j_ci"),
            "energy_vs_serial": ratio["energy_vs_serial"], "energy_vs_serial_ci": ratio["energy_vs_serial_ci"],
            "fg_gpu_energy_per_step_j": record.get("fg_gpu_energy_per_step_j"),
            "bg_gpu_energy_per_step_j": record.get("bg_gpu_energy_per_step_j"),
            "fg_solo_steps_per_s": record.get("fg_solo_steps_per_s"), "bg_solo_steps_per_s": record.get("bg_solo_steps_per_s"),
            "fg_solo_gpu_busy": record.get("fg_solo_gpu_busy"), "bg_solo_gpu_busy": record.get("bg_solo_gpu_busy"),
            "pair_gpu_busy": record.get("pair_gpu_busy"), "efficiency_bound": record.get("efficiency_bound"),
            "efficiency_bound_std": record.get("efficiency_bound_std"),
            "sm_clock_mhz": sorted({r.get("sm_clock_mhz") and round(r["sm_clock_mhz"]) for r in record.get("rounds") or []} - {None}),
            "clock_event_reasons": sorted({reason for r in record.get("rounds") or [] for reason in r.get("clock_event_reasons") or []}),
            "benchmark": {k: (bench.get("stats") or {}).get(k) for k in ("rounds", "mean", "stddev", "min", "max")}}


def benchmark_stats(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {b["extra_info"]["case_id"]: b for b in data.get("benchmarks", []) if b.get("extra_info", {}).get("case_id")}


def energy_gate(base: Path, new: Path, cases: list[str]) -> dict[str, Any]:
    """``gpu-pairs compare BASE NEW --fail ENERGY_GATE`` over the cases both hold."""
    base_run, new_run = load_run(base), load_run(new)
    comparison = compare_runs(base_run, new_run, parse_thresholds(ENERGY_GATE), expected=cases)
    rows = [{"case_id": r.case_id, "metric": r.metric, "change": r.change, "status": r.status, "reason": r.reason}
            for r in comparison.rows]
    return {"base": base.name, "new": new.name, "refused": refusal(base_run, new_run), "failed": comparison.failed,
            "regressions": [f"{r.case_id} {r.metric}" for r in comparison.regressions], "rows": rows}


def benchmark_gate(base: dict[str, dict], new: dict[str, dict], cases: list[str]) -> dict[str, Any]:
    """pytest-benchmark's own ``--benchmark-compare-fail=mean:5%`` check on each shared case."""
    check = parse_compare_fail(BENCHMARK_GATE)
    verdicts = {}
    for case in cases:
        if case in base and case in new:
            failure = check.fails(new[case]["stats"], base[case]["stats"])
            verdicts[case] = {"change": new[case]["stats"]["mean"] / base[case]["stats"]["mean"] - 1, "fails": failure}
    return {"failed": any(v["fails"] for v in verdicts.values()), "cases": verdicts}


def in_session_benchmark_compare(folder: Path, session: str) -> dict[str, Any]:
    """What the session's own ``--benchmark-compare-fail`` said, read from its pytest output; a
    session on another machine has no earlier run to compare with (``compared`` false)."""
    path = folder / f"session-{session}.pytest.txt"
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    code = re.search(r"pytest exit code: (\d+)", text)
    return {"compared": "Comparing against benchmarks from" in text, "regressed": "Performance has regressed" in text,
            "exit_code": int(code.group(1)) if code else None}


def collate(folder: Path) -> dict[str, Any]:
    paths = sorted(p for p in folder.glob("session-*.json"))
    sessions = [session_name(p) for p in paths if session_name(p) != "heavy"]
    runs = {session_name(p): load_run(p).records for p in paths}
    benches = {session_name(p): benchmark_stats(p) for p in paths}
    cases = sorted(set.intersection(*(set(runs[s]) for s in sessions))) if sessions else []
    per_case = {case: {s: case_entry(runs[s][case], benches[s].get(case, {})) for s in sessions} for case in cases}
    in_some = sorted(set().union(*(set(runs[s]) for s in sessions)) - set(cases)) if sessions else []
    spreads = {}
    for case, by_session in per_case.items():
        means = [e["efficiency"] for e in by_session.values() if e["efficiency"] is not None]
        spreads[case] = max(means) / min(means) - 1 if len(means) == len(by_session) and means else None
    pairs = list(itertools.combinations(sessions, 2))
    energy = [energy_gate(folder / f"session-{a}.json", folder / f"session-{b}.json", cases) for a, b in pairs]
    bench = {f"{a} vs {b}": benchmark_gate(benches[a], benches[b], cases) for a, b in pairs}
    summary: dict[str, Any] = {
        "sessions": {s: {"gpu": gpu_of(folder, s)} for s in sessions + (["heavy"] if "heavy" in runs else [])},
        "cases": per_case, "efficiency_spread": spreads,
        "cases_in_some_sessions": {case: {s: case_entry(runs[s][case], benches[s].get(case, {}))
                                          for s in sessions if case in runs[s]} for case in in_some},
        "efficiency_spread_max": max((v for v in spreads.values() if v is not None), default=None),
        "efficiency_spread_limit": EFFICIENCY_SPREAD_LIMIT,
        "energy_gate": ENERGY_GATE, "energy_gate_between_sessions": energy,
        "energy_gate_false_alarms": sum(1 for e in energy if e["failed"]),
        "benchmark_gate": BENCHMARK_GATE, "benchmark_gate_between_sessions": bench,
        "finite_script_cases": {case: {s: e["failure"] is None and e["efficiency_ci"] is not None
                                       and bool((e["fg_restarts"] or 0) + (e["bg_restarts"] or 0))
                                       for s, e in by_session.items()}
                                for case, by_session in per_case.items() if case.split("-")[0] in FINITE_SCRIPT_GROUPS},
    }
    summary["finite_script_cases_passed"] = sum(ok for by_session in summary["finite_script_cases"].values()
                                                for ok in by_session.values())
    summary["finite_script_case_sessions"] = sum(len(v) for v in summary["finite_script_cases"].values())
    if "heavy" in runs and sessions:
        heavy_cases = sorted(runs["heavy"])
        heavy_energy = energy_gate(folder / f"session-{sessions[0]}.json", folder / "session-heavy.json", heavy_cases)
        heavy_bench = benchmark_gate(benches[sessions[0]], benches["heavy"], heavy_cases)
        summary["heavy"] = {"energy_gate": heavy_energy, "benchmark_gate": heavy_bench,
                            "in_session_benchmark_compare": in_session_benchmark_compare(folder, "heavy"),
                            "efficiency": {c: runs["heavy"][c].get("concurrency_efficiency") for c in heavy_cases}}
        summary["energy_gate_catches_heavy"] = any(r["metric"] == "gpu_energy_j" and r["status"] == "REGRESSION"
                                                   for r in heavy_energy["rows"])
        summary["benchmark_compare_fail_ok"] = (not any(b["failed"] for b in bench.values())) and heavy_bench["failed"]
    summary["in_session_benchmark_compare"] = {s: in_session_benchmark_compare(folder, s) for s in sessions[1:]}
    return summary


def _interval(ci: Any) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) and len(ci) == 2 else "-"


def _busy(e: dict[str, Any]) -> str:
    values = [e.get(k) for k in ("fg_solo_gpu_busy", "bg_solo_gpu_busy", "pair_gpu_busy")]
    if any(v is None for v in values) or e.get("efficiency_bound") is None:
        return "-"
    return " / ".join(f"{v:.2f}" for v in values) + f" ({e['efficiency_bound']:.2f})"


def _case_rows(cases: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    lines = ["| case | session | efficiency [95 % interval] | rounds (excluded) | device s | restarts fg/bg | "
             "E/serial [95 %] | pytest-benchmark mean ± sd (rounds) | card busy fg / bg / pair (bound) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case, by_session in cases.items():
        for session, e in by_session.items():
            b = e["benchmark"]
            bench = f"{b['mean']:.4f} ± {b['stddev']:.4f} ({b['rounds']})" if b.get("mean") else "-"
            eff = f"{e['efficiency']:.3f} {_interval(e['efficiency_ci'])}" if e["efficiency"] else f"- ({e['failure']})"
            ratio = f"{e['energy_vs_serial']:.3f} {_interval(e['energy_vs_serial_ci'])}" if e["energy_vs_serial"] else "-"
            lines.append(f"| {case.split('-')[0]} | {session} | {eff} | {e['n_rounds']} ({e['rounds_excluded']}) | "
                         f"{e['gpu_seconds'] or 0:.0f} | {e['fg_restarts']}/{e['bg_restarts']} | {ratio} | {bench} | "
                         f"{_busy(e)} |")
    return lines


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# Default method: the same cases in separate sessions", "", *_case_rows(summary["cases"])]
    if summary.get("cases_in_some_sessions"):
        lines += ["", "Measured in some sessions only (not in the figures below):", "",
                  *_case_rows(summary["cases_in_some_sessions"])]
    lines += ["", "- efficiency spread across sessions (max/min - 1): "
              + ", ".join(f"{c.split('-')[0]} {v:.1%}" for c, v in summary["efficiency_spread"].items() if v is not None)
              + f"; largest {summary['efficiency_spread_max']:.1%}" if summary["efficiency_spread_max"] is not None else "",
              f"- energy gate `{summary['energy_gate']}` between sessions: {summary['energy_gate_false_alarms']} false "
              f"alarm(s) in {len(summary['energy_gate_between_sessions'])} pair(s)",
              f"- finite-script case-sessions passed with restarts: {summary['finite_script_cases_passed']} of "
              f"{summary['finite_script_case_sessions']}"]
    if "heavy" in summary:
        lines += [f"- heavy session caught by the energy gate: {summary['energy_gate_catches_heavy']}; "
                  f"--benchmark-compare-fail={summary['benchmark_gate']} passes between sessions and fails against "
                  f"the heavy one: {summary['benchmark_compare_fail_ok']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the study folder: session-N.json, session-N.gpu.txt, session-N.pytest.txt")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return write_collated(lambda: collate(args.folder), markdown, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
