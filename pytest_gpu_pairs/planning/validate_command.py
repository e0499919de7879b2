"""`gpu-pairs plan-validate [--results DIR ...] [--out DIR]`: how well the planner predicts pairs it never saw.

Every measured pair (the package's reference pairs of the card, the H100 unless ``--card`` names
another, and the pairs of each ``--results`` folder,
which replace the reference's where both measured a pair) is predicted by a planner that never
saw one of its workloads measured, then by one that never saw the pair (``planning.validate``).
Prints per mechanism the median and worst error, the interval's coverage and width, and how often
the recommended mechanism was the one measured better; ``--out`` writes ``summary.json`` with every
prediction and ``validation.md``. Nothing runs and no device is opened.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning.cards import UnknownCard
from pytest_gpu_pairs.planning.fit import CONFIDENCE
from pytest_gpu_pairs.planning.measured import read_measured
from pytest_gpu_pairs.planning.own_profiles import ProfilesHereError
from pytest_gpu_pairs.planning.plan import (
    H100_MB,
    MPS_UNDER_LIMITS,
    add_table_arguments,
    card_size_mb,
    planning_table,
    reference_wanted,
    with_reference,
)
from pytest_gpu_pairs.planning.predict import Planner, interval_basis, mps_line, timeslicing_line
from pytest_gpu_pairs.planning.validate import validate
from pytest_gpu_pairs.record.store import StoreError, atomic_write_json, atomic_write_text, json_text

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
SCHEMES = {"leave_one_workload_out": "leave one workload out",
           "leave_one_workload_out_busy_on_host": "leave one workload out, busy read on the pair's host",
           "leave_one_pair_out": "leave one pair out",
           "base_model_alone": "every pair (the base model alone)"}
WORST_SHOWN = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", action="append", default=[], metavar="DIR",
                        help="results folders (or benchmark JSON) whose measured pairs join the validation; repeatable")
    add_table_arguments(parser)
    parser.add_argument("--gpu-memory-mb", type=card_size_mb, default=None, metavar="N",
                        help="the card the recommendations are made for (default: the profiled card's memory)")
    parser.add_argument("--out", default=None, metavar="DIR", help="write summary.json and validation.md here")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def shown(source: Optional[str]) -> Optional[str]:
    """A packaged file by its path in the package (the same on every machine), any other as given."""
    if source is None:
        return None
    try:
        return str(Path(source).resolve().relative_to(PACKAGE_ROOT))
    except ValueError:
        return source


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _number(value: Optional[float], digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_table(summary: dict[str, Any]) -> list[str]:
    rows = ["| held out | mechanism | pairs | predictions | median error | 90th pct error | worst error | "
            f"{CONFIDENCE:.0%} interval coverage | mean width |", "|---|---|---|---|---|---|---|---|---|"]
    for scheme, words in SCHEMES.items():
        for mechanism, s in summary[scheme].items():
            for label, figures in ((mechanism, s), (f"{mechanism}, precise only", s["precise_only"])):
                rows.append(f"| {words} | {label} | {figures['n_pairs']} | {figures['n_predictions']} | "
                            f"{_pct(figures['median_error'])} | {_pct(figures['p90_error'])} | "
                            f"{_pct(figures['max_error'])} | {_number(figures['coverage'])} | "
                            f"{_number(figures['mean_interval_width'])} |")
    return rows


def _floor_text(label: str, f: dict[str, Any]) -> str:
    return (f"{label} {_pct(f['median_error'])} median, worst {_pct(f['worst_error'])} (one time in ten above "
            f"{_pct(f['worst_error_p90'])}; {f['n_pairs']} pairs)")


def noise_line(floors: dict[str, dict[str, Any]]) -> str:
    """What the measurements' own noise alone would make a perfect planner err, per mechanism, over
    every pair and over the precisely measured ones."""
    parts = [_floor_text(label, f) for mechanism, both in floors.items()
             for label, f in ((mechanism, both), (f"{mechanism}, precise only", both["precise_only"])) if f["n_pairs"]]
    return ("measurement noise alone (a planner that knew every pair's true efficiency, judged against these "
            "measurements): " + ("; ".join(parts) if parts else "no measurement carries an interval"))


def hosts_line(across: dict[str, Any]) -> str:
    """The noise floor again with the spread between sessions on several hosts added, or why it is not
    known."""
    head = "and across hosts (the pair's mean over hosts, judged against its sessions here"
    spread = across["between_sessions"]
    if spread is None:
        return f"{head}): not known, {across['reason']}"
    parts = [_floor_text(mechanism, f) for mechanism, f in across["floors"].items() if f["n_pairs"]]
    return (f"{head}; sessions disagree beyond their own noise by {spread['sd']:.2f} of the error scale, from "
            f"{spread['pairs']} pair(s) measured in several): " + "; ".join(parts))


def _choice_line(choice: dict[str, Any]) -> str:
    return (f"mechanism: over {choice['pairs']} pair(s) measured under both ({choice['n']} blind predictions), the "
            f"recommended one was the measured better one or within the measurements' noise of it "
            f"{_number(choice['share_right'])}, the one with the higher measured mean "
            f"{_number(choice['share_same_as_measured_mean'])}")


def worst_table(predictions: Sequence[dict[str, Any]]) -> list[str]:
    rows = ["| pair | mechanism | held out | measured [95 %] | predicted [interval] | error |", "|---|---|---|---|---|---|"]
    ranked = sorted((p for p in predictions if p["error"] is not None), key=lambda p: -p["error"])
    for p in ranked[:WORST_SHOWN]:
        measured_ci = p["measured_ci"]
        ci = f"[{measured_ci[0]:.2f}, {measured_ci[1]:.2f}]" if measured_ci else "[-]"
        interval = f"[{p['interval'][0]:.2f}, {p['interval'][1]:.2f}]" if p["interval"] else "[none estimated]"
        rows.append(f"| {'+'.join(p['pair'])} | {p['sharing']} | {p['held_out']} | {p['measured']:.3f} {ci} | "
                    f"{p['predicted']:.3f} {interval} | {_pct(p['error'])} |")
    return rows


def group_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for g in summary["groups"]:
        interval = f"[{g['interval'][0]:.2f}, {g['interval'][1]:.2f}]" if g["interval"] else "[none estimated]"
        ci = f"[{g['measured_ci'][0]:.2f}, {g['measured_ci'][1]:.2f}]" if g["measured_ci"] else "[-]"
        lines.append(f"group {'+'.join(g['pair'])} ({g['sharing']}): predicted {g['predicted']:.3f} {interval}, "
                     f"measured {g['measured']:.3f} {ci}, error {_pct(g['error'])}")
    return lines


def _basis_lines(summary: dict[str, Any]) -> list[str]:
    n = summary.get("mps_pairs_under_limits")
    return [f"note: {MPS_UNDER_LIMITS.format(n=n)}"] if n else []


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# Planner validation", "",
             f"Measured pairs: {summary['measured_pairs']}; workloads: {', '.join(summary['workloads'])}. "
             "Each pair is predicted by a planner that never saw one of its workloads measured (once per workload), "
             "and by one that never saw the pair. Errors are relative to the measured efficiency (read as 2 where "
             f"it measured above); 'precise only' keeps the pairs measured to within ±{summary['precise_within']:.0%}.",
             "", *summary_table(summary), "", noise_line(summary["noise_floor"]), "",
             hosts_line(summary["noise_floor_across_hosts"]), "",
             _choice_line(summary["mechanism_choice"]), "",
             timeslicing_line(summary["timeslicing"]), "", mps_line(summary["mps_base"]), "",
             *(f"- {line}" for line in (*group_lines(summary), *_basis_lines(summary))), "",
             "## The largest errors, leaving one workload out", "",
             *worst_table(summary["predictions"]["leave_one_workload_out"]), ""]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        profiles, _ = planning_table(args, [Path(r) for r in args.results], detect=False)
        measured, reference = with_reference(read_measured([Path(r) for r in args.results]), profiles,
                                             reference_wanted(args))
    except (SettingsError, StoreError, ProfilesHereError, UnknownCard) as exc:
        print(f"error: {exc}")
        return 2
    planner = Planner(profiles, measured)
    summary = {"profiles": shown(profiles.source), "reference": shown(reference), "results": list(args.results),
               "interval": interval_basis(planner), "mps_pairs_under_limits": measured.under_mps_limits(),
               **validate(planner, args.gpu_memory_mb or profiles.memory_total_mb or H100_MB)}
    if not any(summary["measured_pairs"].values()):
        print("error: no measured pair to validate on (give --results folders with concurrent cases on a GPU)")
        return 2
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "summary.json", summary)
        atomic_write_text(out / "validation.md", markdown(summary))
    if args.json:
        print(json_text(summary))
        return 0
    print(f"gpu-pairs plan-validate: {summary['measured_pairs']} measured pair(s), {len(summary['workloads'])} workloads")
    for line in summary_table(summary):
        print(line)
    print(noise_line(summary["noise_floor"]))
    print(hosts_line(summary["noise_floor_across_hosts"]))
    print(_choice_line(summary["mechanism_choice"]))
    print(timeslicing_line(summary["timeslicing"]))
    print(mps_line(summary["mps_base"]))
    for line in (*group_lines(summary), *_basis_lines(summary)):
        print(line)
    return 0
