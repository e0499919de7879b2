"""Is ``--gpu-pairs-plan`` right? Estimate a selection, run it, and compare: per case and in total,
estimated against measured wall time (the case's own timeline; the session's wall time for the
total), written as ``estimates.json`` and ``estimates.md``.

    python -m tools.estimates.check -k densenet --dest DIR [-- extra pytest options]
    python -m tools.estimates.check -k c01 --dest DIR --profile SETTINGS -- --gpu-pairs-settings SETTINGS

``--profile`` first runs ``gpu-pairs profile`` on the selection's workloads into the fresh results
folder, so the estimate is the one a user gets for their own script after profiling it once.

The estimate is taken first, in this process (no torch, no device opened); the selection then runs
in a pytest subprocess of its own, with a fresh results folder so no earlier result of the same
cases feeds the estimate. ``tools/estimates/run_on_gpu.sh`` runs it on the GPU machine.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_gpu_pairs.plugin.stash import existing_session
from pytest_gpu_pairs.record.store import load_result

WITHIN = 0.25


class _Grab:
    """Picks the session's estimates up after ``--gpu-pairs-plan`` made them."""

    def __init__(self) -> None:
        self.estimates: dict[str, float] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        state = existing_session(session.config)
        self.estimates = dict(state.estimates) if state is not None else {}


def estimate(select: str, out: Path, extra: list[str]) -> dict[str, float]:
    grab = _Grab()
    code = pytest.main(["benchmarks", "--gpu-pairs-plan", "-k", select, "--gpu-pairs-out", str(out),
                        "-p", "no:cacheprovider", "-q", *extra], plugins=[grab])
    if code not in (0, 5):
        raise SystemExit(f"the plan failed: pytest exit code {code}")
    return grab.estimates


def _option(extra: list[str], name: str, default: str) -> str:
    return extra[extra.index(name) + 1] if name in extra[:-1] else default


def profile(settings: Path, select: str, out: Path, extra: list[str], log: Path) -> None:
    """Profiled on the device and at the scale the selection then runs at."""
    argv = [sys.executable, "-m", "pytest_gpu_pairs.cli", "profile", str(settings), "-k", select, "--out", str(out),
            "--device", _option(extra, "--gpu-pairs-device", "auto"), "--scale", _option(extra, "--gpu-pairs-scale", "1")]
    with open(log, "w") as handle:
        code = subprocess.call(argv, stdout=handle, stderr=subprocess.STDOUT)
    if code != 0:
        raise SystemExit(f"gpu-pairs profile failed (exit code {code}); see {log}")


def measure(select: str, out: Path, extra: list[str], log: Path) -> tuple[float, int]:
    start = time.time()
    with open(log, "w") as handle:
        code = subprocess.call([sys.executable, "-m", "pytest", "benchmarks", "-k", select, "--gpu-pairs-out", str(out),
                                "-p", "no:cacheprovider", "-rA", *extra], stdout=handle, stderr=subprocess.STDOUT)
    return time.time() - start, code


def case_seconds(out: Path, case_id: str) -> float | None:
    record = load_result(out / case_id)
    timeline = (record.to_dict().get("timeline") if record is not None else None) or {}
    start, end = timeline.get("case_start_t"), timeline.get("case_end_t")
    return end - start if isinstance(start, (int, float)) and isinstance(end, (int, float)) else None


def compare(estimates: dict[str, float], out: Path, session_s: float) -> dict[str, Any]:
    cases = [{"case_id": cid, "estimate_s": est, "measured_s": case_seconds(out, cid)} for cid, est in estimates.items()]
    for case in cases:
        measured = case["measured_s"]
        case["ratio"] = case["estimate_s"] / measured if measured else None
    total_estimate = sum(estimates.values())
    measured_cases = [c["measured_s"] for c in cases]
    cases_total = sum(measured_cases) if None not in measured_cases else None
    return {"cases": cases, "total_estimate_s": total_estimate, "cases_measured_s": cases_total,
            "session_wall_s": session_s, "ratio_to_session": total_estimate / session_s if session_s else None,
            "within": WITHIN,
            "within_target": bool(session_s) and abs(total_estimate / session_s - 1) <= WITHIN}


def markdown(result: dict[str, Any], select: str) -> str:
    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.1f}" if isinstance(x, float) else str(x)
    lines = [f"# Estimate against measured wall time: -k {select}", "",
             "| case | estimate s | measured s | estimate / measured |", "| --- | --- | --- | --- |"]
    lines += [f"| {c['case_id']} | {num(c['estimate_s'])} | {num(c['measured_s'])} | {num(c['ratio'])} |"
              for c in result["cases"]]
    lines += ["", f"Total: estimate {num(result['total_estimate_s'])} s; the cases' own wall time "
              f"{num(result['cases_measured_s'])} s; the pytest session {num(result['session_wall_s'])} s "
              f"(ratio {num(result['ratio_to_session'])}; target within ±{result['within']:.0%}: "
              f"{'met' if result['within_target'] else 'not met'})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", required=True)
    parser.add_argument("--dest", type=Path, required=True, help="folder for estimates.json, estimates.md, the log")
    parser.add_argument("--out", type=Path, default=Path("/tmp/estimates_check"), help="results folder (emptied)")
    parser.add_argument("--profile", type=Path, default=None, metavar="SETTINGS",
                        help="profile the selection's workloads of this experiment file first")
    parser.add_argument("extra", nargs="*", help="more pytest options, after --")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    args.dest.mkdir(parents=True, exist_ok=True)
    if args.profile is not None:
        profile(args.profile, args.select, args.out, args.extra, args.dest / "profile.log")
    estimates = estimate(args.select, args.out, args.extra)
    print(json.dumps({"estimates_s": estimates}, indent=1), flush=True)
    session_s, code = measure(args.select, args.out, args.extra, args.dest / "pytest.log")
    result = {**compare(estimates, args.out, session_s), "select": args.select, "pytest_exit_code": code}
    (args.dest / "estimates.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.dest / "estimates.md").write_text(markdown(result, args.select))
    print(markdown(result, args.select))
    return 0


if __name__ == "__main__":
    sys.exit(main())
