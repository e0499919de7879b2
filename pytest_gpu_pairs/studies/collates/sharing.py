"""The sharing study, collated: each pair under time-slicing and under MPS side by side, by the
product's own ``gpu-pairs sharing-report`` (``sharing_mps.json``, ``.md``, ``.png``), and the MPS
client limits beside the ballast of ``--gpu-pairs-gpu-memory-mb`` (``mps_limits.md``).

    gpu-pairs study collect sharing --out reports/reference/sharing

The pairs are read through the store from the pytest-benchmark files of earlier runs
(``*_bench.json``, as committed) and the results folders the runner leaves (``session-N/``). The
limits are the runs of ``limits/`` (one results folder per variant, its exit code from ``runs.json``,
what was left running from the run's last step) where the run left them; they are written as
``mps_limits.json``, from which the table is made (the committed one keeps an earlier run's).
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.analysis.sharing import load_records, write_report
from pytest_gpu_pairs.analysis.sharing import markdown as sharing_markdown
from pytest_gpu_pairs.inputs import SettingsError, read_capped, read_json
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text, case_records

REPORT = "sharing_mps"
LIMITS = "limits"
LIMITS_JSON, LIMITS_TABLE = "mps_limits.json", "mps_limits.md"
LEFTOVERS = ("leftover-mps.txt", "leftover-gpu.txt")
KEYS = ("case_id", "sharing", "mps", "oom", "failure", "peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb",
        "fg_peak_mem_reserved_mb", "bg_peak_mem_reserved_mb", "gpu_memory_mb", "ballast_held_mb",
        "concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "energy_saved_vs_serial")
ROUND_FIGURES = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "energy_saved_vs_serial")


def pair_inputs(folder: Path) -> list[Path]:
    """The benchmark files of earlier runs, then the runner's session folders, in name order."""
    sessions = sorted((p for p in folder.glob("session-*") if p.is_dir()), key=lambda p: p.name)
    return sorted(folder.glob("*_bench.json")) + sessions


def _oom_line(case_dir: Path) -> Optional[str]:
    """The first line of a job log that says why memory ran out (the CUDA error as the job saw it)."""
    for log in sorted(case_dir.rglob("*.log")):
        try:
            text = read_capped(log, 1 << 22).decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if "out of memory" in line.lower():
                return f"{log.relative_to(case_dir)}: {line.strip()[:300]}"
    return None


def _spread(values: list[Any]) -> Optional[dict[str, Any]]:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"mean": statistics.fmean(present), "std": statistics.stdev(present) if len(present) > 1 else 0.0,
            "n": len(present)}


def limits_case(record: Record, case_dir: Path) -> dict[str, Any]:
    data = record.to_dict()
    case = {key: data.get(key) for key in KEYS}
    case["oom_message"] = _oom_line(case_dir) if data.get("oom") else None
    if data.get("rounds"):
        case["rounds"] = {key: _spread([r.get(key) for r in data["rounds"]]) for key in ROUND_FIGURES}
    return case


def _last_exits(folder: Path) -> dict[str, int]:
    path = folder / "runs.json"
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise SettingsError(path, "$", "expected an object of session folder -> list of attempts")
    return {name: attempts[-1]["exit"] for name, attempts in data.items()
            if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict)
            and isinstance(attempts[-1].get("exit"), int)}


def collect_limits(folder: Path) -> Optional[dict[str, Any]]:
    """The limits runs the runner left under ``limits/``, through the store; None where there are none."""
    runs_dir = folder / LIMITS
    if not runs_dir.is_dir():
        return None
    exits = _last_exits(folder)
    runs: dict[str, Any] = {}
    for run_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        records, _ = case_records(run_dir)
        cases = [limits_case(record, path.parent) for path, record in records]
        runs[run_dir.name] = {"exit_code": exits.get(f"{LIMITS}/{run_dir.name}"), "cases": cases}
    leftovers = {}
    for name in LEFTOVERS:
        if (runs_dir / name).is_file():
            leftovers[name] = read_capped(runs_dir / name, 1 << 16).decode("utf-8", errors="replace").strip()
    return {"runs": runs, "leftovers": leftovers}


def read_limits(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict) or not isinstance(data.get("leftovers"), dict):
        raise SettingsError(path, "$", "expected the MPS limits runs and what was left running")
    for name, run in data["runs"].items():
        if not isinstance(run, dict) or not isinstance(run.get("cases"), list) \
                or not all(isinstance(c, dict) for c in run["cases"]):
            raise SettingsError(path, f"$.runs.{name}", "expected a run's exit code and its cases")
    return data


def _fmt(value: Any, digits: int = 2) -> str:
    return "–" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def _limits(case: dict[str, Any]) -> str:
    limits = (case.get("mps") or {}).get("limits") or {}
    parts = {f"{role}: {', '.join(f'{k}={v}' for k, v in lim.items() if v is not None)}" for role, lim in limits.items()
             if any(v is not None for v in lim.values())}
    return "; ".join(sorted(parts)) or "none"


def limits_markdown(summary: dict[str, Any]) -> str:
    lines = ["# MPS client limits on the GPU, beside the ballast", "",
             "| run | exit | case | sharing | limits | outcome | peak VRAM MB (pair / fg / bg) | ballast MB | efficiency |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, run in summary["runs"].items():
        for case in run["cases"] or [{}]:
            outcome = "OOM" if case.get("oom") else ("failed" if case.get("failure") else "passed")
            eff = case.get("rounds", {}).get("concurrency_efficiency") if case.get("rounds") else None
            eff_text = (f"{eff['mean']:.2f} ± {eff['std']:.2f} (n {eff['n']})" if eff
                        else _fmt(case.get("concurrency_efficiency")))
            peaks = " / ".join(_fmt(case.get(k), 0) for k in ("peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb"))
            lines.append(f"| {name} | {run.get('exit_code')} | {case.get('case_id', '–')} | {case.get('sharing', '–')} | "
                         f"{_limits(case)} | {outcome} | {peaks} | {_fmt(case.get('ballast_held_mb'), 0)} | {eff_text} |")
    messages = [f"- {c['case_id']} ({name}): {c['oom_message']}" for name, run in summary["runs"].items()
                for c in run["cases"] if c.get("oom_message")]
    if messages:
        lines += ["", "Out-of-memory as the jobs saw it:", *messages]
    leftovers = summary["leftovers"]
    lines += ["", f"Left running afterwards: MPS processes `{leftovers.get('leftover-mps.txt') or 'none'}`, "
                  f"GPU processes `{leftovers.get('leftover-gpu.txt') or 'none'}`."]
    return "\n".join(lines) + "\n"


def write(folder: Path, root: Path) -> str:
    inputs = pair_inputs(folder)
    if not inputs:
        raise SettingsError(folder, "$", "expected the pairs' benchmark files (*_bench.json) or session folders")
    report = write_report(load_records(inputs), folder / REPORT, [p.name for p in inputs])
    limits = collect_limits(folder)
    if limits is not None:
        atomic_write_json(folder / LIMITS_JSON, limits)
    text = sharing_markdown(report["pairs"], report["device"], report["sources"])
    if (folder / LIMITS_JSON).is_file():
        limits_text = limits_markdown(limits or read_limits(folder / LIMITS_JSON))
        atomic_write_text(folder / LIMITS_TABLE, limits_text)
        text += "\n" + limits_text
    return text
