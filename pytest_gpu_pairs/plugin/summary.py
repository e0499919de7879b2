"""The terminal summary: one line per case, then what could not be measured here and why."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Optional

COLUMNS = (("case", "case_id", "{}"), ("eff", "concurrency_efficiency", "{:.2f}"), ("slow", "fg_slowdown", "{:.2f}"),
           ("bg", "bg_progress_ratio", "{:.2f}"), ("cov", "bg_coverage", "{:.2f}"),
           ("E J", "gpu_energy_j", "{:.0f}"), ("fg J", "fg_gpu_energy_j", "{:.0f}"), ("bg J", "bg_gpu_energy_j", "{:.0f}"),
           ("VRAM MB", "peak_vram_mb", "{:.0f}"), ("oom", "oom", "{}"))


def _cell(fmt: str, value: Any) -> str:
    if value is None:
        return "-"
    return fmt.format(value)


def _half_width(ci: Any) -> str:
    """``±h`` of a 95 % interval, where the record has one (interleaved cases)."""
    if not isinstance(ci, list) or len(ci) != 2 or not all(isinstance(v, (int, float)) for v in ci):
        return ""
    return f"±{(ci[1] - ci[0]) / 2:.2g}"


def format_table(records: list[dict[str, Any]]) -> list[str]:
    rows = [[title for title, _, _ in COLUMNS]]
    rows += [[_cell(fmt, r.get(key)) + _half_width(r.get(f"{key}_ci")) for _, key, fmt in COLUMNS] for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def unmeasured(records: list[dict[str, Any]]) -> dict[str, set[str]]:
    """reason -> keys, over all cases, so a CPU run says once why GPU figures are missing."""
    by_reason: dict[str, set[str]] = defaultdict(set)
    for record in records:
        for key, reason in (record.get("notes") or {}).items():
            if record.get(key) is None:
                by_reason[reason].add(key)
    return by_reason


def sharing_lines(records: list[dict[str, Any]]) -> list[str]:
    """For each pair measured under both mechanisms: their efficiencies and the recommended one."""
    from pytest_gpu_pairs.analysis.sharing import compare  # only when a session has records to summarise

    lines = []
    for entry in compare(records):
        if len(entry["mechanisms"]) < 2:
            continue
        effs = ", ".join(f"{m} {_cell('{:.2f}', s['concurrency_efficiency']['mean'])}"
                         for m, s in sorted(entry["mechanisms"].items(), reverse=True))
        lines.append(f"  {entry['pair']}: efficiency {effs} -> {entry['recommended']} ({entry['reason']})")
    return ["sharing (timeslice vs mps):"] + lines if lines else []


def terminal_summary(reporter, session) -> None:
    records = [r.record for r in session.results]
    reporter.write_sep("=", "gpu-pairs results")
    device: Optional[str] = records[0].get("device") if records else None
    card = session.options.gpu_memory_mb
    emulated = f"   emulated card: {card:.0f} MB (--gpu-memory-mb)" if card is not None else ""
    reporter.write_line(f"device: {device}   results: {session.options.out_dir}{emulated}")
    for line in format_table(records):
        reporter.write_line(line)
    for line in sharing_lines(records):
        reporter.write_line(line)
    missing = unmeasured(records)
    if missing:
        reporter.write_line("not measured here:")
        for reason, keys in sorted(missing.items()):
            reporter.write_line(f"  {', '.join(sorted(keys))}: {reason}")
    for line in resumed_lines(session.results):
        reporter.write_line(line)
    if session.orphans_killed:
        reporter.write_line(f"killed {len(session.orphans_killed)} job process(es) left running in "
                            f"{session.options.out_dir} by an earlier pytest that died: {session.orphans_killed}")


def resumed_lines(results) -> list[str]:
    """Cases skipped by --gpu-pairs-resume, with any failure they recorded: a resumed run must not
    hide that an earlier part of the matrix failed."""
    resumed = [r for r in results if r.resumed]
    if not resumed:
        return []
    lines = ["resumed (recorded earlier, not run again): " + ", ".join(r.case.id for r in resumed)]
    for r in resumed:
        problems = r.problems()
        if problems:
            lines.append(f"  {r.case.id}: recorded failure: {' | '.join(problems)}")
    return lines
