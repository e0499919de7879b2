"""A prediction written into the settings (a group's ``expect``) held against what the group measured.

A predicted range is judged against the measured interval, not its point alone, so that a reading
whose interval still reaches the prediction is not called a refutation:

- confirmed: the point estimate lies in the predicted range;
- refuted: the whole interval lies outside it;
- not decided: the point lies outside, the interval still reaches it.

Time saved is read from the efficiency E as 1 - 1/E, the share of the one-after-the-other time that
running together saves when every job alone would take as long as the others and all run together
to the end (the predecessor's T_serial / T_parallel). A predicted memory figure is a reading taken
while the jobs train, so it is confirmed within ``VRAM_TOLERANCE`` of the largest steady need
measured (both jobs past their first step); "fits" is judged by the memory verdict of every session,
which is the whole run's. A figure that was not measured leaves its part of the prediction unjudged, and an
expectation is confirmed only when every part it names was judged and confirmed.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from pytest_gpu_pairs.experiment.schema import Expectation

VRAM_TOLERANCE = 0.10
CONFIRMED, REFUTED, UNDECIDED, UNMEASURED = "confirmed", "refuted", "not decided", "not measured"


@dataclass(frozen=True)
class Measured:
    """One group's figures over its sessions: the efficiency's point estimate and an interval that
    holds every session's interval, the largest steady memory need, and each session's verdict."""

    efficiency: Optional[float]
    efficiency_ci: Optional[tuple[float, float]]
    steady_mb: Optional[float]
    verdicts: Sequence[Optional[str]]


def judge_range(point: Optional[float], interval: Optional[tuple[float, float]],
                predicted: tuple[float, float]) -> str:
    if point is None:
        return UNMEASURED
    low, high = predicted
    if low <= point <= high:
        return CONFIRMED
    if interval is None or interval[1] < low or interval[0] > high:
        return REFUTED
    return UNDECIDED


def time_saved(efficiency: Optional[float]) -> Optional[float]:
    return None if efficiency is None or efficiency <= 0 else 1.0 - 1.0 / efficiency


def _saved_interval(interval: Optional[tuple[float, float]]) -> Optional[tuple[float, float]]:
    if interval is None or interval[0] <= 0:
        return None
    return (1.0 - 1.0 / interval[0], 1.0 - 1.0 / interval[1])


def judge_vram(steady_mb: Optional[float], predicted_mb: float) -> str:
    if steady_mb is None:
        return UNMEASURED
    return CONFIRMED if abs(steady_mb / predicted_mb - 1.0) <= VRAM_TOLERANCE else REFUTED


def judge_fits(verdicts: Sequence[Optional[str]], predicted: bool) -> str:
    if not verdicts or None in verdicts:
        return UNMEASURED
    fitted = [v == "fits" for v in verdicts]
    if all(f == predicted for f in fitted):
        return CONFIRMED
    return REFUTED if all(f != predicted for f in fitted) else UNDECIDED


def overall(parts: dict[str, str]) -> str:
    """Refuted by any refuted part; confirmed only when every part was judged and confirmed."""
    values = list(parts.values())
    if REFUTED in values:
        return REFUTED
    if values and all(v == CONFIRMED for v in values):
        return CONFIRMED
    return UNMEASURED if values and all(v == UNMEASURED for v in values) else UNDECIDED


def judge(expectation: Expectation, measured: Measured) -> dict[str, Any]:
    """Each figure the expectation names, judged, and the verdict over them."""
    parts: dict[str, str] = {}
    if expectation.efficiency is not None:
        parts["efficiency"] = judge_range(measured.efficiency, measured.efficiency_ci, expectation.efficiency)
    if expectation.time_saved is not None:
        parts["time_saved"] = judge_range(time_saved(measured.efficiency), _saved_interval(measured.efficiency_ci),
                                          expectation.time_saved)
    if expectation.vram_mb is not None:
        parts["vram_mb"] = judge_vram(measured.steady_mb, expectation.vram_mb)
    if expectation.fits is not None:
        parts["fits"] = judge_fits(measured.verdicts, expectation.fits)
    return {"parts": parts, "verdict": overall(parts),
            "measured_time_saved": time_saved(measured.efficiency),
            "measured_time_saved_ci95": _saved_interval(measured.efficiency_ci),
            "vram_error": None if measured.steady_mb is None or expectation.vram_mb is None
            else measured.steady_mb / expectation.vram_mb - 1.0}
