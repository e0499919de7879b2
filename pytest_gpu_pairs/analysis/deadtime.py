"""``gpu-pairs dead-time OUT_DIR``: how much of a run's wall time no measured job was training.

The predecessor tool slept a fixed 30 s between starting the background and starting the foreground,
and 60 s after every group: 90 s of every group spent waiting, before any startup cost. This
harness starts the foreground when the background reports its first step and sleeps between
cases only when ``cool_down_s`` asks for it. The figures come from the ``timeline`` that every
``result.json`` carries (wall-clock stamps of each phase), so they describe a real run.

Per case: ``wall_s`` (case start to result written), ``fg_training_s`` (the foreground's
training windows, first to last step), ``solo_training_s`` (solo baselines measured during the
case: training this harness adds and the predecessor never did), ``dead_s`` (the rest), split into
``bg_wait_s`` (background start until the foreground may train: what replaced the predecessor's 30 s
sleep), ``fg_startup_s`` (from then to the foreground's first step; a built-in foreground's own
startup overlaps the background's behind a start gate), ``fg_tail_s`` (last step to exit:
final evaluation), ``teardown_s`` (stopping the background and monitors), ``solo_overhead_s``
(the solo baselines' startup and evaluation), ``cool_down_s`` and ``other_s``. Between cases, ``gaps_s`` is pytest's own time from one case's end to the next
case's start (what replaced the predecessor's 60 s sleep).
"""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.store import case_records, json_text

SEED_SLEEP_BEFORE_FG_S = 30.0
SEED_SLEEP_AFTER_GROUP_S = 60.0


@dataclass
class CaseTime:
    case_id: str
    status: str
    start_t: float
    end_t: float
    wall_s: float
    fg_training_s: float
    solo_training_s: float
    bg_wait_s: float
    cool_down_s: float
    fg_startup_s: float
    fg_tail_s: float
    teardown_s: float
    solo_overhead_s: float

    @property
    def dead_s(self) -> float:
        return self.wall_s - self.fg_training_s - self.solo_training_s

    @property
    def other_s(self) -> float:
        """Dead time outside the named phases: result writing, the harness between phases."""
        return self.dead_s - (self.bg_wait_s + self.fg_startup_s + self.fg_tail_s + self.teardown_s
                              + self.solo_overhead_s + self.cool_down_s)


def _stamp(entry: dict[str, Any], key: str) -> Optional[float]:
    """A wall-clock stamp of a timeline, or None where it is missing or not a finite number (a
    record from disk is untrusted below its top-level keys too)."""
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _entries(timeline: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found = timeline.get(key)
    return [entry for entry in found if isinstance(entry, dict)] if isinstance(found, list) else []


def _span(entry: dict[str, Any], start: str, end: str) -> float:
    a, b = _stamp(entry, start), _stamp(entry, end)
    return max(0.0, b - a) if a is not None and b is not None else 0.0


def _go(round_: dict[str, Any]) -> str:
    """When the foreground could start training: a built-in foreground starts beside the
    background and waits at a gate (``fg_go_t``: the gate opened); otherwise its process start."""
    return "fg_go_t" if _stamp(round_, "fg_go_t") is not None else "fg_start_t"


def _status(record: dict[str, Any]) -> str:
    if not record.get("complete"):
        return "interrupted"
    return "failed" if record.get("failure") or record.get("oom") else "ok"


def case_time(record: dict[str, Any]) -> Optional[CaseTime]:
    """The timing of one result.json; None when it carries no timeline (an older result)."""
    timeline = record.get("timeline") or {}
    start, end = _stamp(timeline, "case_start_t"), _stamp(timeline, "case_end_t")
    if start is None or end is None:
        return None
    rounds, solos = _entries(timeline, "rounds"), _entries(timeline, "solo")
    return CaseTime(
        case_id=record.get("case_id", "?"), status=_status(record), start_t=start, end_t=end, wall_s=end - start,
        fg_training_s=sum(_span(r, "fg_train_start_t", "fg_train_end_t") for r in rounds),
        solo_training_s=sum(_span(s, "train_start_t", "train_end_t") for s in solos),
        bg_wait_s=sum(_span(r, "bg_start_t", _go(r)) for r in rounds),
        cool_down_s=_stamp(timeline, "cool_down_s") or 0.0,
        fg_startup_s=sum(_span(r, _go(r), "fg_train_start_t") for r in rounds),
        fg_tail_s=sum(_span(r, "fg_train_end_t", "fg_end_t") for r in rounds),
        teardown_s=sum(_span(r, "fg_end_t", "round_end_t") for r in rounds),
        solo_overhead_s=sum(max(0.0, _span(s, "start_t", "end_t") - _span(s, "train_start_t", "train_end_t"))
                            for s in solos if _stamp(s, "start_t") is not None))


def load_case_times(out_dir: str | Path) -> tuple[list[CaseTime], list[str]]:
    """Every case folder's timing, in the order the cases ran, and the folders left out (why)."""
    times: list[CaseTime] = []
    records, skipped = case_records(out_dir)
    for path, record in records:
        found = case_time(record.to_dict())
        if found is None:
            skipped.append(f"{path}: no timeline")
        else:
            times.append(found)
    return sorted(times, key=lambda c: c.start_t), skipped


def summarise(times: list[CaseTime]) -> dict[str, Any]:
    """Totals over a run, beside what the predecessor's fixed sleeps alone cost for as many groups."""
    gaps = [max(0.0, b.start_t - a.end_t) for a, b in zip(times, times[1:])]
    wall = times[-1].end_t - times[0].start_t if times else 0.0
    training = sum(c.fg_training_s + c.solo_training_s for c in times)
    seed_sleeps = len(times) * (SEED_SLEEP_BEFORE_FG_S + SEED_SLEEP_AFTER_GROUP_S)
    waiting = sum(c.bg_wait_s + c.cool_down_s for c in times) + sum(gaps)
    return {"cases": len(times), "wall_s": wall, "fg_training_s": sum(c.fg_training_s for c in times),
            "solo_training_s": sum(c.solo_training_s for c in times), "dead_s": wall - training,
            "bg_wait_s": sum(c.bg_wait_s for c in times), "cool_down_s": sum(c.cool_down_s for c in times),
            "gaps_s": sum(gaps), "waiting_s": waiting, "seed_fixed_sleeps_s": seed_sleeps,
            "seed_fixed_sleeps_note": f"{SEED_SLEEP_BEFORE_FG_S:.0f} s before each foreground + "
                                      f"{SEED_SLEEP_AFTER_GROUP_S:.0f} s after each group, before any startup cost"}


def format_report(times: list[CaseTime], totals: dict[str, Any]) -> list[str]:
    header = ("case", "status", "wall s", "fg train s", "solo train s", "dead s", "= bg wait", "fg startup",
              "fg tail", "teardown", "solo overhead", "cool-down", "other")
    rows = [header] + [(c.case_id, c.status, *(f"{v:.1f}" for v in (
        c.wall_s, c.fg_training_s, c.solo_training_s, c.dead_s, c.bg_wait_s, c.fg_startup_s, c.fg_tail_s,
        c.teardown_s, c.solo_overhead_s, c.cool_down_s, c.other_s))) for c in times]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    t = totals
    lines += ["",
              f"{t['cases']} case(s): wall {t['wall_s']:.1f} s, foreground training {t['fg_training_s']:.1f} s, "
              f"solo baselines training {t['solo_training_s']:.1f} s, dead {t['dead_s']:.1f} s",
              f"waiting (background start to foreground start {t['bg_wait_s']:.1f} s + cool-down "
              f"{t['cool_down_s']:.1f} s + between cases {t['gaps_s']:.1f} s): {t['waiting_s']:.1f} s",
              f"the predecessor's fixed sleeps for {t['cases']} group(s): {t['seed_fixed_sleeps_s']:.0f} s "
              f"({t['seed_fixed_sleeps_note']})"]
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", metavar="RESULTS_DIR", help="a --gpu-pairs-out folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    if not Path(args.out_dir).is_dir():
        print(f"{args.out_dir}: expected a --gpu-pairs-out folder")
        return 2
    times, skipped = load_case_times(args.out_dir)
    if not times:
        print(f"{args.out_dir}: no result.json with a timeline in its case folders")
        for line in skipped:
            print(f"left out: {line}")
        return 1
    totals = summarise(times)
    if args.json:
        print(json_text({"cases": [{**asdict(c), "dead_s": c.dead_s, "other_s": c.other_s} for c in times],
                         "totals": totals, "skipped": skipped}))
    else:
        print("\n".join(format_report(times, totals)))
        for line in skipped:
            print(f"left out: {line}")
    return 0
