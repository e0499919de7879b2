"""Measured pairs in: every concurrent case of any number of results folders (or benchmark JSON
files), through ``record.store``, the only reader of records, and the H100 reference pairs the
package carries. A pair's figures are the mean over the records of the same two workloads and
mechanism, its interval that of the mean over sessions that may disagree, and the pairs measured in
several sessions tell how far sessions disagree (``between_sessions``); fit evidence comes from the
records made on an emulated card (``gpu_memory_mb``); a group of more jobs is kept apart (it teaches
no pair). A pair's jobs' busy fractions in its solo
phases are read again from the readings its cases kept (``gpu_samples.csv``, settled after each
switch as a phase is read now): a record's own figure may predate that reading. An MPS pair's
records whose solo phases ran each job under a thread limit are against a slower solo pace than
those on the whole card: the two never average, the whole card wins, and a pair read only under a
limit says so (``solo_under_mps_limits``). A bad record,
readings file or reference file is one line naming the file and the place in it.

The reference (``reference_pairs.json``, made by ``tools/codegen/reference_pairs.py``) is every pair
(and group) the project measured with the default (interleaved) method on an H100 and committed; a
pair measured in a results folder of the user's replaces the reference's figures of the same pair
and mechanism.
"""
from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from pytest_gpu_pairs.inputs import SettingsError, first_error, read_json
from pytest_gpu_pairs.planning.scale import MAX_EFFICIENCY, efficiency_scale
from pytest_gpu_pairs.record.metrics import measured_mean
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.phases import recorded_solo_busy
from pytest_gpu_pairs.record.stats import CONFIDENCE as RECORD_CONFIDENCE
from pytest_gpu_pairs.record.store import Run, holds_profiles_only, load_run, load_utilisation
from pytest_gpu_pairs.run.methods import EPOCH, INTERLEAVED

REFERENCE = Path(__file__).with_name("reference_pairs.json")
RECORD_Z = statistics.NormalDist().inv_cdf(0.5 + RECORD_CONFIDENCE / 2)  # a record's interval is this many standard errors


def pair_key(a: str, b: str) -> tuple[str, str]:
    """The order-free name of a pair: efficiency, energy and fit do not depend on which job is the foreground."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class MeasuredPair:
    """One pair (or group of more jobs) under one mechanism, as measured: means over its records."""

    models: tuple[str, ...]
    sharing: str
    efficiency: Optional[float]
    efficiency_ci: Optional[tuple[float, float]]
    energy_saved: Optional[float]
    peak_vram_mb: Optional[float]
    records: int
    sources: tuple[str, ...]
    reference: bool = False  # from the package's H100 reference, not from a results folder given
    solo_busy: tuple[tuple[str, float], ...] = ()  # (workload, busy fraction in the pair's solo phases), settled readings
    solo_under_mps_limits: bool = False  # its solo phases had each job alone under an MPS thread limit, not on the whole card


@dataclass(frozen=True)
class FitEvidence:
    """What emulated cards said about a pair: the smallest size it ran on, the largest it ran out of memory on."""

    ran_mb: Optional[float] = None
    oom_mb: Optional[float] = None

    def says(self, card_mb: float) -> Optional[bool]:
        if self.ran_mb is not None and card_mb >= self.ran_mb:
            return True
        if self.oom_mb is not None and card_mb <= self.oom_mb:
            return False
        return None


@dataclass(frozen=True)
class SessionSpread:
    """How far sessions of one pair (other hosts, other days) disagree beyond each one's own noise: one
    standard deviation in units of ``scale.efficiency_scale``, pooled over the pairs measured in
    several sessions. A session's interval holds its own noise only; on the H200 four of five pairs
    drawn at random read 10-15 % lower on another host, their jobs stepping faster alone there."""

    sd: float
    pairs: int


@dataclass
class Measured:
    pairs: dict[tuple[tuple[str, str], str], MeasuredPair] = field(default_factory=dict)
    fit: dict[tuple[str, str], FitEvidence] = field(default_factory=dict)
    skipped: int = 0  # concurrent GPU records of another measuring method
    groups: dict[tuple[tuple[str, ...], str], MeasuredPair] = field(default_factory=dict)  # more than two jobs: never taught
    between_sessions: Optional[SessionSpread] = None  # from the pairs measured in several sessions

    def of(self, models: tuple[str, str], sharing: str) -> Optional[MeasuredPair]:
        return self.pairs.get((pair_key(*models), sharing))

    def count(self, sharing: str) -> int:
        return sum(1 for (_, s), p in self.pairs.items() if s == sharing and p.efficiency is not None)

    def under_mps_limits(self) -> int:
        """MPS pairs whose efficiencies are against each job alone under its thread limit."""
        return sum(1 for p in self.pairs.values() if p.solo_under_mps_limits and p.efficiency is not None)

    def reference_count(self, sharing: str) -> int:
        return sum(1 for (_, s), p in self.pairs.items() if s == sharing and p.efficiency is not None and p.reference)

    def over(self, reference: Measured) -> Measured:
        """These measured pairs over ``reference``: a pair and mechanism measured here replaces the
        reference's, unless only under MPS thread limits where the reference's ran on the whole card
        (``_one_basis``), and fit evidence of the same pair replaces the reference's."""
        pairs = {**reference.pairs, **{key: pair for key, pair in self.pairs.items()
                                       if not _limited_over_whole(pair, reference.pairs.get(key))}}
        return Measured(pairs, {**reference.fit, **self.fit}, self.skipped, {**reference.groups, **self.groups},
                        _resting_on_more(self.between_sessions, reference.between_sessions))


def _resting_on_more(mine: Optional[SessionSpread], theirs: Optional[SessionSpread]) -> Optional[SessionSpread]:
    """The spread between sessions that more pairs measured twice taught: one pair of a user's that
    agreed with itself says little against a table's dozens."""
    if mine is None or theirs is None:
        return mine or theirs
    return mine if mine.pairs >= theirs.pairs else theirs


def _limited_over_whole(pair: MeasuredPair, other: Optional[MeasuredPair]) -> bool:
    return pair.solo_under_mps_limits and other is not None and not other.solo_under_mps_limits


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _concurrent(record) -> bool:
    """A complete record of jobs run together, a pair or a group of more."""
    return record.get("mode") == "concurrent" and bool(record.get("bg_model")) and record.get("complete") is not False


def _group_models(record) -> Optional[tuple[str, ...]]:
    """A group's workloads, from its jobs; None for a pair. A group of more jobs teaches nothing about
    a pair (its efficiency counts every job): it is kept apart, to check the planner's groups against."""
    jobs = record.get("jobs")
    if not (isinstance(record.get("n_jobs"), int) and record.get("n_jobs") > 2 and isinstance(jobs, list)):
        return None
    models = [j.get("model") for j in jobs if isinstance(j, dict)]
    return tuple(sorted(m for m in models if isinstance(m, str))) if len(models) > 2 else None


def _on_gpu(record) -> bool:
    return record.get("device") not in (None, "cpu")


def _measured_whole(record) -> bool:
    """A case that ran out of memory, or failed part way (a job that crashed, an MPS server that
    tore its clients down), says whether the pair fits, not how well it shares: its figures cover
    the rounds before the failure, not the starts the method takes."""
    return not record.get("oom") and not record.get("failure")


def _centres_and_variances(intervals: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    return [(low + high) / 2 for low, high in intervals], [((high - low) / 2 / RECORD_Z) ** 2 for low, high in intervals]


def mean_interval(intervals: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The interval of the mean of independent measurements, each given by its interval as a record
    states it (normal, at ``RECORD_Z``). Sessions on other hosts can disagree by more than each one's own
    noise (on the H200, resnet44 + word_lm read 1.56 [1.47, 1.64] on one host and 1.86 [1.81, 1.90] on
    another, its jobs 26 % busier alone on the first), so the spread between them beyond that noise
    counts too (a random effect, estimated by moments). Averaging the bounds would neither narrow with
    more sessions nor widen where they disagree."""
    centres, variances = _centres_and_variances(intervals)
    n = len(intervals)
    between = max(0.0, statistics.variance(centres) - statistics.fmean(variances)) if n > 1 else 0.0
    half = RECORD_Z * math.sqrt(sum(variances) / n**2 + between / n)
    centre = statistics.fmean(centres)
    return centre - half, centre + half


def session_spread(by_pair: Iterable[Sequence[tuple[float, float]]]) -> Optional[SessionSpread]:
    """The spread between sessions, in the units of each pair's ``efficiency_scale`` and shared by the
    pairs measured in two or more (DerSimonian and Laird's moment estimator over several pairs: each
    session weighed by its own precision, so a short session with a wide interval tells little); None
    where no pair was measured twice."""
    q = df = c = 0.0
    pairs = 0
    for intervals in by_pair:
        centres, variances = _centres_and_variances(intervals)
        if len(intervals) < 2 or min(variances) <= 0:
            continue
        scale = efficiency_scale(min(statistics.fmean(centres), MAX_EFFICIENCY))
        weights = [scale**2 / v for v in variances]
        mean = sum(w * x for w, x in zip(weights, centres)) / sum(weights)
        q += sum(w * ((x - mean) / scale) ** 2 for w, x in zip(weights, centres))
        df += len(intervals) - 1
        c += sum(weights) - sum(w * w for w in weights) / sum(weights)
        pairs += 1
    return SessionSpread(math.sqrt(max(0.0, (q - df) / c)), pairs) if pairs else None


def _intervals(records: Sequence) -> list[tuple[float, float]]:
    found = [r.get("concurrency_efficiency_ci") for r in records]
    return [(i[0], i[1]) for i in found if isinstance(i, list) and len(i) == 2 and None not in i]


def _ci(records: Sequence) -> Optional[tuple[float, float]]:
    intervals = _intervals(records)
    return mean_interval(intervals) if intervals else None


def _ran(found: list[tuple[str, Any]]) -> list:
    """The records that measured the pair whole: no OOM, no failure."""
    return [r for _, r in found if _measured_whole(r)]


def _pair(models: tuple[str, ...], sharing: str, found: list[tuple[str, Any]]) -> MeasuredPair:
    records = [r for _, r in found]
    ran = _ran(found)
    return MeasuredPair(models, sharing, measured_mean(_number(r.get("concurrency_efficiency")) for r in ran), _ci(ran),
                        measured_mean(_number(r.get("energy_saved_vs_serial")) for r in ran),
                        measured_mean(_number(r.get("peak_vram_mb")) for r in ran), len(records),
                        tuple(sorted({s for s, _ in found})))


def _fit_evidence(records: Iterable) -> FitEvidence:
    ran: list[float] = []
    oom: list[float] = []
    for record in records:
        card = _number(record.get("gpu_memory_mb"))
        if card is None:
            continue
        (oom if record.get("oom") else ran).append(card)
    return FitEvidence(min(ran) if ran else None, max(oom) if oom else None)


def _seen_before(record: Record, seen: set[str]) -> bool:
    """Whether the same measurement was read already: a record copied into two results folders (a
    study that reuses another's sessions), or a folder given twice, counts once."""
    digest = hashlib.sha256(json.dumps(record.to_dict(), sort_keys=True, default=str).encode()).hexdigest()
    if digest in seen:
        return True
    seen.add(digest)
    return False


def _solo_busy(run: Run, case_id: str, record: Record) -> dict[str, float]:
    """Each workload's busy fraction in the record's solo phases, read again from its case folder's
    readings (``record.phases.recorded_solo_busy``); nothing where the case kept none."""
    file, _ = run.place(case_id)
    samples = load_utilisation(Path(file).parent) if Path(file).name == "result.json" else None
    if not samples:
        return {}
    models = {"fg": record.get("fg_model"), "bg": record.get("bg_model")}
    return {models[role]: busy for role, busy in recorded_solo_busy(record.get("rounds") or [], samples).items()
            if isinstance(models.get(role), str)}


def _alone_on_the_whole_card(record) -> bool:
    """Whether a case's solo phases had each job alone on the whole card: a time-sliced case, or an MPS
    case whose record shows no thread limit. The default method keeps an MPS case's jobs as MPS clients
    throughout, and a job alone under a thread limit runs its kernels on part of the SMs, so it reads
    busier and steps slower than alone (on an H200, resnet44 0.78-0.82 busy at 52 % of the threads
    against 0.56-0.65 time-sliced). Records made before the method kept the limits count as limited."""
    if (record.get("sharing") or "timeslice") == "timeslice":
        return True
    limits = (record.get("mps") or {}).get("limits")
    return isinstance(limits, dict) and bool(limits) and all(
        isinstance(own, dict) and own.get("active_thread_percentage") in (None, 100) for own in limits.values())


def _one_basis(found: list[tuple[str, Any]]) -> tuple[list[tuple[str, Any]], bool]:
    """The records of one pair and mechanism that share a baseline, and whether it is the jobs alone
    under MPS thread limits. An efficiency is against each job's solo pace, and a job alone under a
    limit steps slower than alone on the card: records of the two bases do not average, and the whole
    card, the baseline time-slicing and a plain run share, wins."""
    whole = [(source, record) for source, record in found if _alone_on_the_whole_card(record)]
    return (whole, False) if whole else (found, True)


def _mean_busy(readings: Sequence[dict[str, float]]) -> tuple[tuple[str, float], ...]:
    names = sorted({name for reading in readings for name in reading})
    return tuple((name, statistics.fmean(r[name] for r in readings if name in r)) for name in names)


def read_measured(paths: Sequence[Path], methods: Sequence[str] = (INTERLEAVED.name,)) -> Measured:
    """The measured pairs of ``paths`` (results folders, benchmark JSON, result.json files);
    ``StoreError`` in one line for the first unusable file. Efficiency and energy come from every
    record that neither ran out of memory nor failed, fit evidence from the records made on emulated cards.
    Only records of ``methods`` teach the model (the epoch method's figures carry start-up and a
    restart loop, and do not reproduce); the others are counted in ``skipped``. A record read twice
    (the same measurement in two folders) counts once. A pair's jobs' busy fractions in their solo
    phases come from the cases that kept their readings (``gpu_samples.csv``). A folder of profiles
    alone holds no pair (its profiles are the table's, with ``--profiles-here``)."""
    grouped: dict[tuple[tuple[str, str], str], list[tuple[str, Any]]] = {}
    busy: dict[tuple[tuple[str, str], str], list[dict[str, float]]] = {}
    groups: dict[tuple[tuple[str, ...], str], list[tuple[str, Any]]] = {}
    emulated: dict[tuple[str, str], list] = {}
    skipped = 0
    seen: set[str] = set()
    for path in [p for p in paths if not holds_profiles_only(p)]:
        run = load_run(path)
        for case_id, record in run.records.items():
            if not (_concurrent(record) and _on_gpu(record)) or _seen_before(record, seen):
                continue
            if isinstance(record.get("n_jobs"), int) and record.get("n_jobs") > 2:
                group = _group_models(record)
                if group is not None and (record.get("method") or EPOCH.name) in methods:
                    groups.setdefault((group, record.get("sharing") or "timeslice"), []).append((str(path), record))
                continue
            models = pair_key(record.get("fg_model"), record.get("bg_model"))
            if record.get("gpu_memory_mb") is not None:
                emulated.setdefault(models, []).append(record)
            if (record.get("method") or EPOCH.name) not in methods:
                skipped += 1
                continue
            key = (models, record.get("sharing") or "timeslice")
            grouped.setdefault(key, []).append((str(path), record))
            busy.setdefault(key, []).append(_solo_busy(run, case_id, record) if _alone_on_the_whole_card(record) else {})
    measured = Measured(skipped=skipped)
    sessions = []
    for (models, sharing), found in grouped.items():
        kept, under_limits = _one_basis(found)
        measured.pairs[(models, sharing)] = replace(_pair(models, sharing, kept), solo_under_mps_limits=under_limits,
                                                    solo_busy=_mean_busy(busy[(models, sharing)]))
        sessions.append(_intervals(_ran(kept)))
    measured.between_sessions = session_spread(sessions)
    for models, records in emulated.items():
        measured.fit[models] = _fit_evidence(records)
    for (names, sharing), found in groups.items():
        measured.groups[(names, sharing)] = _pair(names, sharing, found)
    return measured


_Number = Optional[StrictFloat]


class _ReferencePair(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: list[StrictStr]
    sharing: StrictStr
    efficiency: _Number = None
    efficiency_ci: Optional[list[StrictFloat]] = None
    energy_saved: _Number = None
    peak_vram_mb: _Number = None
    records: StrictInt
    solo_gpu_busy: Optional[dict[StrictStr, StrictFloat]] = None
    solo_under_mps_limits: StrictBool = False


class _ReferenceFit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: list[StrictStr]
    ran_mb: _Number = None
    oom_mb: _Number = None


class _ReferenceSpread(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sd: Annotated[StrictFloat, Field(ge=0.0)]
    pairs: Annotated[StrictInt, Field(ge=1)]


class _ReferenceFile(BaseModel):
    model_config = ConfigDict(extra="allow")
    device: StrictStr
    pairs: list[_ReferencePair]
    fit: list[_ReferenceFit] = []
    groups: list[_ReferencePair] = []
    between_sessions: Optional[_ReferenceSpread] = None


@dataclass(frozen=True)
class Reference:
    """The package's measured pairs and the card they were measured on."""

    device: str
    measured: Measured
    source: str


def _shape(data: _ReferenceFile, source: str) -> None:
    for index, pair in enumerate(data.pairs):
        if len(pair.models) != 2:
            raise SettingsError(source, f"$.pairs[{index}].models", f"expected two model names, got {pair.models!r}")
        if pair.efficiency_ci is not None and len(pair.efficiency_ci) != 2:
            raise SettingsError(source, f"$.pairs[{index}].efficiency_ci", "expected [low, high]")
        for name, busy in (pair.solo_gpu_busy or {}).items():
            if name not in pair.models or not 0.0 <= busy <= 1.0:
                raise SettingsError(source, f"$.pairs[{index}].solo_gpu_busy.{name}",
                                    f"expected a fraction from 0 to 1 for one of {pair.models!r}, got {busy!r}")
    for index, group in enumerate(data.groups):
        if len(group.models) < 3:
            raise SettingsError(source, f"$.groups[{index}].models", f"expected three or more model names, got {group.models!r}")
    for index, fit in enumerate(data.fit):
        if len(fit.models) != 2:
            raise SettingsError(source, f"$.fit[{index}].models", f"expected two model names, got {fit.models!r}")


def _reference_pair(p: _ReferencePair, source: str) -> MeasuredPair:
    models = pair_key(*p.models) if len(p.models) == 2 else tuple(sorted(p.models))
    ci = (p.efficiency_ci[0], p.efficiency_ci[1]) if p.efficiency_ci else None
    return MeasuredPair(models, p.sharing, p.efficiency, ci, p.energy_saved, p.peak_vram_mb, p.records, (source,),
                        reference=True, solo_busy=tuple(sorted((p.solo_gpu_busy or {}).items())),
                        solo_under_mps_limits=p.solo_under_mps_limits)


def parse_reference(raw: object, source: str) -> Reference:
    """A reference-pairs file; ``SettingsError`` in one line when it is unusable."""
    try:
        data = _ReferenceFile.model_validate(raw)
    except ValidationError as exc:
        raise first_error(exc, source) from None
    _shape(data, source)
    pairs = {(pair_key(*p.models), p.sharing): _reference_pair(p, source) for p in data.pairs}
    fit = {pair_key(*f.models): FitEvidence(f.ran_mb, f.oom_mb) for f in data.fit}
    groups = {(tuple(sorted(g.models)), g.sharing): _reference_pair(g, source) for g in data.groups}
    spread = data.between_sessions
    return Reference(data.device, Measured(pairs, fit, groups=groups, between_sessions=None if spread is None
                                           else SessionSpread(spread.sd, spread.pairs)), source)


def read_reference(path: Optional[Path] = None) -> Reference:
    """The measured pairs the package carries (or a file in their format)."""
    path = Path(path) if path is not None else REFERENCE
    return parse_reference(read_json(path), str(path))
