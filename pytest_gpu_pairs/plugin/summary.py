"""The terminal summary: one line per case with its status and duration, a legend, what could not
be measured here and why, and the cases an interruption cut short with the command that resumes
them. The same table is written as ``summary.csv`` in the results folder, with a row for every
other case the folder holds a complete result of (``session`` earlier), so that it lists the
folder, not only the last session."""
from __future__ import annotations

import re
import shlex
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.inputs import printable
from pytest_gpu_pairs.planning.estimate import clock
from pytest_gpu_pairs.plugin import time_limit
from pytest_gpu_pairs.record.fit import FIT_SOURCE
from pytest_gpu_pairs.record.keys import label, meaning
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.plausible import BOUNDS, MARK, flagged, suspect_rounds
from pytest_gpu_pairs.record.store import StoreWriteError, atomic_write_csv

COLUMNS = (("case", "case_id", "{}"), ("status", "status", "{}"), ("time", "duration", "{}"),
           ("eff", "concurrency_efficiency", "{:.2f}"), ("slow", "fg_slowdown", "{:.2f}"),
           ("bg", "bg_progress_ratio", "{:.2f}"), ("cov", "bg_coverage", "{:.2f}"),
           ("E/serial", "energy_vs_serial", "{:.2f}"), ("fg J/step", "fg_gpu_energy_per_step_j", "{:.3g}"),
           ("bg J/step", "bg_gpu_energy_per_step_j", "{:.3g}"),
           ("VRAM MB", "vram_judged_mb", "{:.0f}"), ("oom", "oom", "{}"))
OWN_LEGEND = {
    "status": "passed, failed (the reason is in the test's failure), resumed (recorded earlier); summary.csv also "
              "lists the folder's cases of earlier sessions (session: earlier)",
    "time": "the case's wall time",
    "VRAM MB": "the pair's memory the budget judged: its whole-run need from both jobs' fit profiles on the card the "
               "settings name (vram_fit_mb), else the peak sampled during the case (peak_vram_mb)",
    "E/serial": "the card's energy for the pair's work over what the same work costs one job after the other "
                "(under 1.0: sharing saves energy; a ratio, so it compares across sessions and hosts)",
}
MARKS_LEGEND = ("±: half width of a figure's 95 % interval; -: not measured (see below); !: a figure no sharing "
                "can give (eff above 2, or above the number of jobs of a group; slow below 1, bg above 1; its interval below 0; or a round of it far past "
                "these), see below; eff, slow and bg are each the mean of the case's rounds (of per-round "
                "efficiencies 1/slow + bg), so eff is not 1/slow + bg of the means shown")


def legend_entry(title: str, key: str) -> str:
    """One column's explanation: its own text for a column of the table's making, the record key's
    label and meaning (from the key table) for a record key."""
    if title in OWN_LEGEND:
        return f"{title}: {OWN_LEGEND[title]}"
    return f"{title}: {label(key)} ({meaning(key)})"


def legend() -> str:
    """The legend under the table: every column but the case id, then the marks a cell can carry."""
    return "; ".join([*(legend_entry(title, key) for title, key, _ in COLUMNS[1:]), MARKS_LEGEND])


ENDED_KEY = pytest.StashKey[dict]()  # what the session's end wrote for the summary, and what it could not


def end_of_session(session: pytest.Session, state) -> None:
    """Before the summary is shown: the table written as ``summary.csv``, and the exit status made
    to reflect what the summary reports. A write that fails (a full disk) is one line under the
    table, which is still shown (each case's record is in its result.json), and exit status 1; so
    is a case the table shows as failed, or resumed with a recorded failure, whose test did not
    fail (a test of one's own that never calls ``check()``)."""
    ended = session.config.stash.setdefault(ENDED_KEY, {"csv": None, "problems": []})
    table = rows(state.results)
    if table and (state.results or state.interrupted) and state.options.out_dir.is_dir():
        written_at_end(session, lambda: ended.__setitem__("csv", write_csv(state.options.out_dir, table)))
    if any(status(r) == "failed" or (r.resumed and r.problems()) for r in state.results):
        _fail_exit_status(session)


def written_at_end(session: pytest.Session, write: Callable[[], Any], what: str = "a file") -> None:
    """``write()``, a file the session's end writes (``what``, where the error does not name it);
    where it fails, one line for the summary and exit status 1 instead of a traceback in place of
    the results table."""
    try:
        write()
    except OSError as exc:
        line = str(exc) if isinstance(exc, StoreWriteError) else \
            f"could not write {exc.filename or what}: {exc.strerror or exc}"
        session.config.stash.setdefault(ENDED_KEY, {"csv": None, "problems": []})["problems"].append(line)
        _fail_exit_status(session)


def _fail_exit_status(session: pytest.Session) -> None:
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


MAX_KEYS_SHOWN = 4
UNMEASURED_HEADING = "not measured here (why, then [the record keys left empty]; each key's reason: notes in result.json):"
_NOT_MEASURABLE = re.compile(r"^not measurable(?: on this run)?: ")
CSV_NAME = "summary.csv"


def _cell(fmt: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return fmt.format(value)


def duration_s(record: Record) -> Optional[float]:
    timeline = record.timeline or {}
    start, end = timeline.get("case_start_t"), timeline.get("case_end_t")
    return end - start if isinstance(start, (int, float)) and isinstance(end, (int, float)) else None


def _duration(seconds: Optional[float]) -> Optional[str]:
    return clock(seconds) if seconds is not None else None


def status(result) -> str:
    if result.resumed:
        return "resumed"
    if getattr(result, "case", None) is None:  # a result another plugin handed in without its case
        return "failed" if result.record.failure or result.record.oom else "passed"
    return "failed" if result.problems() else "passed"


def rows(results) -> list[dict[str, Any]]:
    """One flat row per case: the record's headline figures with its status and duration."""
    return [{**r.record, **energy_vs_serial(r.record), "status": status(r), "duration": _duration(duration_s(r.record)),
             "duration_s": duration_s(r.record), "vram_judged_mb": vram_judged(r.record)} for r in results]


def vram_judged(record: Record) -> Optional[float]:
    """The memory figure the budget check used (``vram_budget_source``)."""
    return record.vram_fit_mb if record.vram_budget_source == FIT_SOURCE else record.peak_vram_mb


def energy_vs_serial(record: Record) -> dict[str, Any]:
    """The pair's energy over the serial energy of its work (1 - energy_saved_vs_serial), with its interval."""
    saved, ci = record.energy_saved_vs_serial, record.energy_saved_vs_serial_ci
    ratio = 1.0 - saved if isinstance(saved, (int, float)) and not isinstance(saved, bool) else None
    low, high = ci if isinstance(ci, list) and len(ci) == 2 else (None, None)
    interval = [1.0 - high, 1.0 - low] if low is not None and high is not None else None
    return {"energy_vs_serial": ratio, "energy_vs_serial_ci": interval}


def _half_width(ci: Any) -> str:
    """``±h`` of a 95 % interval, where the record has one (interleaved cases)."""
    if not isinstance(ci, list) or len(ci) != 2 or not all(isinstance(v, (int, float)) for v in ci):
        return ""
    return f"±{(ci[1] - ci[0]) / 2:.2g}"


def _mark(key: str, record: dict[str, Any]) -> str:
    """``!`` after a figure no sharing can give, or one whose interval or rounds reach past what
    sharing can give (its note in result.json says which and the likely cause)."""
    return MARK if flagged(record, key) else ""


def format_table(records: list[dict[str, Any]]) -> list[str]:
    rows = [[title for title, _, _ in COLUMNS]]
    rows += [[_cell(fmt, r.get(key)) + _half_width(r.get(f"{key}_ci")) + _mark(key, r) for _, key, fmt in COLUMNS]
             for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def write_csv(out_dir: Path, table: list[dict[str, Any]]) -> Path:
    """``summary.csv``: the terminal table with full precision, intervals as their own columns, then
    the folder's other complete cases, which an earlier session recorded (``session``: this or earlier)."""

    keys = [key for _, key, _ in COLUMNS if key != "duration"] + ["duration_s"]
    header = tuple(keys + [f"{key}_ci_low" for key in keys if key.endswith("efficiency")]
                   + [f"{key}_ci_high" for key in keys if key.endswith("efficiency")] + ["session"])

    def line(row: dict[str, Any], session: str) -> list[Any]:
        ci = row.get("concurrency_efficiency_ci")
        low, high = (ci if isinstance(ci, list) and len(ci) == 2 else (None, None))
        return [row.get(key) for key in keys] + [low, high, session]
    earlier = earlier_rows(out_dir, {row.get("case_id") for row in table})
    path = Path(out_dir) / CSV_NAME
    atomic_write_csv(path, header, [line(row, "this") for row in table] + [line(row, "earlier") for row in earlier])
    return path


def earlier_rows(out_dir: Path, present: set) -> list[dict[str, Any]]:
    """Rows for the cases of the folder this session did not run: their complete records as an
    earlier session left them, solo baselines of the harness's own left out."""
    from pytest_gpu_pairs.record.store import complete_records

    records = sorted((r for r in complete_records(out_dir) if r.case_id not in present and r.design != "baseline"),
                     key=lambda r: str(r.case_id))
    return [{**r, **energy_vs_serial(r), "status": recorded_status(r), "duration": _duration(duration_s(r)),
             "duration_s": duration_s(r)} for r in records]


def recorded_status(record: Record) -> str:
    """A record's verdict without its session: failed on a failure or an OOM, on a pair that measured
    no efficiency, and on an efficiency below the minimum where it was measured on a GPU."""
    eff, minimum = record.concurrency_efficiency, record.min_efficiency
    unmeasured = record.mode == "concurrent" and eff is None
    below = record.device not in (None, "cpu") and eff is not None and minimum is not None and eff < minimum
    return "failed" if record.failure or record.oom or unmeasured or below else "passed"


def _keys_text(keys: set[str]) -> str:
    shown = sorted(keys)[:MAX_KEYS_SHOWN]
    if len(keys) > len(shown):
        return f"{len(keys)} keys: {', '.join(shown)}, ..."
    return ", ".join(shown)


def resume_command(args: list[str]) -> str:
    """The command that ran this session, with ``--gpu-pairs-resume`` added once."""
    args = [str(a) for a in args]
    return shlex.join(["pytest", *args, *([] if "--gpu-pairs-resume" in args else ["--gpu-pairs-resume"])])


def interrupted_lines(session, args: list[str]) -> list[str]:
    if not session.interrupted:
        return []
    return [f"interrupted (incomplete result.json): {', '.join(session.interrupted)}",
            f"  to finish the rest without repeating finished cases: {resume_command(args)}"]


def impossible_lines(records: list[Record]) -> list[str]:
    """The cases with a figure no sharing can give, each with its figures: a session on a loaded
    host must not pass such numbers on unremarked."""
    lines = []
    for record in records:
        figures = record.to_dict()  # once: dict(record) would dump the record whole for each of its keys
        marked = [_flagged_text(figures, key) for key in BOUNDS if flagged(figures, key)]
        if marked:
            lines.append(f"  {record.case_id}: {', '.join(marked)}")
    if not lines:
        return []
    return ["figures no sharing can give (!), not findings: the solo and the shared measurements ran under "
            "different conditions (the likely cause is in each key's note in result.json):"] + lines


def _flagged_text(record: dict[str, Any], key: str) -> str:
    """A marked figure as the lines under the table name it: its mean, and the rounds past what a
    round's noise gives."""
    value = record.get(key)
    text = f"{key} {value:.2f}" if isinstance(value, (int, float)) else f"{key} -"
    rounds = suspect_rounds(record, key)
    if rounds:
        text += " (" + ", ".join(f"round {index} {v:.2f}" for index, v in rounds) + ")"
    ci = record.get(f"{key}_ci")
    if isinstance(ci, list) and len(ci) == 2 and isinstance(ci[0], (int, float)) and ci[0] < 0:
        text += f" (interval reaches {ci[0]:.2f})"
    return text


def plain_reason(note: str) -> str:
    """A note's cause without its "not measurable" lead-in, which the section's heading says once."""
    return _NOT_MEASURABLE.sub("", str(note))


def unmeasured(records: list[Record]) -> dict[str, set[str]]:
    """reason -> keys, over all cases, so a CPU run says once why GPU figures are missing. A note may
    name a key another plugin added, which the record holds as an extra: hence the default."""
    by_reason: dict[str, set[str]] = defaultdict(set)
    for record in records:
        for key, reason in (record.notes or {}).items():
            if getattr(record, key, None) is None:
                by_reason[plain_reason(reason)].add(key)
    return by_reason


def unmeasured_lines(records: list[Record]) -> list[str]:
    """One line per reason, the reason first and the keys it leaves empty after it, the widest
    reason first; each key's own note stays in its ``result.json``."""
    missing = unmeasured(records)
    if not missing:
        return []
    ordered = sorted(missing.items(), key=lambda item: (-len(item[1]), item[0]))
    return [UNMEASURED_HEADING] + [f"  {reason}  [{_keys_text(keys)}]" for reason, keys in ordered]


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


def _write(reporter, line: str) -> None:
    """A line of the summary, its control characters escaped: records read back (a resumed case's)
    and notes quote a job's own text, which is not the terminal's to interpret."""
    reporter.write_line(printable(line))


def terminal_summary(reporter, session, args: Optional[list[str]] = None) -> None:
    records = [r.record for r in session.results]
    table = rows(session.results)
    reporter.write_sep("=", "gpu-pairs results")
    env = session.opened_environment
    device: Optional[str] = records[0].device if records else (env.device_name if env is not None else None)
    card = session.options.gpu_memory_mb
    emulated = f"   emulated card: {card:.0f} MB (--gpu-pairs-gpu-memory-mb)" if card is not None else ""
    ended = reporter.config.stash.get(ENDED_KEY, {"csv": None, "problems": []})
    csv_note = f"   table: {ended['csv']}" if ended["csv"] is not None else ""
    _write(reporter, f"device: {device}   results: {session.options.out_dir}{emulated}{csv_note}")
    if table:
        for line in format_table(table):
            _write(reporter, line)
        _write(reporter, legend())
    for problem in ended["problems"]:
        _write(reporter, f"not written as the session ended: {problem}")
    for line in impossible_lines(records):
        _write(reporter, line)
    for line in sharing_lines(records):
        _write(reporter, line)
    for line in unmeasured_lines(records):
        _write(reporter, line)
    for line in interrupted_lines(session, args or []):
        _write(reporter, line)
    for line in time_limit.summary_lines(reporter.config, resume_command(args or [])):
        _write(reporter, line)
    for line in resumed_lines(session.results):
        _write(reporter, line)
    if session.orphans_killed:
        _write(reporter, f"killed {len(session.orphans_killed)} job process(es) left running in "
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
