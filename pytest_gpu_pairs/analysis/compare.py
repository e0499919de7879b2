"""Compare any recorded metric of two runs case by case, with fail thresholds per metric.

pytest-benchmark's ``--benchmark-compare-fail`` only knows time statistics; energy, peak VRAM and
efficiency live in the result record (``extra_info`` / ``result.json``), so the gate reads those.
Plain Python on purpose: the plugin calls this at session end and must stay light to import.

A run is a pytest-benchmark JSON file, a ``--gpu-pairs-out`` directory, or one ``result.json``
(its machine then comes from ``session.json`` beside the case folder). Cases are matched by
``case_id``. A baseline from another GPU model, driver or CUDA version is refused unless forced:
its numbers say nothing about this card.

Energies of interleaved cases are judged per unit of work. A pair phase's energy depends on how
much work the jobs did in it, and that follows the host's pace (a host that runs the jobs' Python
faster does more steps, and spends more, in the same half second) and the phase's length, which the
harness chooses per case. So each round's energy is taken over what the same steps cost the jobs
alone in the same round (the pair's energy over the serial energy of its work; each job's share
over its stand-alone energy), and NEW's change is that ratio's change, shown at BASE's work. Across
three studies on four H100 hosts, one of which sped up by up to 46 % within the hour, these ratios
held within 3 % between sessions where the per-phase energies moved by up to 14 %. Other per-phase
energies are scaled to BASE's phase length.

Exit status of ``gpu-pairs compare``: 0 no regression, 1 at least one regression, 2 bad input or
a refused baseline.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_gpu_pairs.inputs import printable
from pytest_gpu_pairs.record.keys import HEADLINE, KEYS, comparable, direction
from pytest_gpu_pairs.record.metrics import mean_and_std, relative_change
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.plausible import LARGEST_FIGURE
from pytest_gpu_pairs.record.stats import BetweenStarts, interval_by, start_interval, welch_p_value
from pytest_gpu_pairs.record.store import Run, StoreError, load_run

DEFAULT_METRICS = HEADLINE
MACHINE_KEYS = (("gpu_name", "GPU"), ("driver", "driver"), ("cuda_driver_version", "CUDA"),
                ("gpu_memory_mb", "emulated card size (--gpu-pairs-gpu-memory-mb)"))


class CompareError(StoreError):
    """Bad input or a refused baseline; the message is the one line the user sees."""


def direction_of(metric: str) -> Optional[str]:
    """'lower' or 'higher' (is better), or None for a name the gate does not know.

    ``perf.<name>`` is a model metric: losses, errors and perplexities are better lower, the rest
    (accuracy, mAP, rank-1, ...) higher.
    """
    return direction(metric)


@dataclass(frozen=True)
class Threshold:
    metric: str
    pct: float
    direction: str


def parse_thresholds(text: str, source: str = "--fail") -> list[Threshold]:
    """``METRIC:PCT[,METRIC:PCT...]``, e.g. ``gpu_energy_j:5%,peak_vram_mb:3``."""
    thresholds = []
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        metric, sep, pct_text = item.partition(":")
        metric = metric.strip()
        if not sep:
            raise CompareError(f"{source}: {item!r}: expected METRIC:PCT, e.g. gpu_energy_j:5%")
        direction = direction_of(metric)
        if direction is None:
            known = ", ".join(comparable())
            raise CompareError(f"{source}: {metric!r}: expected a recorded metric ({known}, or perf.<name>)")
        try:
            pct = float(pct_text.strip().rstrip("%"))
        except ValueError:
            pct = math.nan
        if not math.isfinite(pct) or pct < 0:
            raise CompareError(f"{source}: {item!r}: expected a percentage >= 0 after the colon, e.g. {metric}:5%")
        thresholds.append(Threshold(metric, pct, direction))
    return thresholds


def _device_of(run: Run) -> Optional[str]:
    devices = {r.device for r in run.records.values() if r.device}
    return run.machine.get("device") or (devices.pop() if len(devices) == 1 else None)


def machine_differences(base: Run, new: Run) -> list[str]:
    """What differs between the machines of two runs, in words; empty when they match."""
    base_device, new_device = _device_of(base), _device_of(new)
    if base_device is None or new_device is None:
        missing = base.source if base_device is None else new.source
        return [f"{missing} does not say which device it ran on"]
    if base_device != new_device:
        return [f"device {base_device!r} vs {new_device!r}"]
    differences = []
    for key, label in MACHINE_KEYS:
        a, b = base.machine.get(key), new.machine.get(key)
        if base_device != "cpu" and a != b:
            differences.append(f"{label} {a!r} vs {b!r}")
    return differences


def refusal(base: Run, new: Run) -> Optional[str]:
    differences = machine_differences(base, new)
    if not differences:
        return None
    return (f"baseline {base.source} was measured on another machine ({'; '.join(differences)}); "
            "its numbers do not apply here")


def method_of(record: Record) -> str:
    """How a record was measured; records older than the ``method`` key measured whole epochs."""
    return record.method if isinstance(record.method, str) else "epoch"


def methods_of(run: Run) -> dict[str, str]:
    return {case_id: method_of(record) for case_id, record in run.records.items()}


def method_differences(base: Run, new_methods: dict[str, str]) -> list[str]:
    """The cases of BASE that NEW measured (or will measure) with another method, in words: an epoch
    run's figures are a whole run's, an interleaved run's a steady state's (its energies per
    half-second phase), so no threshold can judge one against the other."""
    return [f"{case_id} ({method_of(base.records[case_id])} in BASE, {new_methods[case_id]} in NEW)"
            for case_id in sorted(set(base.records) & set(new_methods))
            if method_of(base.records[case_id]) != new_methods[case_id]]


def method_refusal(base: Run, new_methods: dict[str, str], new_source: str) -> Optional[str]:
    """The refusal when a case is measured with different methods (``--force`` does not lift it)."""
    mixed = method_differences(base, new_methods)
    if not mixed:
        return None
    shown = "; ".join(mixed[:3]) + (f"; and {len(mixed) - 3} more" if len(mixed) > 3 else "")
    return (f"baseline {base.source} measured {len(mixed)} case(s) with another method than {new_source}: {shown}; "
            "figures of different methods do not compare: measure both with the same --gpu-pairs-method")




def _too_large(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > LARGEST_FIGURE


def _read_keys(metric: str) -> tuple[str, ...]:
    """The keys a judgement of ``metric`` computes with: the metric, and the stand-alone energies
    its energy per unit of work is taken over."""
    if metric.startswith("perf."):
        return ()
    parts = {"gpu_energy_j": ("serial_energy_j",), "gpu_energy_above_idle_j": ("fg_alone_energy_j", "bg_alone_energy_j"),
             "fg_gpu_energy_j": ("fg_alone_energy_j",), "bg_gpu_energy_j": ("bg_alone_energy_j",),
             "fg_gpu_energy_per_step_j": ("fg_gpu_energy_j", "fg_alone_energy_j"),
             "bg_gpu_energy_per_step_j": ("bg_gpu_energy_j", "bg_alone_energy_j")}.get(metric, ())
    return (metric, *parts)


def out_of_range(run: Run, case_id: str, metric: str) -> Optional[str]:
    """One line naming the file and JSON path of a figure ``metric``'s judgement would compute
    with that lies beyond ``LARGEST_FIGURE``, or None: a value like 1e200 is finite and typed, but
    no measurement, and the squares and fourth powers the interval tests take of it leave a float's
    range."""
    record = run.records[case_id]
    found: list[tuple[str, Any]] = []
    if metric.startswith("perf."):
        found.append((f".perf[{metric[5:]!r}]", (record.perf or {}).get(metric[5:])))
    for key in _read_keys(metric):
        found.append((f".{key}", record.get(key)))
        found += [(f".rounds[{index}].{key}", r.get(key)) for index, r in enumerate(record.rounds or [])
                  if isinstance(r, dict)]
    where, value = next(((w, v) for w, v in found if _too_large(v)), (None, None))
    if where is None:
        return None
    source, at = run.place(case_id)
    return (f"{source}: {at}{where}: expected a measured figure within ±{LARGEST_FIGURE:g}, got {value:g}; "
            "the record is no measurement of this case")


def _overflow(base: Run, new: Run, case_id: str, metric: str) -> str:
    """Where figures within ``LARGEST_FIGURE`` still leave a float's range when judged (scaled by a
    ``phase_s`` next to 0, or squared in an interval): one line naming both records."""
    (base_file, base_at), (new_file, new_at) = base.place(case_id), new.place(case_id)
    return (f"{new_file}: {new_at}.{metric}: expected figures a comparison can compute with, but judged against "
            f"{base_file}: {base_at} they leave a float's range (a phase_s or an energy next to 0?); the records "
            "are no measurement of this case")


PER_PHASE_ENERGY = ("gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j",
                    "serial_energy_j")


def _ratio(value_key: str, *reference_keys: str):
    """A round's energy over what the same steps cost alone; None where a part is missing."""
    def ratio(r: dict[str, Any]) -> Optional[float]:
        value = metric_value(r, value_key)
        parts = [metric_value(r, k) for k in reference_keys]
        known = [p for p in parts if p is not None]
        if value is None or len(known) < len(parts) or sum(known) <= 0:
            return None
        found = value / sum(known)
        return found if abs(found) <= LARGEST_FIGURE else None  # over a part next to 0: no energy per work
    return ratio


PER_WORK = {"gpu_energy_j": _ratio("gpu_energy_j", "serial_energy_j"),
            "gpu_energy_above_idle_j": _ratio("gpu_energy_above_idle_j", "fg_alone_energy_j", "bg_alone_energy_j"),
            "fg_gpu_energy_j": _ratio("fg_gpu_energy_j", "fg_alone_energy_j"),
            "bg_gpu_energy_j": _ratio("bg_gpu_energy_j", "bg_alone_energy_j"),
            "fg_gpu_energy_per_step_j": _ratio("fg_gpu_energy_j", "fg_alone_energy_j"),
            "bg_gpu_energy_per_step_j": _ratio("bg_gpu_energy_j", "bg_alone_energy_j")}
PER_WORK_TEXT = ("judged per unit of work: each round's energy over what the same steps cost the jobs alone in "
                 "that round; NEW shown at BASE's work")


def counted_rounds(record: Record) -> list[dict[str, Any]]:
    """The rounds the record's own figures were taken from: a round it marked incomplete (a phase
    without a step report, a missing energy) is left out of its means and intervals, and so of
    every judgement made on its rounds."""
    rounds = record.rounds if isinstance(record.rounds, list) else []
    return [r for r in rounds if isinstance(r, dict) and r.get("complete", True)]


def work_ratios(record: Record, metric: str) -> list[float]:
    """Each complete round's energy-per-work ratio for ``metric``; empty where it cannot be taken
    (not an interleaved record, or one written before the stand-alone energies were recorded)."""
    ratio = PER_WORK.get(metric)
    if ratio is None or record.method != "interleaved":
        return []
    return [v for r in counted_rounds(record) if (v := ratio(r)) is not None]


def phase_factor(base_record: Record, new_record: Record) -> Optional[float]:
    """BASE's phase length over NEW's, where both are interleaved and their phases differ."""
    base_s, new_s = metric_value(base_record, "phase_s"), metric_value(new_record, "phase_s")
    if not base_s or not new_s or math.isclose(base_s, new_s, rel_tol=0.01):
        return None
    return base_s / new_s


def _scaled(record: Record, factor: float) -> Record:
    """``record`` with its per-phase energies, their spreads and every round's scaled alike, so
    that the interval test on the rounds judges the same quantity as the table shows."""
    keys = [k for m in PER_PHASE_ENERGY for k in (m, f"{m}_std")]
    out: dict[str, Any] = {k: _times(getattr(record, k), factor) for k in keys if metric_value(record, k) is not None}
    if isinstance(record.rounds, list):
        out["rounds"] = [{**r, **{m: _times(r[m], factor) for m in PER_PHASE_ENERGY if metric_value(r, m) is not None}}
                         if isinstance(r, dict) else r for r in record.rounds]
    return record.model_copy(update=out)


def _times(value: float, factor: float) -> float:
    """``value * factor``; ``OverflowError`` where that leaves the figures a comparison computes with
    (a ``phase_s`` next to 0 makes the factor huge): such a record is no measurement to judge."""
    found = value * factor
    if not abs(found) <= LARGEST_FIGURE:
        raise OverflowError(f"{value:g} x {factor:g}")
    return found


def metric_value(record: Mapping[str, Any] | Record, metric: str) -> Optional[float]:
    value = (record.get("perf") or {}).get(metric[5:]) if metric.startswith("perf.") else record.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _std(record: Mapping[str, Any] | Record, metric: str) -> Optional[float]:
    return None if metric.startswith("perf.") else metric_value(record, f"{metric}_std")


def change_from(base: float, new: float) -> float:
    """NEW relative to BASE, as the gate judges it (``record.metrics.relative_change``, whose
    argument order is the other way round)."""
    change = relative_change(new, base, infinite_from_zero=True)
    assert change is not None  # both are numbers, and from a zero BASE the change is infinite
    return change


def is_regression(base: float, new: float, threshold: Threshold) -> bool:
    """Worse than the baseline by more than the threshold, in the metric's bad direction."""
    change = change_from(base, new)
    worse = change if threshold.direction == "lower" else -change
    return worse > threshold.pct / 100.0


@dataclass
class Row:
    case_id: str
    metric: str
    base: Optional[float] = None
    new: Optional[float] = None
    base_std: Optional[float] = None
    new_std: Optional[float] = None
    limit: Optional[Threshold] = None
    status: str = ""
    regression: bool = False
    reason: str = ""

    @property
    def change(self) -> Optional[float]:
        if self.base is None or self.new is None:
            return None
        return change_from(self.base, self.new)


def round_values(record: Record, metric: str) -> list[float]:
    """The metric's value in each of the record's complete rounds; a record without rounds is one round."""
    if not metric.startswith("perf."):
        values = [v for r in counted_rounds(record) if (v := metric_value(r, metric)) is not None]
        if values:
            return values
    value = metric_value(record, metric)
    return [] if value is None else [value]


def _bracketed(record: Record) -> bool:
    return record.interval_method in ("student_t_lag1", "student_t_starts")


def _rounds_interval(record: Record, values: list[float], metric: Optional[str] = None):
    """The interval the record's own figures were reported with, over the same rounds: over the
    pair's starts where the record took it so (its rounds' segments, its prior)."""
    method = record.interval_method
    segments = _round_segments(record, metric) if metric else None
    if method == "student_t_starts" and segments is not None and len(segments) == len(values):
        return start_interval(values, segments, _prior_of(record)).interval
    return interval_by(method if isinstance(method, str) else None)(values)


def _round_segments(record: Record, metric: str) -> Optional[list[int]]:
    """Each round's segment, for the rounds ``round_values`` reads (None where there are no rounds)."""
    rounds = record.rounds if not metric.startswith("perf.") else None
    if not isinstance(rounds, list):
        return None
    return [int(r.get("segment") or 0) for r in rounds if isinstance(r, dict) and metric_value(r, metric) is not None]


def _prior_of(record: Record) -> Optional[BetweenStarts]:
    prior = record.between_start_prior
    if not isinstance(prior, dict) or not all(isinstance(prior.get(k), (int, float)) for k in ("sd", "df")):
        return None
    return BetweenStarts(float(prior["sd"]), float(prior["df"]), str(prior.get("source", "")))


def _noise_verdict(row: Row, t: Threshold, base_record: Record, new_record: Record,
                   values: Optional[tuple[list[float], list[float]]] = None) -> None:
    """A change beyond the limit is a regression only if the rounds say it is real: the 95 %
    intervals of the two runs' rounds lie apart, NEW's on the bad side. Sessions differ by more
    than rounds within one session do (the H100 study saw 5 % between sessions whose rounds gave
    Welch p = 0.02), so overlapping intervals are noise, whatever the test on the rounds says.
    ``values``: the rounds to judge, where they are not the metric's own (energy per work)."""
    base, new = values or (round_values(base_record, row.metric), round_values(new_record, row.metric))
    metric = row.metric if values is None else None
    base_ci, new_ci = _rounds_interval(base_record, base, metric), _rounds_interval(new_record, new, metric)
    if base_ci.low is None or new_ci.low is None:
        row.status = "cannot tell"
        row.reason = "one round on a side: a change cannot be told from noise; measure more rounds (interleaved method)"
        return
    apart = new_ci.low > base_ci.high if t.direction == "lower" else new_ci.high < base_ci.low
    p_value = welch_p_value(base, new, bracketed=_bracketed(base_record) or _bracketed(new_record))
    evidence = f"{len(base)} vs {len(new)} rounds, Welch p={p_value:.2g}"
    if apart:
        row.status, row.regression, row.reason = "REGRESSION", True, f"95 % intervals apart; {evidence}"
    else:
        row.status, row.reason = "within noise", f"95 % intervals overlap; {evidence}"


def _judge(row: Row, base_record: Record, new_record: Record,
           values: Optional[tuple[list[float], list[float]]] = None) -> None:
    t = row.limit
    if row.base is None and row.new is None:
        row.status, row.regression = ("NOT MEASURED in either", True) if t else ("not measured in either", False)
        row.reason = (new_record.notes or {}).get(row.metric, "") if t else ""
    elif row.base is None:
        row.status, row.regression = ("NO BASELINE VALUE", True) if t else ("no baseline value", False)
        row.reason = (base_record.notes or {}).get(row.metric, "") if t else ""
    elif row.new is None:
        row.reason = (new_record.notes or {}).get(row.metric, "")
        row.status, row.regression = ("NOT MEASURED", True) if t else ("not measured", False)
    elif t is None:
        row.status = ""
    elif is_memory(row.metric):
        _memory_verdict(row, t, (row.base, row.new), (base_record, new_record))
    elif is_regression(row.base, row.new, t):
        _noise_verdict(row, t, base_record, new_record, values)
    else:
        change = change_from(row.base, row.new)
        worse = change if t.direction == "lower" else -change
        row.status = "improved" if worse < -t.pct / 100.0 else "ok"


def is_memory(metric: str) -> bool:
    return metric in KEYS and KEYS[metric].group == "memory" and KEYS[metric].unit == "MB"


def memory_resolution(record: Record, metric: str) -> float:
    """How far one reading of a memory figure may be off: a fit profile's own uncertainty for the
    whole-run figures, NVML's whole MiB per process (two jobs) for a peak sampled during the case."""
    if metric.startswith("vram_") or "_vram_need" in metric:
        value = record.vram_uncertainty_mb
        return float(value) if isinstance(value, (int, float)) else ALLOCATOR_AND_NVML_MB
    return 2.0 * NVML_MB


NVML_MB = 1.0
ALLOCATOR_AND_NVML_MB = 3.0


def _memory_verdict(row: Row, t: Threshold, values: tuple[float, float], records: tuple[Record, Record]) -> None:
    """A memory peak is one reading per run, not a mean of rounds: it moved if the change exceeds the
    limit by more than the two readings' resolution, whatever the rounds say."""
    (base, new), (base_record, new_record) = values, records
    resolution = memory_resolution(base_record, row.metric) + memory_resolution(new_record, row.metric)
    worse = (new - base) if t.direction == "lower" else (base - new)
    allowed = abs(base) * t.pct / 100.0
    evidence = f"{new - base:+.0f} MB; resolution {resolution:.0f} MB"
    if worse > allowed + resolution:
        row.status, row.regression = "REGRESSION", True
        row.reason = f"moved beyond the limit and the readings' resolution ({evidence})"
    elif worse > allowed:
        row.status, row.reason = "within resolution", f"beyond the limit by less than the readings' resolution ({evidence})"
    else:
        row.status = "improved" if -worse > allowed + resolution else "ok"


PACE_NOTE = 0.05  # a solo pace that moved by more than this is named beside the sharing and energy figures
SHARING_FIGURES = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio")
FREE_CARD = 1.995  # an efficiency_bound this close to 2: the jobs' solo busy fractions add up to at most 1


def pace_note(old: Record, cur: Record) -> Optional[str]:
    """How far each job's solo step rate moved between the runs, where one moved by more than
    ``PACE_NOTE``: a host (or a change to a job) that runs the jobs faster alone gives a pair that
    contends for the GPU less to gain from sharing, and moves its efficiency and energy with it."""
    moved = {}
    for role in ("fg", "bg"):
        base, new = metric_value(old, f"{role}_solo_steps_per_s"), metric_value(cur, f"{role}_solo_steps_per_s")
        if base and new is not None:
            moved[role] = change_from(base, new)
    if not any(abs(change) > PACE_NOTE for change in moved.values()):
        return None
    changes = ", ".join(f"{role} {_change(change)}" for role, change in moved.items())
    return f"the jobs' solo pace moved ({changes}){_what_the_card_allows(old, cur)}"


def _what_the_card_allows(old: Record, cur: Record) -> str:
    """Whether the pace can have moved the sharing: only where the card's time limits the pair."""
    base, new = metric_value(old, "efficiency_bound"), metric_value(cur, "efficiency_bound")
    if base is None or new is None:
        return ": a pair that contends for the GPU shares better on a slower host"
    if min(base, new) >= FREE_CARD:
        return ("; the card had time to spare at both paces (efficiency_bound 2.00 in both), so the pace did not "
                "limit this pair's sharing")
    return (f"; the card's time allows an efficiency of at most {base:.2f} in BASE and {new:.2f} in NEW "
            "(efficiency_bound): a pair that keeps the card busy shares less on a faster host")


def _row(case_id: str, metric: str, old: Record, cur: Record, limit: Optional[Threshold]) -> Row:
    """One metric of one case, judged (an energy per unit of work where both runs allow it, else
    as recorded, a per-phase energy at BASE's phase length), with the jobs' solo pace named where
    it moved."""
    row = _judged_row(case_id, metric, old, cur, limit)
    pace = pace_note(old, cur) if metric in SHARING_FIGURES or metric in PER_WORK else None
    if pace and row.status:
        row.reason = "; ".join(filter(None, [row.reason, pace]))
    return row


def _judged_row(case_id: str, metric: str, old: Record, cur: Record, limit: Optional[Threshold]) -> Row:
    ratios = work_ratios(old, metric), work_ratios(cur, metric)
    base_value, base_mean = metric_value(old, metric), mean_and_std(ratios[0])[0]
    if ratios[1] and base_value is not None and base_mean is not None and base_mean > 0:
        return _per_work_row(case_id, metric, (old, cur), limit, ratios, base_value / base_mean)
    factor = phase_factor(old, cur) if metric in PER_PHASE_ENERGY else None
    now = _scaled(cur, factor) if factor else cur
    row = Row(case_id, metric, metric_value(old, metric), metric_value(now, metric), _std(old, metric),
              _std(now, metric), limit)
    _judge(row, old, now)
    if factor and row.new is not None:
        row.reason = "; ".join(filter(None, [row.reason, f"NEW scaled from its {metric_value(cur, 'phase_s'):g} s "
                                             f"phases to BASE's {metric_value(old, 'phase_s'):g} s"]))
    return row


def _per_work_row(case_id: str, metric: str, records: tuple[Record, Record], limit: Optional[Threshold],
                  ratios: tuple[list[float], list[float]], at_base: float) -> Row:
    """BASE as recorded; NEW as the same work would have cost at NEW's energy per unit of work
    (``at_base``: BASE's value per unit of its energy-per-work ratio)."""
    old, cur = records
    base_value = metric_value(old, metric)
    new_mean, new_sd = mean_and_std(ratios[1])
    row = Row(case_id, metric, base_value, None if new_mean is None else new_mean * at_base, _std(old, metric),
              None if new_sd is None else new_sd * abs(at_base), limit)
    _judge(row, old, cur, ratios)
    measured = metric_value(cur, metric)
    raw = (f"; as measured {measured:.4g} ({_change(change_from(base_value, measured))})"
           if measured is not None and base_value is not None else "")
    row.reason = "; ".join(filter(None, [row.reason, PER_WORK_TEXT + raw]))
    return row


@dataclass
class Comparison:
    base: Run
    new: Run
    rows: list[Row]
    missing_in_new: list[str]
    new_cases: list[str]
    failed_cases: dict[str, str]
    thresholds: list[Threshold]
    mixed_methods: list[str] = field(default_factory=list)  # cases measured with different methods: not compared
    bad_figures: list[str] = field(default_factory=list)  # one line per figure no comparison can compute with

    @property
    def regressions(self) -> list[Row]:
        return [row for row in self.rows if row.regression]

    @property
    def undecided(self) -> list[Row]:
        return [row for row in self.rows if row.status == "cannot tell"]

    @property
    def unjudged(self) -> list[str]:
        """Why a gate cannot pass although no figure regressed: it must judge, and could not."""
        if not self.thresholds:
            return []
        found = [f"{len(self.failed_cases)} failed case(s)"] if self.failed_cases else []
        found += [f"{len(self.mixed_methods)} case(s) measured with another method"] if self.mixed_methods else []
        found += [f"{len(self.bad_figures)} figure(s) beyond any measurement"] if self.bad_figures else []
        found += [f"{len(self.missing_in_new)} baseline case(s) missing from {self.new.source}"] \
            if self.missing_in_new else []
        found += ["no case appears in both runs"] if not self.rows else []
        return found

    @property
    def failed(self) -> bool:
        return bool(self.regressions) or bool(self.unjudged)


def compare_runs(base: Run, new: Run, thresholds: Iterable[Threshold] = (),
                 metrics: Iterable[str] = (), expected: Optional[Iterable[str]] = None) -> Comparison:
    """Every shared case, every threshold metric (or the default set), judged. A baseline case
    that NEW lacks is missing; ``expected`` narrows that to the cases NEW set out to measure (a
    pytest session that selected some cases with ``-k`` is not missing the others)."""
    thresholds = list(thresholds)
    by_metric = {t.metric: t for t in thresholds}
    names = list(dict.fromkeys([*by_metric, *metrics] or DEFAULT_METRICS))
    rows, failed, bad = [], {}, []
    mixed = method_differences(base, methods_of(new))
    for case_id in sorted(set(base.records) & set(new.records)):
        old, cur = base.records[case_id], new.records[case_id]
        if cur.failure or cur.oom:
            failed[case_id] = cur.failure or "out of memory"
        if method_of(old) != method_of(cur):
            continue
        for metric in names:
            problem = out_of_range(base, case_id, metric) or out_of_range(new, case_id, metric)
            if problem:
                bad.append(problem)
                continue
            try:
                rows.append(_row(case_id, metric, old, cur, by_metric.get(metric)))
            except OverflowError:
                bad.append(_overflow(base, new, case_id, metric))
    wanted = set(base.records) if expected is None else set(base.records) & set(expected)
    return Comparison(base, new, rows, sorted(wanted - set(new.records)),
                      sorted(set(new.records) - set(base.records)), failed, thresholds, mixed, bad)


def _number(value: Optional[float], std: Optional[float]) -> str:
    """The mean and its standard deviation as ``sd``: the terminal summary's ``±`` is the half width
    of a 95 % interval, and one sign must not mean two things."""
    if value is None:
        return "-"
    text = f"{value:.4g}"
    return f"{text} sd {std:.2g}" if std else text


def _change(change: Optional[float]) -> str:
    if change is None:
        return "-"
    if not math.isfinite(change):
        return "+inf" if change > 0 else "-inf"
    return f"{change:+.1%}" if abs(change) < 100 else f"{change * 100:+.3g}%"


def _limit(t: Optional[Threshold]) -> str:
    if t is None:
        return ""
    return f"{'+' if t.direction == 'lower' else '-'}{t.pct:g}%"


def format_table(comparison: Comparison) -> list[str]:
    """The table, then what the comparison could not judge, then the verdict."""
    header = ["case", "metric", "base", "new", "change", "limit", "status"]
    rows = [header] + [[r.case_id, r.metric, _number(r.base, r.base_std), _number(r.new, r.new_std),
                        _change(r.change), _limit(r.limit), r.status + (f" ({r.reason})" if r.reason else "")]
                       for r in comparison.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("base, new: the mean over the rounds, sd its standard deviation; "
                 "limit: how much worse NEW may be than BASE; lower is better for energy, VRAM, time and "
                 "slowdown, higher for efficiency, progress, coverage and accuracy-like perf metrics; a change "
                 "beyond it is a REGRESSION only when the 95 % intervals of the two runs' rounds lie apart")
    if comparison.missing_in_new:
        lines.append(f"not in {comparison.new.source}: {', '.join(comparison.missing_in_new)}")
    if comparison.new_cases:
        lines.append(f"no baseline in {comparison.base.source}: {', '.join(comparison.new_cases)}")
    for case_id, failure in comparison.failed_cases.items():
        lines.append(f"{case_id} failed in {comparison.new.source}: {failure}")
    if comparison.mixed_methods:
        lines.append(f"not compared: {method_refusal(comparison.base, methods_of(comparison.new), comparison.new.source)}")
    lines += [f"not compared: {problem}" for problem in comparison.bad_figures]
    if not comparison.rows:
        lines.append("no case appears in both runs: nothing was compared")
    lines.append(verdict(comparison))
    return [printable(line) for line in lines]  # notes and failures quote a job's text: escaped for the terminal


def verdict(comparison: Comparison) -> str:
    if not comparison.thresholds:
        return "no thresholds given: nothing can fail"
    undecided = f" ({len(comparison.undecided)} change(s) beyond a limit could not be judged: one round on a side)" \
        if comparison.undecided else ""
    regressions = comparison.regressions
    if comparison.failed:
        parts = [f"{len(regressions)} regression(s) or gated figure(s) not measured"] if regressions else []
        parts += comparison.unjudged
        return f"FAILED: {' and '.join(parts)} against {comparison.base.source}{undecided}"
    return f"passed: no regression beyond the limits against {comparison.base.source}{undecided}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="baseline: pytest-benchmark JSON, run directory or result.json")
    parser.add_argument("new", metavar="NEW", help="the run to judge, in any of the same forms")
    parser.add_argument("--fail", action="append", default=[], metavar="METRIC:PCT[,...]",
                        help="fail when NEW is worse than BASE by more than PCT %% in METRIC, e.g. "
                             "gpu_energy_j:5%%,peak_vram_mb:3%%,concurrency_efficiency:5%%")
    parser.add_argument("--metrics", default="", metavar="METRIC[,...]",
                        help=f"further metrics to show without a limit (default when no --fail: "
                             f"{','.join(DEFAULT_METRICS)})")
    parser.add_argument("--force", action="store_true",
                        help="compare even when BASE was measured on another GPU model, driver or CUDA version")


def run(args: argparse.Namespace) -> int:
    try:
        thresholds = parse_thresholds(",".join(args.fail))  # --fail may be given once per metric
        shown = [m.strip() for m in args.metrics.split(",") if m.strip()]
        base, new = load_run(args.base), load_run(args.new)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    refused = refusal(base, new)
    if refused and not args.force:
        print(f"error: {refused} (--force compares anyway)", file=sys.stderr)
        return 2
    mixed = method_refusal(base, methods_of(new), new.source)
    if mixed:
        print(f"error: {mixed}", file=sys.stderr)
        return 2
    if refused:
        print(f"warning: {refused}")
    comparison = compare_runs(base, new, thresholds, shown)
    if comparison.bad_figures:
        print(printable(f"error: {comparison.bad_figures[0]}"), file=sys.stderr)
        return 2
    print("\n".join(format_table(comparison)))
    return 1 if comparison.failed else 0
