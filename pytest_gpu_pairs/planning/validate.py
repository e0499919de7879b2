"""How well the planner predicts pairs it never saw, measured the way it is used.

For every workload of the measured pairs, a planner is built without any pair containing it (its
correction and its calibrated intervals learnt from the rest only) and predicts each of those
pairs: the error on a workload never measured beside anything, the harder of the two cases a user
meets; and the same again from the busy fractions each pair's own solo phases read, the profiles a
user who profiles on the machine that runs the pairs would have. Leaving one pair out (the other
workloads still measured) is reported beside it, and the base model alone (no measured pair at
all: what the solo profiles carry). Per
mechanism: the median and worst relative error of the efficiency, how often the stated interval
held the measurement and how wide it was; and, for pairs measured under both mechanisms, whether
the mechanism the blind planner recommends is the one measured better. A measured group of more
jobs, which never teaches the planner, is set beside the planner's prediction for it.

A measurement is a reading with noise of its own: the rows say how wide each measurement's
interval was, the summary is given again over the pairs measured to within ``PRECISE``, and the
noise floor says what errors a planner that knew every pair's true efficiency would show against
these same measurements; and again with the spread between sessions on several hosts added, as a
pair's measurement is one host's while a plan is for the next.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional, TypeVar

from pytest_gpu_pairs.planning.measured import RECORD_Z, Measured, MeasuredPair, SessionSpread
from pytest_gpu_pairs.planning.model import MECHANISMS
from pytest_gpu_pairs.planning.predict import MAX_EFFICIENCY, Figure, Planner, mps_basis, timeslicing_basis
from pytest_gpu_pairs.planning.scale import efficiency_scale

PRECISE = 0.05  # a measurement whose interval's half-width is within 5 % of its value
NORMAL = statistics.NormalDist()
T = TypeVar("T")


def _within_precise(interval: Optional[tuple[float, float]], value: float) -> bool:
    """Whether a measurement's interval's half-width is within ``PRECISE`` of its value."""
    return interval is not None and (interval[1] - interval[0]) / 2.0 <= PRECISE * value


@dataclass(frozen=True)
class HeldOut:
    """One measured pair predicted by a planner that never saw it (nor, leaving workloads out, ``held_out``)."""

    models: tuple[str, ...]
    sharing: str
    held_out: str  # the workload left out, "pair" when only the pair was, "nothing" for a group (no group teaches)
    measured: float
    measured_ci: Optional[tuple[float, float]]
    predicted: Figure

    @property
    def error(self) -> Optional[float]:
        """|predicted - measured| / measured."""
        if self.predicted.value is None or self.measured <= 0:
            return None
        return abs(self.predicted.value - self.measured) / self.measured

    @property
    def covered(self) -> Optional[bool]:
        """Whether the stated interval held the measurement; None where no interval was estimated."""
        if not self.predicted.estimated or self.predicted.low is None or self.predicted.high is None:
            return None
        return self.predicted.low <= self.measured <= self.predicted.high

    @property
    def width(self) -> Optional[float]:
        if self.covered is None:
            return None
        assert self.predicted.low is not None and self.predicted.high is not None
        return self.predicted.high - self.predicted.low

    @property
    def precise(self) -> bool:
        return _within_precise(self.measured_ci, self.measured)

    def as_dict(self) -> dict[str, Any]:
        return {"pair": list(self.models), "sharing": self.sharing, "held_out": self.held_out,
                "measured": self.measured, "measured_ci": list(self.measured_ci) if self.measured_ci else None,
                "measured_precise": self.precise, "predicted": self.predicted.value,
                "interval": [self.predicted.low, self.predicted.high] if self.covered is not None else None,
                "error": self.error, "covered": self.covered}


def _measured(pair: MeasuredPair) -> float:
    assert pair.efficiency is not None
    return min(pair.efficiency, MAX_EFFICIENCY * len(pair.models) / 2)


def _two(pair: MeasuredPair) -> tuple[str, str]:
    return pair.models[0], pair.models[1]


def held_out_row(pair: MeasuredPair, held_out: str, predicted: Figure) -> HeldOut:
    """One measured pair or group beside its prediction."""
    return HeldOut(pair.models, pair.sharing, held_out, _measured(pair), pair.efficiency_ci, predicted)


def _blind_prediction(blind: Planner, pair: MeasuredPair, held_out: str) -> HeldOut:
    return held_out_row(pair, held_out, blind.efficiency(_two(pair), pair.sharing))


def _measured_pairs(planner: Planner) -> list[MeasuredPair]:
    return [p for _, p in sorted(planner.measured.pairs.items()) if p.efficiency is not None]


def _blind_by_workload(planner: Planner) -> dict[str, Planner]:
    return {name: planner.without_workload(name) for name in sorted({m for p in _measured_pairs(planner) for m in p.models})}


def leave_one_workload_out(planner: Planner, blind: Optional[dict[str, Planner]] = None) -> list[HeldOut]:
    """Each measured pair predicted once for each of its workloads, by a planner without that workload's pairs."""
    blind = blind or _blind_by_workload(planner)
    pairs = _measured_pairs(planner)
    return [_blind_prediction(blind[name], p, name) for name in blind for p in pairs if name in p.models]


def leave_one_workload_out_on_host(planner: Planner, blind: Optional[dict[str, Planner]] = None) -> list[HeldOut]:
    """As ``leave_one_workload_out``, each pair predicted from the busy fractions its own solo phases
    read (on the host and card that ran it) instead of the profiles': the gap between the two rows is
    what the profiles' host costs a prediction, and this row is what profiling on the machine that
    runs the pairs gives. Pairs whose records kept no solo readings are left out."""
    blind = blind or _blind_by_workload(planner)
    pairs = _measured_pairs(planner)
    read = [(p, dict(p.solo_busy)) for p in pairs if set(p.models) <= {m for m, _ in p.solo_busy}]
    return [held_out_row(p, name, blind[name].efficiency_from_busy(_two(p), p.sharing, busy))
            for name in blind for p, busy in read if name in p.models]


def leave_one_pair_out(planner: Planner) -> list[HeldOut]:
    """Each measured pair predicted by a planner without that pair (under either mechanism)."""
    return [_blind_prediction(planner.without(_two(p)), p, "pair") for p in _measured_pairs(planner)]


def base_model_alone(planner: Planner) -> list[HeldOut]:
    """Each measured pair predicted from the solo profiles alone, no measured pair behind it: what the
    physical base model carries, against what the learned correction adds."""
    blind = replace(planner, measured=Measured())
    return [_blind_prediction(blind, p, "every pair") for p in _measured_pairs(planner)]


def groups(planner: Planner) -> list[HeldOut]:
    """Each measured group of more jobs, predicted from its jobs' profiles and its pairs' corrections
    (no group ever teaches the planner, so nothing needs leaving out)."""
    return [held_out_row(g, "nothing", planner.group_efficiency(g.models, g.sharing, measured=False))
            for _, g in sorted(planner.measured.groups.items()) if g.efficiency is not None]


def _quantile(values: Sequence[float], q: float) -> Optional[float]:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) >= 2 else None


def summarise(rows: Sequence[HeldOut]) -> dict[str, Any]:
    """Error and interval figures of some held-out predictions."""
    errors = [r.error for r in rows if r.error is not None]
    judged = [r for r in rows if r.covered is not None]
    return {"n_predictions": len(rows), "n_pairs": len({(r.models, r.sharing) for r in rows}),
            "median_error": statistics.median(errors) if errors else None,
            "p90_error": _quantile(errors, 0.9), "max_error": max(errors) if errors else None,
            "coverage": sum(bool(r.covered) for r in judged) / len(judged) if judged else None,
            "n_with_interval": len(judged),
            "mean_interval_width": statistics.fmean(r.width for r in judged if r.width is not None) if judged else None}


def _per_mechanism(items: Sequence[T], sharing: Callable[[T], str], precise: Callable[[T], bool],
                   figures: Callable[[Sequence[T]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``figures`` per mechanism, over every item and over the precisely measured ones."""
    found = {}
    for mechanism in MECHANISMS:
        of = [i for i in items if sharing(i) == mechanism]
        if of:
            found[mechanism] = {**figures(of), "precise_only": figures([i for i in of if precise(i)])}
    return found


def by_mechanism(rows: Sequence[HeldOut]) -> dict[str, dict[str, Any]]:
    """The summary per mechanism, over every pair and over the precisely measured ones."""
    return _per_mechanism(rows, lambda r: r.sharing, lambda r: r.precise, summarise)


def _relative_sd(pair: MeasuredPair, between: float = 0.0) -> Optional[float]:
    """A measurement's standard error over its value, its 95 % interval's half-width read as 1.96 of
    them: the most the interval allows (one from few starts uses a wider t), so a floor read from it
    is if anything high. ``between``, the spread between sessions in units of the error scale, adds
    how far the hosts its records ran on can sit from the mean over hosts, each record taken as a
    session on a host of its own (so the term shrinks with more records; records from one host, as
    some archived H100 pairs', make it too small); a pair whose own sessions disagreed already holds
    some of the spread in its interval, which makes it too large."""
    if pair.efficiency_ci is None or not pair.efficiency:
        return None
    low, high = pair.efficiency_ci
    value = _measured(pair)
    hosts = between * efficiency_scale(value) / math.sqrt(max(pair.records, 1))
    return math.hypot(max(0.0, high - low) / 2.0 / RECORD_Z, hosts) / value


def _share_within(error: float, sd: float) -> float:
    """P(|N(0, sd)| <= error)."""
    return 1.0 if sd == 0.0 else 2.0 * NORMAL.cdf(error / sd) - 1.0


def _solve(reaches: Callable[[float], bool]) -> float:
    """The least error at which ``reaches`` holds (it holds at more where it holds at less)."""
    low, high = 0.0, 1.0
    while not reaches(high) and high < 2.0 ** 20:
        low, high = high, 2.0 * high
    for _ in range(60):
        middle = (low + high) / 2.0
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def noise_floor(pairs: Sequence[MeasuredPair], between: float = 0.0) -> dict[str, Any]:
    """What a planner that knew every pair's true efficiency would show against these measurements, from
    the measurements' own noise: its median error over the pairs, and the worst error its median and
    one time in ten reach (each pair's error ``|N(0, sd)|`` of its value, independent). A worst error
    near these is as far as these measurements can tell. With ``between`` (``_relative_sd``) the true
    efficiency is the pair's mean over hosts, which a session on one host misses by more."""
    sds = [sd for sd in (_relative_sd(p, between) for p in pairs) if sd is not None]
    if not sds:
        return {"n_pairs": 0, "median_error": None, "worst_error": None, "worst_error_p90": None}

    def worst_reaches(q: float) -> Callable[[float], bool]:
        return lambda error: math.prod(_share_within(error, sd) for sd in sds) >= q

    return {"n_pairs": len(sds),
            "median_error": _solve(lambda error: statistics.fmean(_share_within(error, sd) for sd in sds) >= 0.5),
            "worst_error": _solve(worst_reaches(0.5)), "worst_error_p90": _solve(worst_reaches(0.9))}


def noise_floors(pairs: Sequence[MeasuredPair], between: float = 0.0) -> dict[str, dict[str, Any]]:
    """The noise floor per mechanism, over every pair and over the precisely measured ones."""
    return _per_mechanism(pairs, lambda p: p.sharing, lambda p: _within_precise(p.efficiency_ci, _measured(p)),
                          lambda of: noise_floor(of, between))


def floors_across_hosts(pairs: Sequence[MeasuredPair], spread: Optional[SessionSpread]) -> dict[str, Any]:
    """The noise floor with the spread between sessions on several hosts added: each measurement is one
    host's (or a few hosts' mean), while a planner is asked for what the pair does on the next host.
    Null, with the reason, where no pair was measured in two or more sessions to tell the spread."""
    if spread is None:
        return {"between_sessions": None, "reason": "no pair was measured in two or more sessions", "floors": {}}
    return {"between_sessions": {"sd": spread.sd, "pairs": spread.pairs}, "reason": None,
            "floors": noise_floors(pairs, spread.sd)}


def _better(pairs: dict[str, MeasuredPair]) -> tuple[str, bool]:
    """(the mechanism measured better, whether its lead is beyond both measurements' intervals)."""
    slicing, mps = pairs["timeslice"], pairs["mps"]
    best = "mps" if _measured(mps) > _measured(slicing) else "timeslice"
    low_ci, high_ci = (slicing, mps) if best == "mps" else (mps, slicing)
    clear = (low_ci.efficiency_ci is not None and high_ci.efficiency_ci is not None
             and high_ci.efficiency_ci[0] > low_ci.efficiency_ci[1])
    return best, clear


def mechanism_choice(planner: Planner, card_mb: float,
                     blind_for: Callable[[tuple[str, str]], list[Planner]]) -> dict[str, Any]:
    """For every pair measured under both mechanisms: what each blind planner recommends, against the
    mechanism measured better; a lead within the measurements' intervals accepts either."""
    both: dict[tuple[str, str], dict[str, MeasuredPair]] = {}
    for p in _measured_pairs(planner):
        both.setdefault(_two(p), {})[p.sharing] = p
    rows = []
    for models, pairs in sorted(both.items()):
        if set(pairs) != set(MECHANISMS):
            continue
        best, clear = _better(pairs)
        for blind in blind_for(models):
            chosen = blind.pair(models, card_mb, MECHANISMS)["recommended"]
            rows.append({"pair": list(models), "measured_better": best, "clearly": clear, "recommended": chosen,
                         "right": chosen == best or not clear})
    return {"n": len(rows), "pairs": len({tuple(r["pair"]) for r in rows}),
            "share_right": sum(r["right"] for r in rows) / len(rows) if rows else None,
            "share_same_as_measured_mean": sum(r["recommended"] == r["measured_better"] for r in rows) / len(rows)
            if rows else None, "rows": rows}


def validate(planner: Planner, card_mb: float) -> dict[str, Any]:
    """The planner's validation on its own measured pairs: leave one workload out, leave one pair out,
    and the choice of mechanism, with every prediction."""
    blind = _blind_by_workload(planner)
    workload_rows = leave_one_workload_out(planner, blind)
    host_rows = leave_one_workload_out_on_host(planner, blind)
    pair_rows = leave_one_pair_out(planner)
    measured = _measured_pairs(planner)
    choice = mechanism_choice(planner, card_mb, lambda models: [blind[m] for m in models])
    return {"measured_pairs": {m: planner.measured_count(m) for m in MECHANISMS},
            "workloads": list(blind),
            "precise_within": PRECISE,
            "leave_one_workload_out": by_mechanism(workload_rows),
            "leave_one_workload_out_busy_on_host": by_mechanism(host_rows),
            "leave_one_pair_out": by_mechanism(pair_rows),
            "base_model_alone": by_mechanism(base_model_alone(planner)),
            "noise_floor": noise_floors(measured),
            "noise_floor_across_hosts": floors_across_hosts(measured, planner.measured.between_sessions),
            "timeslicing": timeslicing_basis(planner),
            "mps_base": mps_basis(planner),
            "mechanism_choice": choice,
            "groups": [r.as_dict() for r in groups(planner)],
            "predictions": {"leave_one_workload_out": [r.as_dict() for r in workload_rows],
                            "leave_one_workload_out_busy_on_host": [r.as_dict() for r in host_rows],
                            "leave_one_pair_out": [r.as_dict() for r in pair_rows]}}
