"""What one group's records from several sessions say together: whether their memory verdicts agree,
how far their whole-run needs and efficiencies spread, and whether every two sessions' efficiency
intervals overlap. The verdicts and feasibility_10g collates judge their sessions this way."""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text, case_records


def numbered_folders(folder: Path, pattern: re.Pattern[str]) -> list[str]:
    """The session folders present whose names ``pattern`` matches (its group: the number), in number order."""
    found = [(int(m.group(1)), p.name) for p in folder.iterdir() if p.is_dir() and (m := pattern.fullmatch(p.name))]
    return [name for _, name in sorted(found)]


def group_records(session: Path) -> dict[str, tuple[Record, Path]]:
    """group (the case id's first part) -> its complete record and the record's file, in one session."""
    found, _ = case_records(session)
    return {r.case_id.split("-", 1)[0]: (r, p) for p, r in sorted(found, key=lambda f: str(f[0]))
            if r.complete and r.case_id}


def write_summary(folder: Path, summary: dict[str, Any], table: str, readme: str) -> None:
    """summary.json, table.md and README.md, all three made before any is written."""
    atomic_write_json(folder / "summary.json", summary)
    atomic_write_text(folder / "table.md", table)
    atomic_write_text(folder / "README.md", readme)


def records_by_session(folder: Path, sessions: Sequence[str]) -> dict[str, dict[str, Record]]:
    """session -> group (the case id's first part) -> its complete record; a session folder that is
    not there has none."""
    return {session: {group: record for group, (record, _) in group_records(folder / session).items()}
            if (folder / session).is_dir() else {} for session in sessions}


def spread(values: list[float]) -> Optional[float]:
    """The largest reading over the smallest, less one; None where fewer than two readings."""
    return max(values) / min(values) - 1.0 if len(values) > 1 and min(values) > 0 else None


def bounds(interval: Optional[Sequence[Optional[float]]]) -> Optional[list[float]]:
    """Both ends of a 95 % interval; None where there is none or an end was not measured, as an
    interval with a missing end cannot be said to overlap another."""
    if not interval:
        return None
    low, high = interval
    return None if low is None or high is None else [low, high]


def overlap(intervals: list[list[float]]) -> bool:
    return all(a[0] <= b[1] and b[0] <= a[1] for i, a in enumerate(intervals) for b in intervals[i + 1:])


def agreement(records: Sequence[Record]) -> dict[str, Any]:
    """One group's sessions side by side; a figure that needs two sessions is None with fewer."""
    efficiencies = [r.concurrency_efficiency for r in records if r.concurrency_efficiency is not None]
    intervals = [ci for r in records if (ci := bounds(r.concurrency_efficiency_ci)) is not None]
    needs = [r.vram_fit_mb for r in records if r.vram_fit_mb is not None]
    return {"n_sessions": len(records),
            "vram_verdicts": sorted({r.vram_verdict for r in records}, key=str),
            "vram_peak_spread": spread(needs),
            "efficiency_spread": spread(efficiencies),
            "intervals_overlap": overlap(intervals) if len(intervals) > 1 else None}
