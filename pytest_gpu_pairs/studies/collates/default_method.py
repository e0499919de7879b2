"""The default-method study: the same cases in several pytest sessions, measured the way a user
gets them (no method option), judged the way a CI gate judges them; and one summary gathered from
several such studies.

Per study, per case and session: the efficiency with its interval, rounds, device seconds, restarts
and the energy figures; across sessions: the spread of the efficiency means; every pair of sessions
through ``gpu-pairs compare`` with ``--fail gpu_energy_j:5%`` and the per-job shares (a failure
between sessions of one code is a false alarm), and through pytest-benchmark's own
``--benchmark-compare-fail=mean:5%`` check on the statistics it holds (one value per round); the
heavy session (g01 with its background twice as heavy) must fail both.

A study re-measures only the cases a change of the default concerns, so the summary takes each
case's spread from the newest study that measured it in every session, says which study and
precision target that was, and counts the gates over every pair of sessions of every study.

    gpu-pairs study collect default_method --out reports/reference/default_method

The committed folder holds several studies (their sub-folders, newest first in ``STUDIES``); a
folder ``gpu-pairs study run default_method`` made is one study, its sessions in ``session-*/``.
Runs are read through the store: a session's benchmark JSON (``session-1.json``) or its results
folder (``session-1/``, with the pytest-benchmark JSON the runner saved in it).
"""
from __future__ import annotations

import itertools
import json
import re
import statistics
from pathlib import Path
from typing import Any, Optional

from pytest_benchmark.utils import parse_compare_fail

from pytest_gpu_pairs.analysis.compare import compare_runs, parse_thresholds, refusal
from pytest_gpu_pairs.inputs import finite_or_none, parse_json, read_json
from pytest_gpu_pairs.plugin.summary import energy_vs_serial
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import StoreError, load_run
from pytest_gpu_pairs.run.options import DEFAULT_PRECISION

STUDIES = ("g01-sessions-88fe928", "sessions-88e4113")  # the committed studies the summary combines, newest first

ENERGY_GATE = "gpu_energy_j:5%,fg_gpu_energy_j:5%,bg_gpu_energy_j:5%"
BENCHMARK_GATE = "mean:5%"
FINITE_SCRIPT_GROUPS = ("c01", "c02", "c03", "c04")
EFFICIENCY_SPREAD_LIMIT = 0.05


def session_name(path: Path) -> str:
    return path.stem.removeprefix("session-")


def session_sources(folder: Path) -> dict[str, tuple[Path, Optional[Path]]]:
    """session -> its run (benchmark JSON or results folder) and its pytest-benchmark JSON, if any:
    ``session-1.json`` as the committed studies keep it, else ``session-1/`` as the runner leaves it."""
    found: dict[str, tuple[Path, Optional[Path]]] = {}
    for path in sorted(folder.glob("session-*.json")):
        found[session_name(path)] = (path, path)
    for path in sorted(p for p in folder.glob("session-*") if p.is_dir()):
        if path.name.removeprefix("session-") not in found:
            benches = sorted((b for b in path.glob("bench-*.json") if b.stat().st_size), key=_attempt_number)
            found[path.name.removeprefix("session-")] = (path, benches[-1] if benches else None)
    return found


def _attempt_number(path: Path) -> int:
    tail = path.stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def gpu_of(folder: Path, session: str, machine: Optional[dict[str, Any]] = None) -> str:
    """The card of a session: its ``session-N.gpu.txt`` where the device's adapter wrote one, else
    the name and driver its records were measured on (a folder ``gpu-pairs study run`` made)."""
    path = folder / f"session-{session}.gpu.txt"
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    return card_of(machine or {})


def card_of(machine: dict[str, Any]) -> str:
    return ", ".join(str(machine[key]) for key in ("gpu_name", "driver") if machine.get(key))


def case_entry(record: Record, bench: dict[str, Any]) -> dict[str, Any]:
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


def benchmark_stats(path: Optional[Path]) -> dict[str, dict[str, Any]]:
    if path is None:
        return {}
    data = read_json(path)
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
    logs = sorted((folder / "logs").glob(f"session-{session}-*.txt"), key=_attempt_number)
    path = path if path.exists() or not logs else logs[-1]
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    code = re.search(r"pytest exit code: (\d+)", text)
    return {"compared": "Comparing against benchmarks from" in text, "regressed": "Performance has regressed" in text,
            "exit_code": int(code.group(1)) if code else None}


def collate(folder: Path) -> dict[str, Any]:
    sources = session_sources(folder)
    if not sources:
        raise StoreError(f"{folder}: no session-*.json and no session-*/ results folder: not a default-method study")
    sessions = [s for s in sources if s != "heavy"]
    loaded = {s: load_run(run) for s, (run, _) in sources.items()}
    runs = {s: run.records for s, run in loaded.items()}
    benches = {s: benchmark_stats(bench) for s, (_, bench) in sources.items()}
    cases = sorted(set.intersection(*(set(runs[s]) for s in sessions))) if sessions else []
    per_case = {case: {s: case_entry(runs[s][case], benches[s].get(case, {})) for s in sessions} for case in cases}
    in_some = sorted(set().union(*(set(runs[s]) for s in sessions)) - set(cases)) if sessions else []
    spreads = {}
    for case, by_session in per_case.items():
        means = [e["efficiency"] for e in by_session.values() if e["efficiency"] is not None]
        spreads[case] = max(means) / min(means) - 1 if len(means) == len(by_session) and means else None
    pairs = list(itertools.combinations(sessions, 2))
    energy = [energy_gate(sources[a][0], sources[b][0], cases) for a, b in pairs]
    bench = {f"{a} vs {b}": benchmark_gate(benches[a], benches[b], cases) for a, b in pairs}
    summary: dict[str, Any] = {
        "sessions": {s: {"gpu": gpu_of(folder, s, loaded[s].machine)} for s in sessions + (["heavy"] if "heavy" in runs else [])},
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
        heavy_energy = energy_gate(sources[sessions[0]][0], sources["heavy"][0], heavy_cases)
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


def study_markdown(summary: dict[str, Any]) -> str:
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


def study_target(case_sessions: dict[str, dict[str, Any]]) -> Optional[float]:
    targets = [t for e in case_sessions.values() if (t := e.get("precision_target")) is not None]
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


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    """The committed studies of ``folder`` combined, each collated afresh from its sessions (as its
    own summary.json holds it), or the one study a runner's folder is."""
    subs = [folder / name for name in STUDIES] if all((folder / name).is_dir() for name in STUDIES) else [folder]
    return combine([(sub.name, as_written(collate(sub))) for sub in subs])


def as_written(summary: dict[str, Any]) -> dict[str, Any]:
    """A study's summary as its summary.json reads back (tuples as lists, a non-finite number as null)."""
    return parse_json(json.dumps(finite_or_none(summary)[0], default=str).encode())


def table(summary: dict[str, Any]) -> str:
    return markdown(summary)


def combine(studies: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Studies' summaries, newest first, as one."""
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
