"""Figures no sharing can give, flagged where they are recorded and shown.

Two jobs sharing a device cannot do more than two jobs' work (concurrency efficiency above 2), and
the foreground cannot run faster beside another job than alone (slowdown below 1). Such a figure is
not a finding but a sign that the solo and the shared measurements ran under different conditions;
it gets a note on its key in the record, and the terminal summary marks it, on any device and
whichever process measured it.
"""
from __future__ import annotations

from typing import Any, Optional

MARK = "!"
LARGEST_FIGURE = 1e50  # no measurement comes near: a year of a thousand GPUs is 1e13 J, steps are counted to 2**53
_SUSPECT = "; suspect: "
BOUNDS = {"concurrency_efficiency": (">", 2.0), "fg_slowdown": ("<", 1.0)}
_WORDS = {">": "above", "<": "below"}
_CAUSE = {
    "concurrency_efficiency": "which no sharing can give",
    "fg_slowdown": "the foreground ran faster beside another job than alone",
}
_LIKELY = ("likely the solo and the shared measurements ran under different conditions: host load (another "
           "pytest-xdist worker's jobs on the same CPUs, CPU frequency, data loading), clock boost, or too few "
           "step reports per phase (lengthen defaults.phase_s)")


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _beyond(op: str, value: float, bound: float) -> bool:
    return value > bound if op == ">" else value < bound


def impossible(key: str, value: Any) -> bool:
    """True where ``value`` of ``key`` lies past what sharing can give."""
    number, bound = _number(value), BOUNDS.get(key)
    return number is not None and bound is not None and _beyond(bound[0], number, bound[1])


def _interval(ci: Any) -> Optional[tuple[float, float]]:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(v) is not None for v in ci):
        return float(ci[0]), float(ci[1])
    return None


def _note(key: str, value: Optional[float], ci: Optional[tuple[float, float]]) -> Optional[str]:
    op, bound = BOUNDS[key]
    whole = ci is not None and all(_beyond(op, v, bound) for v in ci)
    if not whole and (value is None or not _beyond(op, value, bound)):
        return None
    where = _WORDS[op]
    if whole:
        said = f"the interval [{ci[0]:.3f}, {ci[1]:.3f}] lies {where} {bound:g}"
    else:
        reach = f" (its interval [{ci[0]:.3f}, {ci[1]:.3f}] reaches {bound:g})" if ci else ""
        said = f"{value:.3f} lies {where} {bound:g}{reach}"
    return f"suspect: {said}, {_CAUSE[key]}; {_LIKELY}"


def impossible_notes(record: dict[str, Any]) -> dict[str, str]:
    """key -> the note a figure past its bound gets (its value, or its whole interval, past it)."""
    notes = {}
    for key in BOUNDS:
        note = _note(key, _number(record.get(key)), _interval(record.get(f"{key}_ci")))
        if note is not None:
            notes[key] = note
    return notes


def with_impossible_notes(record: dict[str, Any]) -> dict[str, Any]:
    """The record with a note on each impossible figure, after any other note its key had; a note
    from the figures of one round gives way to that of the mean of all rounds."""
    notes = dict(record.get("notes") or {})
    flagged = impossible_notes(record)
    for key in BOUNDS:
        earlier = str(notes.pop(key, "")).split(_SUSPECT)[0] if key in notes else ""
        earlier = "" if earlier.startswith("suspect: ") else earlier
        said = [part for part in (earlier, flagged.get(key)) if part]
        if said:
            notes[key] = "; ".join(said)
    return {**record, "notes": notes}
