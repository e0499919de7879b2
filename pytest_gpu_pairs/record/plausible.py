"""Figures no sharing can give, flagged where they are recorded and shown.

Two jobs sharing a device cannot do more than two jobs' work (concurrency efficiency above 2; a
group of ``n_jobs`` jobs, above ``n_jobs``), and neither job can run faster beside the other than alone (foreground slowdown below 1, background
progress above 1). Such a figure is not a finding but a sign that the solo and the shared
measurements ran under different conditions; it gets a note on its key in the record, and the
terminal summary marks it, on any device and whichever process measured it. So does the
efficiency of a case that shared the GPU with a process that was none of its jobs: an orphaned
training job left on the card moved the feasibility groups' efficiency by up to 8 % on an H100,
within intervals that looked as tight as on an idle card.

A case's figure is the mean of its rounds, so it is flagged where the mean lies past its bound,
where its whole interval does, where its interval reaches below 0 (no ratio of rates can: the
rounds are too few, or too far apart, for the interval to say anything), and where one of its
rounds lies past the bound by more than a round's noise: ``ROUND_MARGIN`` times past it (in the
2970 complete rounds of the H100 reference studies, one round's noise stayed within 1.35 times
the efficiency's bound, 1.44 times the slowdown's and 1.52 times the background progress's), so
that a mean under 2 built partly from a round at 3.95 does not pass unmarked.
"""
from __future__ import annotations

from typing import Any, Optional

MARK = "!"
LARGEST_FIGURE = 1e50  # no measurement comes near: a year of a thousand GPUs is 1e13 J, steps are counted to 2**53
_SUSPECT = "; suspect: "
BOUNDS = {"concurrency_efficiency": (">", 2.0), "fg_slowdown": ("<", 1.0), "bg_progress_ratio": (">", 1.0)}
ROUND_MARGIN = 1.6
_WORDS = {">": "above", "<": "below"}
_CAUSE = {
    "concurrency_efficiency": "which no sharing can give",
    "fg_slowdown": "the foreground ran faster beside another job than alone",
    "bg_progress_ratio": "the background ran faster beside another job than alone",
}
_LIKELY = ("likely the solo and the shared measurements ran under different conditions: host load (another "
           "pytest-xdist worker's jobs on the same CPUs, CPU frequency, data loading), clock boost, or too few "
           "step reports per phase (lengthen defaults.phase_s)")


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _beyond(op: str, value: float, bound: float) -> bool:
    return value > bound if op == ">" else value < bound


def bound_of(key: str, record: Optional[dict[str, Any]] = None) -> tuple[str, float]:
    """The side and the bound past which ``key`` is impossible: the efficiency's is the record's
    number of jobs (a pair's, 2, where the record does not say)."""
    op, bound = BOUNDS[key]
    jobs = _number((record or {}).get("n_jobs"))
    if key == "concurrency_efficiency" and jobs is not None and jobs >= 2:
        return op, jobs
    return op, bound


def impossible(key: str, value: Any, n_jobs: Optional[int] = None) -> bool:
    """True where ``value`` of ``key`` lies past what sharing can give (``n_jobs``: the jobs that shared)."""
    number = _number(value)
    if number is None or key not in BOUNDS:
        return False
    op, bound = bound_of(key, {"n_jobs": n_jobs})
    return _beyond(op, number, bound)


def _interval(ci: Any) -> Optional[tuple[float, float]]:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(v) is not None for v in ci):
        return float(ci[0]), float(ci[1])
    return None


def round_bound(key: str, record: Optional[dict[str, Any]] = None) -> float:
    """How far past its bound one round's value must lie to be more than a round's noise."""
    op, bound = bound_of(key, record)
    return bound * ROUND_MARGIN if op == ">" else bound / ROUND_MARGIN


def suspect_rounds(record: dict[str, Any], key: str) -> list[tuple[Any, float]]:
    """(round, value) of each round the case's figures come from whose ``key`` lies past
    ``round_bound``; a round left out of them (``complete`` false) is not counted."""
    op = BOUNDS[key][0]
    far = round_bound(key, record)
    rounds = record.get("rounds")
    found = []
    for index, entry in enumerate(rounds if isinstance(rounds, list) else [], 1):
        if not isinstance(entry, dict) or entry.get("complete") is False:
            continue
        value = _number(entry.get(key))
        if value is not None and _beyond(op, value, far):
            found.append((entry.get("round", index), value))
    return found


def _foreign_memory_mb(record: Optional[dict[str, Any]]) -> Optional[float]:
    """GPU memory held by compute processes that were none of the case's, where the case's own jobs
    were seen too (in a container whose pids NVML does not match, every job would look foreign)."""
    other = _number((record or {}).get("other_peak_vram_mb"))
    own = _number((record or {}).get("fg_peak_vram_mb"))
    return other if other is not None and other > 0 and own is not None else None


def _note(key: str, value: Optional[float], ci: Optional[tuple[float, float]],
          rounds: list[tuple[Any, float]], record: Optional[dict[str, Any]] = None) -> Optional[str]:
    op, bound = bound_of(key, record)
    said = []
    if ci is not None and all(_beyond(op, v, bound) for v in ci):
        said.append(f"the interval [{ci[0]:.3f}, {ci[1]:.3f}] lies {_WORDS[op]} {bound:g}, {_CAUSE[key]}")
    elif value is not None and _beyond(op, value, bound):
        reach = f" (its interval [{ci[0]:.3f}, {ci[1]:.3f}] reaches {bound:g})" if ci else ""
        said.append(f"{value:.3f} lies {_WORDS[op]} {bound:g}{reach}, {_CAUSE[key]}")
    if rounds:
        listed = ", ".join(f"round {index} at {v:.3f}" for index, v in rounds)
        said.append(f"{listed} {'lies' if len(rounds) == 1 else 'lie'} {_WORDS[op]} {round_bound(key, record):g}, "
                    f"past what a round's noise gives, and the mean holds {'it' if len(rounds) == 1 else 'them'}")
    foreign = _foreign_memory_mb(record) if key == "concurrency_efficiency" else None
    if foreign is not None:
        said.append(f"processes that are not the case's jobs held up to {foreign:.0f} MB of the GPU while it ran "
                    "(nvidia-smi lists them): they computed beside the jobs, so neither the solo nor the shared "
                    "rates were the jobs' alone; measure on a GPU nothing else uses")
    if ci is not None and ci[0] < 0:
        said.append(f"its interval [{ci[0]:.3f}, {ci[1]:.3f}] reaches below 0, which no ratio of rates can: too "
                    "few rounds, or rounds too far apart, for the interval to say anything")
    if not said:
        return None
    return f"suspect: {'; '.join(said)}; {_LIKELY}"


def impossible_notes(record: dict[str, Any]) -> dict[str, str]:
    """key -> the note a figure past its bound gets (its value, its whole interval, its interval
    below 0, or one of its rounds past it)."""
    notes = {}
    for key in BOUNDS:
        note = _note(key, _number(record.get(key)), _interval(record.get(f"{key}_ci")), suspect_rounds(record, key),
                     record)
        if note is not None:
            notes[key] = note
    return notes


def faster_together(record: dict[str, Any]) -> Optional[str]:
    """The note on ``jobs`` where a further background of a group (bg2, bg3, ...) progressed faster
    beside the others than alone, as ``bg_progress_ratio`` above 1 is for the first."""
    jobs = record.get("jobs")
    past = [(job.get("role"), value) for job in (jobs[2:] if isinstance(jobs, list) else [])
            if isinstance(job, dict) and (value := _number(job.get("progress_ratio"))) is not None and value > 1.0]
    if not past:
        return None
    listed = ", ".join(f"{role} {value:.3f}" for role, value in past)
    return f"suspect: progress above 1 ({listed}): a job ran faster beside the others than alone; {_LIKELY}"


def flagged(record: dict[str, Any], key: str) -> bool:
    """The figure the summary marks with ``MARK``: one ``impossible_notes`` has a note for."""
    return key in BOUNDS and _note(key, _number(record.get(key)), _interval(record.get(f"{key}_ci")),
                                   suspect_rounds(record, key), record) is not None


def with_impossible_notes(record: dict[str, Any]) -> dict[str, Any]:
    """The record with a note on each impossible figure, after any other note its key had; a note
    from the figures of one round gives way to that of the mean of all rounds."""
    notes = dict(record.get("notes") or {})
    found = impossible_notes(record)
    faster = faster_together(record)
    if faster is not None:
        earlier = str(notes.get("jobs", "")).split(_SUSPECT)[0]
        notes["jobs"] = "; ".join(part for part in ("" if earlier.startswith("suspect: ") else earlier, faster) if part)
    for key in BOUNDS:
        earlier = str(notes.pop(key, "")).split(_SUSPECT)[0] if key in notes else ""
        earlier = "" if earlier.startswith("suspect: ") else earlier
        said = [part for part in (earlier, found.get(key)) if part]
        if said:
            notes[key] = "; ".join(said)
    return {**record, "notes": notes}
