"""The estimates study's steps: ``--gpu-pairs-plan``'s estimate of the selection taken before its
session (in this process, no torch, no device opened, from the session's own fresh results folder),
and after the session the comparison, per case and in total, estimated against measured wall time
(the case's own timeline, read through the store; the pytest session's wall time from runs.json).

    python -m pytest_gpu_pairs.studies.steps.estimates plan ESTIMATE_JSON -- PYTEST_OPTIONS...
    python -m pytest_gpu_pairs.studies.steps.estimates compare STUDY_DIR --select EXPR [--session session-1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.inputs import SettingsError, read_json
from pytest_gpu_pairs.plugin.stash import existing_session
from pytest_gpu_pairs.record.store import atomic_write_json, load_result
from pytest_gpu_pairs.studies.runner import read_runs

WITHIN = 0.25
ESTIMATE, COMPARISON = "estimate.json", "estimates.json"


class _Grab:
    """Picks the session's estimates up after ``--gpu-pairs-plan`` made them."""

    def __init__(self) -> None:
        self.estimates: dict[str, float] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        state = existing_session(session.config)
        self.estimates = dict(state.estimates) if state is not None else {}


def estimate(options: list[str]) -> dict[str, float]:
    grab = _Grab()
    code = pytest.main(["benchmarks", "--gpu-pairs-plan", "-p", "no:cacheprovider", "-q", *options], plugins=[grab])
    if code not in (0, 5):
        raise SystemExit(f"the plan failed: pytest exit code {code}")
    return grab.estimates


def case_seconds(out: Path, case_id: str) -> Optional[float]:
    record = load_result(out / case_id)
    timeline = (record.to_dict().get("timeline") if record is not None else None) or {}
    start, end = timeline.get("case_start_t"), timeline.get("case_end_t")
    return end - start if isinstance(start, (int, float)) and isinstance(end, (int, float)) else None


def compare(estimates: dict[str, float], out: Path, session_s: Optional[float]) -> dict[str, Any]:
    cases: list[dict[str, Any]] = [{"case_id": cid, "estimate_s": est, "measured_s": case_seconds(out, cid)}
                                   for cid, est in estimates.items()]
    for case in cases:
        measured = case["measured_s"]
        case["ratio"] = case["estimate_s"] / measured if measured else None
    total_estimate = sum(estimates.values())
    measured_cases = [c["measured_s"] for c in cases]
    return {"cases": cases, "total_estimate_s": total_estimate,
            "cases_measured_s": sum(measured_cases) if None not in measured_cases else None,
            "session_wall_s": session_s, "ratio_to_session": total_estimate / session_s if session_s else None,
            "within": WITHIN, "within_target": session_s is not None and session_s > 0
            and abs(total_estimate / session_s - 1) <= WITHIN}


def _estimates(path: Path) -> dict[str, float]:
    data = read_json(path)
    found = data.get("estimates_s") if isinstance(data, dict) else None
    if not isinstance(found, dict) or not all(isinstance(v, (int, float)) for v in found.values()):
        raise SettingsError(path, "$.estimates_s", "expected each case's estimated seconds")
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True)
    plan = actions.add_parser("plan")
    plan.add_argument("to", type=Path)
    plan.add_argument("options", nargs="*", help="the session's pytest options, after --")
    comparing = actions.add_parser("compare")
    comparing.add_argument("study_dir", type=Path)
    comparing.add_argument("--select", required=True)
    comparing.add_argument("--session", default="session-1")
    args = parser.parse_args(argv)
    if args.action == "plan":
        atomic_write_json(args.to, {"estimates_s": estimate(args.options)})
        return 0
    try:
        estimates = _estimates(args.study_dir / ESTIMATE)
        attempts = read_runs(args.study_dir).get(args.session) or [{}]
    except SettingsError as exc:
        print(f"estimates: {exc}", file=sys.stderr)
        return 2
    last = attempts[-1]
    result = {**compare(estimates, args.study_dir / args.session, last.get("wall_s")), "select": args.select,
              "pytest_exit_code": last.get("exit")}
    atomic_write_json(args.study_dir / COMPARISON, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
