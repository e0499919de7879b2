"""Collate tools/sharing/mps_limits_on_gpu.sh's runs into one JSON and one Markdown table.

Usage: python3 tools/sharing/collate_mps_limits.py RESULTS_DIR --out STEM
(the committed STEM is reports/reference/sharing/mps_limits)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

KEYS = ("case_id", "sharing", "mps", "oom", "failure", "peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb",
        "fg_peak_mem_reserved_mb", "bg_peak_mem_reserved_mb", "gpu_memory_mb", "ballast_held_mb",
        "concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "energy_saved_vs_serial")
ROUND_FIGURES = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "energy_saved_vs_serial")


def _oom_line(case_dir: Path) -> str | None:
    """The first line of a job log that says why memory ran out (the CUDA error as the job saw it)."""
    for log in sorted(case_dir.rglob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "out of memory" in line.lower():
                return f"{log.relative_to(case_dir)}: {line.strip()[:300]}"
    return None


def _spread(values):
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"mean": statistics.fmean(present), "std": statistics.stdev(present) if len(present) > 1 else 0.0,
            "n": len(present)}


def collect(root: Path) -> dict:
    exits = dict(line.split(": exit ") for line in (root / "exits.txt").read_text().splitlines() if ": exit " in line)
    runs = {}
    for name, code in exits.items():
        cases = []
        for path in sorted((root / name).glob("*/result.json")):
            record = json.loads(path.read_text())
            case = {key: record.get(key) for key in KEYS}
            case["oom_message"] = _oom_line(path.parent) if record.get("oom") else None
            if record.get("rounds"):
                case["rounds"] = {key: _spread([r.get(key) for r in record["rounds"]]) for key in ROUND_FIGURES}
            cases.append(case)
        runs[name] = {"exit_code": int(code), "cases": cases}
    leftovers = {f: (root / f).read_text().strip() for f in ("leftover-mps.txt", "leftover-gpu.txt") if (root / f).exists()}
    return {"runs": runs, "leftovers": leftovers}


def _fmt(value, digits=2):
    return "–" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def _limits(case: dict) -> str:
    limits = (case.get("mps") or {}).get("limits") or {}
    parts = {f"{role}: {', '.join(f'{k}={v}' for k, v in lim.items() if v is not None)}" for role, lim in limits.items()
             if any(v is not None for v in lim.values())}
    return "; ".join(sorted(parts)) or "none"


def markdown(summary: dict) -> str:
    lines = ["# MPS client limits on the GPU, beside the ballast", "",
             "| run | exit | case | sharing | limits | outcome | peak VRAM MB (pair / fg / bg) | ballast MB | efficiency |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, run in summary["runs"].items():
        for case in run["cases"] or [{}]:
            outcome = "OOM" if case.get("oom") else ("failed" if case.get("failure") else "passed")
            eff = case.get("rounds", {}).get("concurrency_efficiency") if case.get("rounds") else None
            eff_text = f"{eff['mean']:.2f} ± {eff['std']:.2f} (n {eff['n']})" if eff else _fmt(case.get("concurrency_efficiency"))
            peaks = " / ".join(_fmt(case.get(k), 0) for k in ("peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb"))
            lines.append(f"| {name} | {run['exit_code']} | {case.get('case_id', '–')} | {case.get('sharing', '–')} | "
                         f"{_limits(case)} | {outcome} | {peaks} | {_fmt(case.get('ballast_held_mb'), 0)} | {eff_text} |")
    messages = [f"- {c['case_id']} ({name}): {c['oom_message']}" for name, run in summary["runs"].items()
                for c in run["cases"] if c.get("oom_message")]
    if messages:
        lines += ["", "Out-of-memory as the jobs saw it:", *messages]
    lines += ["", f"Left running afterwards: MPS processes `{summary['leftovers'].get('leftover-mps.txt') or 'none'}`, "
                  f"GPU processes `{summary['leftovers'].get('leftover-gpu.txt') or 'none'}`."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    summary = collect(Path(args.results))
    stem = Path(args.out)
    stem.with_suffix(".json").write_text(json.dumps(summary, indent=1, default=str))
    stem.with_suffix(".md").write_text(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
