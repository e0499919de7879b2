"""Every pair of a selection, predicted: fit on the card, concurrency efficiency with an interval,
energy saved, the mechanism to use, and a rank; each figure says what it rests on.

A pair measured under a mechanism is reported as measured (its mean, and its interval where the
records have one, within the physical range), saying whether the measurement is the package's reference
pairs of the card (``planning.cards``) or the user's own. Any other pair is predicted: the base
model from its solo profiles plus the correction learned from all measured pairs, with an interval calibrated on workloads the
correction never saw (``fit``). MPS is
recommended only where measured MPS pairs support it; without them the row says time-slicing,
and that MPS was not measured.
"""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from pytest_gpu_pairs.planning import fit as learning
from pytest_gpu_pairs.planning import memory, model
from pytest_gpu_pairs.planning.cards import reference_name
from pytest_gpu_pairs.planning.measured import RECORD_Z, Measured, MeasuredPair, SessionSpread, pair_key
from pytest_gpu_pairs.planning.profiles import Profiles, SoloProfile
from pytest_gpu_pairs.planning.scale import ERROR_FLOOR, MAX_EFFICIENCY, efficiency_scale

CLEARLY_BETTER = 0.05  # efficiency by which MPS must be predicted to beat time-slicing to be recommended
HOST_SPREAD = 0.15  # log-SD of a host's pace that the reference pairs' hosts did not show (``_host_shift``)
HOST_Z = statistics.NormalDist().inv_cdf(0.5 + learning.CONFIDENCE / 2)  # both ends of the stated interval
MEASURED, LEARNED, SOLO_ONLY, NONE = "measured pair", "solo profiles + measured pairs", "solo profiles only", "no profile"
REFERENCE_NAME = "H100 reference"  # the whole-run fit figures of a table: only the H100's carries them
REFERENCE_ORIGIN = re.compile(r"\((\w+ reference), ")
USE_TEXT = {"timeslice": "time-slicing", "mps": "MPS"}  # what a row says to use


def _clip(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


@dataclass(frozen=True)
class Figure:
    """A predicted (or measured) figure with its interval and basis."""

    value: Optional[float]
    low: Optional[float]
    high: Optional[float]
    basis: str
    estimated: bool = True  # False: no spread could be estimated and the interval is the physical range

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "interval": [self.low, self.high] if self.value is not None else None,
                "interval_estimated": self.estimated,
                "basis": self.basis}


def _measured_basis(pair: MeasuredPair) -> str:
    origin = f"{reference_name(pair.sources[0])}, " if pair.reference and pair.sources else ""
    return f"{MEASURED} ({origin}{pair.records} record(s))"


def _measured_efficiency(pair: MeasuredPair, spread: Optional[SessionSpread] = None) -> Figure:
    """The measurement, within the physical range: a mean above 2 is noise around a pair that shares
    for free (two jobs cannot do more than both run alone), so it reads as 2 and says so; a group's
    bound is its job count. Its interval adds the spread between sessions the measured pairs show, as
    the machine that runs the pair is another session's host."""
    assert pair.efficiency is not None
    value, bound = pair.efficiency, float(len(pair.models))
    low, high = pair.efficiency_ci or (None, None)
    basis = _measured_basis(pair)
    if low is not None and high is not None and spread is not None and spread.sd > 0.0:
        between = RECORD_Z * spread.sd * efficiency_scale(min(value, bound))
        low, high = _widened(low, high, between)
        basis += (f"; interval with the spread between sessions on other hosts (±{between:.2f} here, from "
                  f"{spread.pairs} pair(s) measured in several)")
    if value > bound:
        basis += f"; measured {value:.3f}, above the physical bound of {bound:g}: read as {bound:g}"
    bounded = [None if v is None else _clip(v, 0.0, bound) for v in (value, low, high)]
    return Figure(bounded[0], bounded[1], bounded[2], basis)


def _widened(low: float, high: float, by: float) -> tuple[float, float]:
    half, centre = math.hypot((high - low) / 2, by), (low + high) / 2
    return centre - half, centre + half


def settled_busy(profiles: Profiles, measured: Measured) -> Profiles:
    """The solo profiles, each workload's busy fraction taken halfway to what its measured pairs' solo
    phases read on the whole card (where a pair carries them: its cases' readings, settled after each
    switch, read again by ``planning.measured``, which leaves out a job alone under an MPS thread
    limit; the package's H200 table holds them). A short profile and a case's half-second phases each misread some jobs (resnet56 0.63
    in its profile, 0.52-0.53 in its cases); over the H200's first 22-26 pairs the halfway value
    predicted held-out pairs with the lowest median error and the best coverage, over 34 it is not
    told apart from the profiles alone (docs/planner.md). A workload no measured pair holds keeps its
    profile."""
    read: dict[str, list[float]] = {}
    for pair in measured.pairs.values():
        for name, busy in pair.solo_busy:
            read.setdefault(name, []).append(busy)
    if not read:
        return profiles
    workloads = {name: replace(p, busy=(p.busy + statistics.fmean(read[name])) / 2)
                 if name in read and p.busy is not None else p for name, p in profiles.workloads.items()}
    return replace(profiles, workloads=workloads)


def _pairs_within(models: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of a group's jobs."""
    return [pair_key(a, b) for i, a in enumerate(models) for b in models[i + 1:]]


def _host_factors() -> tuple[float, float]:
    """The busy fractions' factors at both ends of the host's term: busier, then idler."""
    return math.exp(HOST_Z * HOST_SPREAD), math.exp(-HOST_Z * HOST_SPREAD)


def _host_move(value: float, solo: Profiles, models: Sequence[str],
               value_at: Callable[[Profiles], Optional[float]]) -> float:
    """How far ``value_at`` moves from ``value`` where every job of ``models`` runs at either end of
    the host's term (one host, one pace for them all)."""
    moved = [value_at(_busier(solo, models, factor)) for factor in _host_factors()]
    return max((abs(v - value) for v in moved if v is not None), default=0.0)


def _busier(solo: Profiles, models: Iterable[str], factor: float) -> Profiles:
    """``solo`` with the busy fractions of ``models`` times ``factor``, within the card's whole time."""
    changed = {m: replace(p, busy=min(1.0, p.busy * factor)) for m in models
               if (p := solo.get(m)) is not None and p.busy is not None}
    return replace(solo, workloads={**solo.workloads, **changed})


def _without_workload(measured: Measured, name: str) -> Measured:
    return Measured({k: v for k, v in measured.pairs.items() if name not in k[0]},
                    {k: v for k, v in measured.fit.items() if name not in k}, between_sessions=measured.between_sessions)


@dataclass
class Planner:
    profiles: Profiles
    measured: Measured = field(default_factory=Measured)
    profiled_here: frozenset[str] = frozenset()  # workloads whose solo profile ``gpu-pairs profile`` measured here
    whole_runs: dict[tuple[str, float], memory.WholeRun] = field(default_factory=dict)  # (model, card MB): measured here
    busy_here: dict[str, float] = field(default_factory=dict)  # busy fractions profiled on this host, same GPU model
    solo: Profiles = field(init=False)  # the profiles with the busy fractions the measured pairs read (``settled_busy``)
    here: Profiles = field(init=False)  # ``solo`` with ``busy_here``: what predictions read, the learning never

    def __post_init__(self) -> None:
        self.card = model.Card(self.profiles.idle_power_w, self.profiles.power_limit_w)
        self.solo = settled_busy(self.profiles, self.measured)
        self.here = self._with_busy(self.busy_here)
        timesliced = self._timesliced_pairs()
        self.timeslicing, self.timesliced_count = learning.timeslicing(timesliced), len(timesliced)
        mps_pairs = self._measured_under("mps")
        self.mps, self.mps_count = learning.mps(mps_pairs, self.card), len(mps_pairs)
        self.efficiency_model = learning.learn(self._observations("efficiency"), efficiency_scale, (0.0, MAX_EFFICIENCY),
                                               folds=self._folds("efficiency"))
        self.energy_model = learning.learn(self._observations("energy_saved"), bounds=(-1.0, 1.0),
                                           folds=self._folds("energy_saved"))

    def _with_busy(self, busy: dict[str, float]) -> Profiles:
        """``solo`` with the busy fractions read on the host that runs the pairs: a host-bound job keeps the
        card busier on a faster host (on one H200 host resnet44 and word_lm, time-sliced, measured 1.56
        where the table's busy fractions predicted 1.85). The model learnt from the reference pairs stays
        as it is: they ran on the table's hosts."""
        known = {m: b for m, b in busy.items() if self.solo.get(m) is not None}
        if not known:
            return self.solo
        return replace(self.solo, workloads={**self.solo.workloads,
                                             **{m: replace(self.solo.workloads[m], busy=b) for m, b in known.items()}})

    def without(self, models: tuple[str, str]) -> Planner:
        """The planner that never saw ``models`` measured: for leave-one-pair-out validation."""
        key = pair_key(*models)
        kept = Measured({k: v for k, v in self.measured.pairs.items() if k[0] != key},
                        {k: v for k, v in self.measured.fit.items() if k != key},
                        between_sessions=self.measured.between_sessions)
        return replace(self, measured=kept)

    def without_workload(self, name: str) -> Planner:
        """The planner that never saw ``name`` measured beside anything: for leave-one-workload-out validation."""
        return replace(self, measured=_without_workload(self.measured, name))

    def _folds(self, what: str) -> Optional[learning.Folds]:
        """Where the busy fractions learn from measured pairs, the observations as a planner that never
        measured a workload would see them: its interval is calibrated on that, not on fractions its
        own pairs taught."""
        if self.solo is self.profiles:
            return None
        return lambda name: self._observations(what, settled_busy(self.profiles, _without_workload(self.measured, name)))

    def _timesliced_pairs(self) -> list[tuple[float, float, float]]:
        """(busy, busy, measured efficiency within the physical range) of each measured time-sliced pair."""
        return [(float(a.busy or 0.0), float(b.busy or 0.0), measured) for a, b, measured in self._measured_under("timeslice")]

    def _measured_under(self, mechanism: str) -> list[tuple[SoloProfile, SoloProfile, float]]:
        """(profile, profile, measured efficiency within the physical range) of each pair measured under
        ``mechanism`` whose two solo profiles give their busy fractions."""
        found = []
        for (models, sharing), pair in sorted(self.measured.pairs.items()):
            a, b = self.solo.get(models[0]), self.solo.get(models[1])
            if sharing == mechanism and pair.efficiency and a is not None and b is not None \
                    and a.busy is not None and b.busy is not None:
                found.append((a, b, min(pair.efficiency, MAX_EFFICIENCY)))
        return found

    def _observations(self, what: str, solo: Optional[Profiles] = None) -> list[learning.Observation]:
        found = []
        for (models, sharing), pair in sorted(self.measured.pairs.items()):
            value = getattr(pair, what)
            predicted = self._base(models, sharing, solo)
            if value is None or predicted is None:
                continue
            base_value = predicted.efficiency if what == "efficiency" else self._base_energy(models, predicted, solo)
            if what == "efficiency":
                value = min(value, MAX_EFFICIENCY)
            if base_value is not None:
                found.append(learning.Observation(models, sharing == "mps", predicted.contention, value - base_value,
                                                  base_value))
        return found

    def _profiles_of(self, models: tuple[str, str], solo: Optional[Profiles]) -> tuple[Optional[SoloProfile], Optional[SoloProfile]]:
        table = solo or self.solo
        return table.get(models[0]), table.get(models[1])

    def _base(self, models: tuple[str, str], sharing: str, solo: Optional[Profiles] = None) -> Optional[model.Base]:
        a, b = self._profiles_of(models, solo)
        return model.base(a, b, sharing, self.card, self.timeslicing, self.mps) if a is not None and b is not None else None

    def _base_energy(self, models: tuple[str, str], base: model.Base, solo: Optional[Profiles] = None) -> Optional[float]:
        a, b = self._profiles_of(models, solo)
        if a is None or b is None:
            return None
        return model.energy_saved(a, b, (base.rate_a, base.rate_b), self.card)

    def measured_count(self, sharing: str) -> int:
        return self.measured.count(sharing)

    def _learned(self, learned: learning.Learned, base_value: float, models, sharing: str, contention: float,
                 low: float, high: float, host: Optional[Callable[[float], float]] = None) -> Figure:
        """The base value with the learnt correction; the interval's half-width is the learnt one at that
        value, joined in quadrature by ``host`` (how far the value moves where the host keeps the jobs
        busier or idler than the profiles say)."""
        value = _clip(base_value + learned.correction(models, sharing == "mps", contention), low, high)
        width = learned.half_width(sharing == "mps", value) if self.measured_count(sharing) >= learning.MIN_PAIRS else None
        basis = f"{LEARNED} ({learned.n})" if learned.n else SOLO_ONLY
        if width is None:
            return Figure(value, low, high, basis, estimated=False)
        width = math.hypot(width, host(value)) if host is not None else width
        return Figure(value, _clip(value - width, low, high), _clip(value + width, low, high), basis)

    def efficiency(self, models: tuple[str, str], sharing: str) -> Figure:
        pair = self.measured.of(models, sharing)
        if pair is not None and pair.efficiency is not None:
            return _measured_efficiency(pair, self.measured.between_sessions)
        return self._predicted_efficiency(pair_key(*models), sharing, self.here)

    def _predicted_efficiency(self, key: tuple[str, str], sharing: str, solo: Optional[Profiles] = None,
                              host: bool = True) -> Figure:
        base = self._base(key, sharing, solo)
        if base is None:
            return Figure(None, None, None, NONE)
        shift = (lambda value: self._host_shift(key, sharing, solo or self.solo, value)) if host else None
        return self._learned(self.efficiency_model, base.efficiency, key, sharing, base.contention, 0.0, MAX_EFFICIENCY,
                             host=shift)

    def _host_shift(self, key: tuple[str, str], sharing: str, solo: Profiles, value: float) -> float:
        """How far the predicted efficiency moves where the host that runs the pair keeps both jobs
        ``HOST_Z`` host spreads busier or idler than ``solo`` says (both at once: one host, one pace).

        A host-bound job's busy fraction is its GPU time per step, which the card sets (resnet20
        5.1-5.2 ms on three H200 hosts), times its steps a second, which the host sets and moves: on
        four H200 hosts beyond the table's the pairs' solo phases read their jobs 3-34 % busier than
        the table on average per host (log 0.03-0.29, root mean square 0.175), and a profile minutes
        before the cases read them -9 % to +49 % off (reports/reference/planner_validation/host/). The
        learnt interval already holds the reference pairs' own spread (log 0.085 around each workload's
        mean), so the host adds sqrt(0.175^2 - 0.085^2) = 0.15."""
        return _host_move(value, solo, key, lambda busier: self._pair_value(key, sharing, busier))

    def _pair_value(self, key: tuple[str, str], sharing: str, solo: Profiles) -> Optional[float]:
        """A pair's efficiency from the busy fractions in ``solo``: its base model plus the correction."""
        base = self._base(key, sharing, solo)
        if base is None:
            return None
        correction = self.efficiency_model.correction(key, sharing == "mps", base.contention)
        return _clip(base.efficiency + correction, 0.0, MAX_EFFICIENCY)

    def efficiency_from_busy(self, models: tuple[str, str], sharing: str, busy: dict[str, float]) -> Figure:
        """The prediction from busy fractions read elsewhere (a pair's own solo phases, on its host),
        the learnt model unchanged: what a user gets whose profiles were measured on the machine that
        runs the pair, where the package's were measured on another host."""
        key = pair_key(*models)
        if any(self.solo.get(m) is None or m not in busy for m in key):
            return Figure(None, None, None, NONE)
        return self._predicted_efficiency(key, sharing, self._with_busy({m: busy[m] for m in key}))

    def energy_saved(self, models: tuple[str, str], sharing: str) -> Figure:
        pair: Optional[MeasuredPair] = self.measured.of(models, sharing)
        if pair is not None and pair.energy_saved is not None:
            return Figure(pair.energy_saved, None, None, _measured_basis(pair))
        key = pair_key(*models)
        base = self._base(key, sharing, self.here)
        value = self._base_energy(key, base, self.here) if base is not None else None
        if base is None or value is None:
            return Figure(None, None, None, NONE if base is None else "no solo power")
        return self._learned(self.energy_model, value, key, sharing, base.contention, -1.0, 1.0)

    def fit(self, models: tuple[str, str], card_mb: float) -> memory.Fit:
        key = pair_key(*models)
        whole_a, whole_b = self.whole_run(key[0], card_mb), self.whole_run(key[1], card_mb)
        if whole_a is not None and whole_b is not None and key not in self.measured.fit:
            return memory.whole_run_fit(card_mb, whole_a, whole_b)
        need, basis = memory.need(self.profiles.get(key[0]), self.profiles.get(key[1]),
                                  self.profiles.pair_min_fit_mb.get(frozenset(key)), self.profiles.reserved_mb)
        return memory.verdict(card_mb, need, basis, self.measured.fit.get(key))

    def whole_run(self, model_name: str, card_mb: float) -> Optional[memory.WholeRun]:
        """The workload's whole-run need on this card: measured here (a results folder's fit profile at
        default hyperparameters), else the package's H100 reference where it was measured on this card."""
        here = self.whole_runs.get((model_name, card_mb))
        if here is not None:
            return here
        row = self.profiles.get(model_name)
        if row is None or row.fit_card_mb != card_mb or row.fit_need_mb is None or row.fit_steady_mb is None:
            return None
        return memory.WholeRun(row.fit_need_mb, row.fit_steady_mb, f"{REFERENCE_NAME}")

    def group_efficiency(self, models: Sequence[str], sharing: str, measured: bool = True) -> Figure:
        """A group of more than two jobs: the base model of all of them, plus the correction each of its
        pairs carries (what measured pairs taught about two of these jobs together), within ``[0, n]``;
        the interval adds the pairs' learnt half-widths in quadrature, then the group's own host term
        (one host moves every job at once, so its pairs' host terms are not independent). No group
        taught the correction, and one measured group is all the evidence for this rule: the basis
        says so."""
        group = self.measured.groups.get((tuple(sorted(models)), sharing)) if measured else None
        if group is not None and group.efficiency is not None:
            return _measured_efficiency(group, self.measured.between_sessions)
        value = self._group_value(models, sharing, self.here)
        if value is None:
            return Figure(None, None, None, NONE)
        pairs = _pairs_within(models)
        basis = f"{LEARNED} ({self.efficiency_model.n}); " + GROUP_BASIS.format(n=len(models), pairs=len(pairs))
        halves = [self._pair_half_width(p, sharing) for p in pairs]
        if any(h is None for h in halves):
            return Figure(value, 0.0, float(len(models)), basis, estimated=False)
        host = _host_move(value, self.here, models, lambda busier: self._group_value(models, sharing, busier))
        half = math.hypot(math.sqrt(sum(h * h for h in halves if h is not None)), host)
        return Figure(value, _clip(value - half, 0.0, len(models)), _clip(value + half, 0.0, len(models)), basis)

    def _group_value(self, models: Sequence[str], sharing: str, solo: Profiles) -> Optional[float]:
        """A group's efficiency from the busy fractions in ``solo``: its base model plus its pairs' corrections."""
        profiles = [solo.get(m) for m in models]
        known = [p for p in profiles if p is not None]
        rates = model.group_rates(known, sharing, self.card, self.timeslicing, self.mps) if len(known) == len(profiles) else None
        if rates is None:
            return None
        learned, mps = self.efficiency_model, sharing == "mps"
        busy = {p.model: p.busy or 0.0 for p in known}
        pairs = _pairs_within(models)
        correction = sum(learned.correction(p, mps, busy[p[0]] * busy[p[1]]) for p in pairs)
        return _clip(sum(rates) + correction, 0.0, float(len(models)))

    def _pair_half_width(self, models: tuple[str, str], sharing: str) -> Optional[float]:
        """A pair's share of a group's interval, without the host's term (the group takes its own): a
        measured pair's is the planner's own half-width at its value (what predicting it would cost),
        whether or not its measurement kept an interval."""
        figure = self.efficiency(models, sharing)
        if figure.value is not None and figure.basis.startswith(MEASURED):
            return self.efficiency_model.half_width(sharing == "mps", figure.value)
        figure = self._predicted_efficiency(pair_key(*models), sharing, self.here, host=False)
        if not figure.estimated or figure.value is None or figure.low is None or figure.high is None:
            return None
        return (figure.high - figure.low) / 2.0

    def group(self, models: Sequence[str], card_mb: float, mechanisms: Sequence[str]) -> dict[str, Any]:
        """A group's row, as a pair's: its efficiency per mechanism, its fit, the mechanism and what it rests on."""
        names = sorted(models)
        unknown = {"value": None, "interval": None, "interval_estimated": False,
                   "basis": "energy saved is predicted for pairs only"}
        figures: dict[str, dict[str, Any]] = {m: {"efficiency": self.group_efficiency(names, m).as_dict(),
                                                  "energy_saved": dict(unknown), "measured_pairs": self.measured_count(m)}
                                              for m in mechanisms}
        fit = self.group_fit(names, card_mb)
        recommended, note, use = recommend(figures)
        return {"pair": names, "fit": {"verdict": fit.verdict, "need_mb": fit.need_mb, "spare_mb": fit.spare_mb,
                                       "basis": fit.basis},
                "mechanisms": figures, "recommended": recommended, "use": use, "note": note,
                "rests_on": rests_on({f["efficiency"]["basis"] for f in figures.values()},
                                     bool(self.profiled_here & set(names)))}

    def group_fit(self, models: Sequence[str], card_mb: float) -> memory.Fit:
        runs = [self.whole_run(m, card_mb) for m in models]
        if all(r is not None for r in runs):
            return memory.whole_run_fit(card_mb, *(r for r in runs if r is not None))
        need, basis = memory.need_of_all([self.profiles.get(m) for m in models], self.profiles.reserved_mb)
        return memory.verdict(card_mb, need, basis)

    def pair(self, models: tuple[str, str], card_mb: float, mechanisms: Sequence[str]) -> dict[str, Any]:
        key = pair_key(*models)
        figures: dict[str, dict[str, Any]] = {m: {"efficiency": self.efficiency(key, m).as_dict(), "energy_saved": self.energy_saved(key, m).as_dict(),
                       "measured_pairs": self.measured_count(m)} for m in mechanisms}
        fit = self.fit(key, card_mb)
        recommended, note, use = recommend(figures)
        return {"pair": list(key), "fit": {"verdict": fit.verdict, "need_mb": fit.need_mb, "spare_mb": fit.spare_mb,
                                          "basis": fit.basis},
                "mechanisms": figures, "recommended": recommended, "use": use, "note": note,
                "rests_on": rests_on({f["efficiency"]["basis"] for f in figures.values()},
                                     bool(self.profiled_here & set(key)))}


GROUP_BASIS = "a group of {n}: its base model plus its {pairs} pairs' corrections; interval from theirs, not calibrated on groups"


def interval_basis(planner: Planner) -> dict[str, Any]:
    """What the efficiency intervals rest on: their confidence, the host's term, and per mechanism the
    quantile of held-out errors over the scale and how many held-out errors it was taken from."""
    learned = planner.efficiency_model
    return {"confidence": learning.CONFIDENCE, "calibrated_on": "leave one workload out",
            "host_spread": HOST_SPREAD,
            "host_term": f"the move of the predicted efficiency where both jobs run {HOST_Z * HOST_SPREAD:.2f} log busier "
                         "or idler (a host's pace beyond the reference pairs'), joined to the half-width in quadrature",
            "scale": f"{ERROR_FLOOR} + max(0, (2 - E) (E - 1)) at the predicted efficiency E",
            **{("mps" if mps else "timeslice"): {"quantile": learned.quantiles.get(mps),
                                                  "held_out_errors": learned.scores.get(mps, 0)} for mps in (False, True)}}


def timeslicing_basis(planner: Planner) -> dict[str, Any]:
    """Time-slicing's two numbers in the base model, and how many measured pairs chose them."""
    chosen = planner.timesliced_count >= learning.MIN_TIMESLICED_PAIRS
    return {"collision_weight": planner.timeslicing.collision_weight, "capacity": planner.timeslicing.capacity,
            "measured_pairs": planner.timesliced_count, "learnt": chosen}


def timeslicing_line(basis: dict[str, Any]) -> str:
    numbers = (f"a collision costs {basis['collision_weight']:g} of its overlap, both jobs fill at most "
               f"{basis['capacity']:g} of the card's time")
    if basis["learnt"]:
        return f"time-slicing's base model: {numbers} (learnt from {basis['measured_pairs']} measured pairs)"
    return (f"time-slicing's base model: {numbers} (the physics before any pair: {basis['measured_pairs']} measured "
            f"pairs, {learning.MIN_TIMESLICED_PAIRS} needed to learn them)")


def mps_basis(planner: Planner) -> dict[str, Any]:
    """MPS's two numbers in the base model, and how many measured pairs chose them."""
    return {"stretch": planner.mps.stretch, "capacity": planner.mps.capacity, "measured_pairs": planner.mps_count,
            "learnt": planner.mps_count >= learning.MIN_MPS_PAIRS}


def mps_line(basis: dict[str, Any]) -> str:
    numbers = (f"a kernel's stretch beside another's costs {basis['stretch']:g} of it, both jobs' kernels fill at "
               f"most {basis['capacity']:g} of the card's time, each counted as busy as it is alone")
    if basis["learnt"]:
        return f"MPS's base model: {numbers} (learnt from {basis['measured_pairs']} measured pairs)"
    return (f"MPS's base model: {numbers} (the physics before any pair: {basis['measured_pairs']} measured "
            f"pairs, {learning.MIN_MPS_PAIRS} needed to learn them)")


def rests_on(bases: set[str], profiled_here: bool = False) -> str:
    """The strongest thing a pair's row rests on: a measurement of its own (the user's, or the
    package reference's), else the solo profiles (one of them measured here by ``gpu-pairs
    profile``, where it was), else nothing."""
    measured = [b for b in bases if b.startswith(MEASURED)]
    origins = [m.group(1) for b in measured if (m := REFERENCE_ORIGIN.search(b))]
    if len(origins) < len(measured):
        return "measured"
    if measured:
        return f"measured ({origins[0]})"
    if not any(b != NONE for b in bases):
        return "nothing"
    return "solo profiles (a profile measured here)" if profiled_here else "solo profiles"


def mps_supported(figures: dict[str, dict[str, Any]]) -> bool:
    """Measured MPS pairs stand behind the MPS figure: the pair itself was measured under MPS, or
    enough pairs were (``MIN_PAIRS``) to teach the correction and give it an interval."""
    mps = figures.get("mps")
    return mps is not None and (mps["efficiency"]["basis"].startswith(MEASURED)
                                or mps["measured_pairs"] >= learning.MIN_PAIRS)


def _use(mechanism: str, figures: dict[str, dict[str, Any]]) -> str:
    if "mps" not in figures or mps_supported(figures):
        return USE_TEXT[mechanism]
    return "MPS (not measured: solo profiles only)" if mechanism == "mps" else "time-slicing (MPS not measured)"


def recommend(figures: dict[str, dict[str, Any]]) -> tuple[Optional[str], str, str]:
    """(mechanism, note, what the row says to use). Time-slicing, the driver's default that needs
    no daemon, unless MPS is predicted better by more than ``CLEARLY_BETTER`` and measured MPS pairs
    support that prediction; a prediction from solo profiles alone recommends nothing the project
    never measured. The two predictions of a pair err together (the same jobs, the same profiles),
    so their difference is told apart by a margin, not by one interval's top. Leaving one workload
    out, no reference pair of the H100 or the H200 measured clearly better time-sliced; those MPS
    measured clearly better were predicted 0.03 to 0.49 better (25 of the H200's 26 above the margin,
    all 8 of the H100's), those within the measurements' noise -0.02 to 0.11 (the margin was set
    after reading them: 0.1 passed over 7 of the H200's 26)."""
    known = {m: f["efficiency"] for m, f in figures.items() if f["efficiency"]["value"] is not None}
    if not known:
        return None, "no solo profile of one of the jobs: nothing to predict from", "-"
    notes = []
    if "mps" in figures and figures["mps"]["measured_pairs"] == 0:
        notes.append("MPS has no measured pair behind it: solo profiles only")
    if len(known) == 1:
        only = next(iter(known))
        return only, "; ".join(notes), _use(only, figures)
    better = known["mps"]["value"] - known["timeslice"]["value"] > CLEARLY_BETTER
    chosen = "mps" if better and mps_supported(figures) else "timeslice"
    return chosen, "; ".join(notes), _use(chosen, figures)


def rank(predictions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs and groups that fit first, by their recommended mechanism's efficiency per job (a group of
    three can reach 3, a pair 2); then unknown fit; then no fit."""
    order = {"fits": 0, "tight": 0, "unknown": 1, "no": 2}

    def key(p: dict[str, Any]):
        best = p["mechanisms"][p["recommended"]]["efficiency"]["value"] if p["recommended"] else None
        return order[p["fit"]["verdict"]], -(best / len(p["pair"]) if best is not None else -1.0), p["pair"]

    ranked = sorted(predictions, key=key)
    for index, p in enumerate(ranked, 1):
        p["rank"] = index
    return ranked


def plan_pairs(planner: Planner, pairs: Iterable[tuple[str, ...]], card_mb: float,
               mechanisms: Sequence[str] = model.MECHANISMS) -> list[dict[str, Any]]:
    """Every pair and every group of more jobs predicted and ranked together."""
    pairs = list(pairs)
    unique = sorted({pair_key(p[0], p[1]) for p in pairs if len(p) == 2})
    groups = sorted({tuple(sorted(p)) for p in pairs if len(p) > 2})
    return rank([planner.pair(p, card_mb, mechanisms) for p in unique] + [planner.group(g, card_mb, mechanisms) for g in groups])
