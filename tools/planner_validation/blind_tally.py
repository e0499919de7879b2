"""The blind studies' figures in one tally per mechanism: every pair or group the planner predicted
before it was measured, as the studies' summaries hold them after
``python -m tools.planner_validation.regenerate``. Leaving one workload out on the reference set is
what a model change is tuned on; these are what it never saw, and a change that helps the first can
hurt the second (a capacity read from the jobs' paces took the reference's MPS worst from 16.7 % to
8.9 % and the blind MPS figures inside their intervals from 37 of 40 to 33).

    python -m tools.planner_validation.blind_tally                 # the working tree's summaries
    python -m tools.planner_validation.blind_tally --against HEAD  # and the committed ones beside them
    python -m tools.planner_validation.blind_tally --by-study      # each study apart: where a worst moved
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

from tools.planner_validation.regenerate import COLLECTED, ROOT

REFERENCE_STUDY = "planner_validation"  # its summary is the reference's own validation, not a blind study


@dataclass(frozen=True)
class Tally:
    n: int
    median: Optional[float]
    mean: Optional[float]
    worst: Optional[float]
    inside: int

    def line(self, mechanism: str, label: str) -> str:
        if not self.n:
            return f"{mechanism} {label}: no figure"
        return (f"{mechanism} {label}: n {self.n}, median {100 * self.median:.1f} %, mean {100 * self.mean:.1f} %, "
                f"worst {100 * self.worst:.1f} %, {self.inside} of {self.n} inside their intervals")


def blind_folders() -> list[str]:
    return [folder for study, folder in COLLECTED if study != REFERENCE_STUDY]


def predictions(summary: Any) -> Iterator[dict[str, Any]]:
    """Every judged prediction a summary holds, wherever the study put it."""
    if isinstance(summary, dict):
        if "error" in summary and "sharing" in summary:
            yield summary
            return
        for value in summary.values():
            yield from predictions(value)
    elif isinstance(summary, list):
        for value in summary:
            yield from predictions(value)


def tally(rows: list[dict[str, Any]]) -> Tally:
    judged = [r for r in rows if isinstance(r.get("error"), (int, float))]
    if not judged:
        return Tally(0, None, None, None, 0)
    errors = sorted(r["error"] for r in judged)
    return Tally(len(errors), statistics.median(errors), statistics.fmean(errors), errors[-1],
                 sum(1 for r in judged if r.get("covered") is True))


def by_mechanism(read: Callable[[str], Optional[str]], folders: list[str]) -> dict[str, Tally]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for folder in folders:
        text = read(f"{folder}/summary.json")
        if text is None:
            continue
        for row in predictions(json.loads(text)):
            rows.setdefault(str(row["sharing"]), []).append(row)
    return {mechanism: tally(found) for mechanism, found in sorted(rows.items())}


def _working_tree(path: str) -> Optional[str]:
    file = ROOT / path
    return file.read_text() if file.is_file() else None


def _at(revision: str) -> Callable[[str], Optional[str]]:
    def read(path: str) -> Optional[str]:
        done = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True)
        return done.stdout if done.returncode == 0 else None
    return read


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REVISION", help="also tally the summaries committed at REVISION")
    parser.add_argument("--by-study", action="store_true", help="a tally for each blind study as well as all together")
    args = parser.parse_args(argv)
    folders = blind_folders()
    groups = [("", folders)] + ([(f" ({folder})", [folder]) for folder in folders] if args.by_study else [])
    sources = [("now", _working_tree)] + ([(f"at {args.against}", _at(args.against))] if args.against else [])
    sources = [(label, functools.cache(read)) for label, read in sources]  # --by-study reads each summary again
    for where, chosen in groups:
        for label, read in sources:
            for mechanism, found in by_mechanism(read, chosen).items():
                print(found.line(mechanism, label + where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
