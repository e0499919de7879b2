"""A scaling case's record: step time with its interval, throughput, scaling efficiency against
the one-GPU case, the gradient all-reduce's share of a step, memory per GPU, utilisation and
energy per sample. Pure arithmetic over what the ranks and the monitors handed over.

**Step time.** A built-in rank times every step to the device's end of it; the ranks meet in
every all-reduce, so a step lasts as long as its slowest rank, and that is the step's time. A
command workload reports its steps through the protocol or its log, a few times a second; the
spans between its reports after the warm-up are its steps' times, at its slowest rank. Neighbouring
steps share noise (clocks, the host), so the interval is a Student-t interval over up to
``BLOCKS`` batch means of consecutive steps, not over the steps themselves.

**Communication.** ``comm_share`` is ``1 - t_no_sync / t_step``: the probe steps run under DDP's
``no_sync()``, which leaves out the gradient all-reduce and nothing else (the forward's buffer
broadcast stays), so the difference is the all-reduce time that the backward pass did not hide.
A command workload has no such probe: its share is null, with the reason.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import Case, ScalingPlan, describe
from pytest_gpu_pairs.inputs import is_finite_number, printable
from pytest_gpu_pairs.monitor.counters import counter_energy_j
from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.protocol import Progress, from_monotonic
from pytest_gpu_pairs.record import metrics
from pytest_gpu_pairs.record.measurement import JobOutcome
from pytest_gpu_pairs.record.model import Record, built
from pytest_gpu_pairs.record.stats import CONFIDENCE, t_quantile

BLOCKS = 10
MAX_DF = 1e6  # more degrees of freedom than this: the normal quantile, to six digits
RANK_ROLE = "rank"  # every process of a scaling case's job has a role starting with this
STEP_TIME_METHOD = (f"mean over the measured steps of each step's time at its slowest rank; 95 % interval: Student-t "
                    f"over up to {BLOCKS} batch means of consecutive steps")
REPORTED_STEPS_METHOD = (f"mean seconds per step between the job's progress reports after the warm-up, at its slowest "
                         f"rank; 95 % interval: Student-t over up to {BLOCKS} batch means of consecutive reports")
COMM_METHOD = ("1 - (mean step time under DDP's no_sync(), which skips only the gradient all-reduce) / step_time_s; "
               "interval by the delta method from both means' intervals")
CPU_FIGURES = "on the CPU every rank shares one host's cores and memory: the figure tests the harness, it says nothing of GPUs"


@dataclass(frozen=True)
class Estimate:
    """A mean, the standard error of it (None: a single value, no interval) and that error's
    degrees of freedom; the interval is Student-t."""

    mean: float
    se: Optional[float]
    df: float

    def interval(self, confidence: float = CONFIDENCE) -> Optional[list[float]]:
        if self.se is None:
            return None
        half = t_quantile(0.5 + confidence / 2.0, min(MAX_DF, max(1.0, self.df))) * self.se
        return [self.mean - half, self.mean + half]

    def shifted(self, offset: float, sign: float = 1.0) -> Estimate:
        """``offset + sign * self``: the same error."""
        return Estimate(offset + sign * self.mean, self.se, self.df)


def estimate_from_interval(mean: float, ci: Optional[Sequence[float]], values: Optional[int],
                           confidence: float = CONFIDENCE) -> Estimate:
    """A recorded mean and its Student-t interval over ``values`` values, back as an ``Estimate``."""
    if ci is None or values is None or values < 2 or None in ci:
        return Estimate(mean, None, 0.0)
    df = float(values - 1)
    return Estimate(mean, (ci[1] - ci[0]) / 2.0 / t_quantile(0.5 + confidence / 2.0, df), df)


def ratio(numerator: Estimate, denominator: Estimate) -> Estimate:
    """``numerator / denominator`` of two independent estimates, by the delta method; the degrees
    of freedom by Welch-Satterthwaite over the two relative variances."""
    value = numerator.mean / denominator.mean
    if numerator.se is None or denominator.se is None:
        return Estimate(value, None, 0.0)
    parts = [((numerator.se / numerator.mean) ** 2, numerator.df), ((denominator.se / denominator.mean) ** 2, denominator.df)]
    relative = math.fsum(v for v, _ in parts)
    return Estimate(value, abs(value) * math.sqrt(relative), satterthwaite(parts))


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variances, each with its own: taken in
    shares of the sum, so tiny variances do not underflow; infinite when the sum is zero."""
    total = math.fsum(v for v, _ in parts)
    if total == 0:
        return math.inf
    return 1.0 / math.fsum((v / total) ** 2 / max(1.0, d) for v, d in parts)


Span = tuple[float, float]  # (seconds, steps) of one timed step or one stretch between two reports


def slowest_rank_steps(per_rank: Sequence[Sequence[float]]) -> list[Span]:
    """Each step's time at its slowest rank (the ranks meet in every step's all-reduce)."""
    if not per_rank:
        return []
    count = min(len(times) for times in per_rank)
    return [(max(float(times[i]) for times in per_rank), 1.0) for i in range(count)]


def report_spans(progress: Progress, warmup_steps: int) -> list[tuple[float, float, float]]:
    """(start, end, steps) between consecutive step reports, from the first report at or past the warm-up."""
    reports = [(t, step) for t, step in progress.steps if step >= warmup_steps]
    return [(t0, t1, float(s1 - s0)) for (t0, s0), (t1, s1) in zip(reports, reports[1:]) if s1 > s0 and t1 > t0]


def block_estimate(spans: Sequence[Span], blocks: int = BLOCKS) -> Optional[tuple[Estimate, int]]:
    """Mean seconds per step over the spans, with the standard error of up to ``blocks`` batch means
    of consecutive spans, and how many batch means it rests on; None without a step."""
    total_s, total_steps = math.fsum(s for s, _ in spans), math.fsum(n for _, n in spans)
    if total_steps <= 0:
        return None
    mean = total_s / total_steps
    count = min(blocks, len(spans))
    if count < 2:
        return Estimate(mean, None, 0.0), count
    size, extra = divmod(len(spans), count)
    values, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        part = spans[start:end]
        values.append(math.fsum(s for s, _ in part) / math.fsum(n for _, n in part))
        start = end
    centre = math.fsum(values) / count
    sd = math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (count - 1))
    return Estimate(mean, sd / math.sqrt(count), float(count - 1)), count


@dataclass
class GpuTrace:
    """One GPU of a scaling case: its NVML samples, the card its rank saw, and what the ballast of
    ``--gpu-pairs-gpu-memory-mb`` held on it (None without emulation)."""

    index: int
    samples: list[GpuSample]
    card_mb: float
    ballast_mb: Optional[float] = None


@dataclass
class ScalingMeasurement:
    """The plain facts of one scaling case: its steps, how each rank ended, each GPU's samples."""

    plan: ScalingPlan
    backend: Optional[str]  # None where the ranks did not say which they used
    ranks: list[JobOutcome]
    gpus: list[GpuTrace] = field(default_factory=list)
    gpu_unavailable: Optional[str] = None
    stopped_because: Optional[str] = None
    out_dir: Optional[Path] = None
    sample_hz: Optional[float] = None
    per_gpu_batch: Optional[int] = None

    def results(self) -> list[dict[str, Any]]:
        return [rank.progress.result or {} for rank in self.ranks]

    @property
    def timed_steps(self) -> bool:
        """Whether every rank reported each step's time (a built-in), not only its progress."""
        results = self.results()
        return bool(results) and all(isinstance(r.get("step_times_s"), list) for r in results)


class Notes(dict):
    def unmeasured(self, key: str, reason: str) -> None:
        self.setdefault(key, reason)


def failure_of(m: ScalingMeasurement) -> Optional[str]:
    """Why the job did not give its steps: a rank that could not start, reported an error, ran out
    of memory or exited badly, or the harness that stopped it; None when it ran to its end."""
    for rank in m.ranks:
        if rank.start_error:
            return f"{rank.role} could not start: {rank.start_error}"
        if rank.oom:
            return f"{rank.role} ran out of memory: {rank.oom_message}"
        if rank.progress.error:
            lines = str(rank.progress.error.get("message") or "").strip().splitlines() or ["no message"]
            return f"{rank.role} failed: {printable(lines[-1])}"
    if m.stopped_because:
        return f"stopped: {m.stopped_because}"
    bad = [r for r in m.ranks if r.returncode not in (0, None) and not r.stopped_by_harness]
    if bad:
        return f"{bad[0].role} exited with code {bad[0].returncode} (log: {bad[0].log_path})"
    return None


def _window(result: dict[str, Any]) -> Optional[tuple[float, float]]:
    """A rank's timed window on the harness's clock: its CLOCK_MONOTONIC ends (``window_mono``), or
    the wall-clock ``window`` a rank of an earlier version reported."""
    mono, wall = result.get("window_mono"), result.get("window")
    if isinstance(mono, list) and len(mono) == 2 and all(is_finite_number(v) for v in mono):
        return from_monotonic(mono[0]), from_monotonic(mono[1])
    if isinstance(wall, list) and len(wall) == 2 and all(is_finite_number(v) for v in wall):
        return wall[0], wall[1]
    return None


def step_time(m: ScalingMeasurement, notes: Notes) -> tuple[Optional[Estimate], int, int, Optional[tuple[float, float]]]:
    """(step time, batch means, measured steps, window) of the job, from each step's time where
    the ranks timed them, else from their progress reports."""
    if m.timed_steps:
        results = m.results()
        spans = slowest_rank_steps([r["step_times_s"] for r in results])
        windows = [w for w in map(_window, results) if w is not None]
        window = (min(w[0] for w in windows), max(w[1] for w in windows)) if windows else None
    else:
        per_rank = [report_spans(rank.progress, m.plan.warmup_steps) for rank in m.ranks]
        per_rank = [spans for spans in per_rank if spans]
        if not per_rank:
            notes.unmeasured("step_time_s", "no rank reported two steps after its warm-up")
            return None, 0, 0, None
        slowest = max(per_rank, key=lambda s: math.fsum(x[1] - x[0] for x in s) / math.fsum(x[2] for x in s))
        spans = [(t1 - t0, n) for t0, t1, n in slowest]
        window = (slowest[0][0], slowest[-1][1])
    found = block_estimate(spans)
    if found is None:
        notes.unmeasured("step_time_s", "no measured step was reported")
        return None, 0, 0, window
    estimate, blocks = found
    return estimate, blocks, int(round(math.fsum(n for _, n in spans))), window


def comm_share(m: ScalingMeasurement, step: Optional[Estimate], notes: Notes) -> tuple[Optional[Estimate], Optional[float]]:
    """(share of the all-reduce, no-sync step time) from the probe steps."""
    if not m.timed_steps:
        notes.unmeasured("comm_share", "a command workload has no no_sync() probe: its all-reduce cannot be "
                                       "separated from the rest of its step here")
        return None, None
    probe = block_estimate(slowest_rank_steps([r.get("probe_times_s") or [] for r in m.results()]))
    if probe is None or step is None:
        notes.unmeasured("comm_share", "no probe steps ran (comm_probe_steps 0) or no step was timed")
        return None, None
    if m.plan.gpus == 1:
        notes.unmeasured("comm_share", "one rank: its all-reduce has no peer, the share is the wrapper's own cost")
    return ratio(probe[0], step).shifted(1.0, -1.0), probe[0].mean


def data_time(m: ScalingMeasurement, step: Optional[Estimate], notes: Notes) -> dict[str, Optional[float]]:
    """The mean wait for a batch, taken per step at the rank that waited longest, and its share of a step."""
    waits = slowest_rank_steps([r.get("data_times_s") or [] for r in m.results()]) if m.timed_steps else []
    if not waits:
        notes.unmeasured("data_time_s", "the ranks reported no data time (a command workload, or an earlier version)")
        return {"data_time_s": None, "data_share": None}
    mean = math.fsum(s for s, _ in waits) / len(waits)
    return {"data_time_s": mean, "data_share": mean / step.mean if step is not None and step.mean > 0 else None}


def validation_time(m: ScalingMeasurement, notes: Notes) -> dict[str, Any]:
    """The validation's samples, its time at the slowest rank, and one GPU's time per sample."""
    results = m.results()
    times = [r.get("val_time_s") for r in results]
    samples = sum(r.get("val_samples") or 0 for r in results if isinstance(r.get("val_samples"), int))
    if not samples or not all(is_finite_number(t) for t in times):
        notes.unmeasured("val_time_s", "no validation ran (val_samples 0, or a workload without validate())")
        return {"val_samples": samples or None, "val_time_s": None, "val_s_per_sample": None}
    slowest = max(float(t) for t in times if t is not None)
    return {"val_samples": samples, "val_time_s": slowest, "val_s_per_sample": slowest * m.plan.gpus / samples}


PHASE_ORDER = ("start", "train", "eval", "after_eval")  # the memory events of a built-in rank, in order


def memory_by_phase(m: ScalingMeasurement, notes: Notes) -> dict[str, Any]:
    """The largest rank's allocator peak per stretch, and the stretch with the highest."""
    peaks: dict[str, float] = {}
    for rank in m.ranks:
        for name, event in zip(PHASE_ORDER, rank.progress.memory):
            peaks[name] = max(peaks.get(name, 0.0), float(event["peak_allocated_mb"]))
    if not peaks:
        notes.unmeasured("peak_mem_allocated_by_phase_mb", "no rank reported its allocator's peaks (the CPU, or a "
                                                           "command workload)")
        return {"peak_mem_allocated_by_phase_mb": None, "peak_mem_phase": None}
    return {"peak_mem_allocated_by_phase_mb": peaks, "peak_mem_phase": max(peaks, key=lambda k: peaks[k])}


def efficiency(step: Optional[Estimate], gpus: int, baseline: Optional[Record], notes: Notes) -> Optional[Estimate]:
    """Step time on one GPU over step time on ``gpus``: throughput per GPU against one GPU's."""
    if step is None:
        notes.unmeasured("scaling_efficiency", "no step time was measured")
        return None
    if gpus == 1:
        return Estimate(1.0, 0.0, float("inf"))
    if baseline is None or baseline.step_time_s is None:
        notes.unmeasured("scaling_efficiency", "the one-GPU case of this workload was not measured in this session "
                                               "(gpu-pairs scale takes it from any results folder)")
        return None
    one = estimate_from_interval(baseline.step_time_s, baseline.step_time_ci, baseline.step_time_blocks)
    return ratio(one, step)


def _window_samples(samples: list[GpuSample], window: tuple[float, float]) -> list[GpuSample]:
    return [s for s in samples if window[0] <= s.t <= window[1]]


def _job_memory_mb(sample: GpuSample) -> Optional[float]:
    values = [mb for pid, mb in sample.proc_mem_mb.items() if sample.roles.get(pid, "other").startswith(RANK_ROLE)]
    known = [v for v in values if v is not None]
    return float(sum(known)) if known and len(known) == len(values) else None


def gpu_figures(m: ScalingMeasurement, window: Optional[tuple[float, float]], samples_done: Optional[int],
                notes: Notes) -> dict[str, Any]:
    """Memory per GPU, the fullest card's share and headroom, utilisation and energy per sample."""
    keys = ("peak_vram_per_gpu_mb", "peak_vram_mb", "card_memory_mb", "peak_memory_fraction", "memory_headroom_mb",
            "gpu_util_per_gpu_pct", "gpu_util_avg_pct", "gpus_energy_j", "energy_per_sample_j", "ballast_held_mb")
    figures: dict[str, Any] = dict.fromkeys(keys)
    if not m.gpus:
        for key in keys:
            notes.unmeasured(key, f"not measurable on this run: {m.gpu_unavailable or 'no GPU samples were taken'}")
        return figures
    figures["peak_vram_per_gpu_mb"] = [metrics.peak(_job_memory_mb(s) for s in g.samples) for g in m.gpus]
    known = [v for v in figures["peak_vram_per_gpu_mb"] if v is not None]
    figures["peak_vram_mb"] = max(known) if known else None
    if len(known) < len(m.gpus):
        notes.unmeasured("peak_vram_mb", "NVML listed no process of a rank with its memory on some GPU (a container "
                                         "without the host's pid namespace?)")
    in_use = [metrics.peak(_in_use_mb(s, g.ballast_mb) for s in g.samples) for g in m.gpus]
    fullest = max(((used, g) for used, g in zip(in_use, m.gpus) if used is not None), key=lambda x: x[0], default=None)
    if fullest is not None:
        figures["card_memory_mb"] = fullest[1].card_mb
        figures["peak_memory_fraction"] = fullest[0] / fullest[1].card_mb
        figures["memory_headroom_mb"] = fullest[1].card_mb - fullest[0]
    ballasts = [g.ballast_mb for g in m.gpus if g.ballast_mb is not None]
    if ballasts:
        figures["ballast_held_mb"] = max(ballasts)
        notes.unmeasured("ballast_held_mb", f"the largest of {len(m.gpus)} ballasts, one per GPU: {ballasts}")
    if window is None:
        for key in ("gpu_util_per_gpu_pct", "gpu_util_avg_pct", "gpus_energy_j", "energy_per_sample_j"):
            notes.unmeasured(key, "no measured window: no step was timed")
        return figures
    figures.update(_window_figures(m, window, samples_done, notes))
    return figures


def _in_use_mb(sample: GpuSample, ballast_mb: Optional[float]) -> Optional[float]:
    if sample.mem_used_mb is None:
        return None
    return sample.mem_used_mb - (ballast_mb or 0.0)


def _window_figures(m: ScalingMeasurement, window: tuple[float, float], samples_done: Optional[int],
                    notes: Notes) -> dict[str, Any]:
    utils = []
    for g in m.gpus:
        values = [s.util_pct for s in _window_samples(g.samples, window) if s.util_pct is not None]
        utils.append(math.fsum(values) / len(values) if values else None)
    known = [u for u in utils if u is not None]
    energies = [counter_energy_j(((s.t, s.energy_mj) for s in g.samples), *window) for g in m.gpus]
    read = [e for e in energies if e is not None]
    total = math.fsum(read) if read and len(read) == len(energies) else None
    if total is None:
        notes.unmeasured("gpus_energy_j", "an NVML total-energy counter was not readable over the window on some GPU")
    per_sample = total / samples_done if total is not None and samples_done else None
    if total is not None and not samples_done:
        notes.unmeasured("energy_per_sample_j", "the samples of a step are not known (no batch_size)")
    return {"gpu_util_per_gpu_pct": utils, "gpu_util_avg_pct": math.fsum(known) / len(known) if known else None,
            "gpus_energy_j": total, "energy_per_sample_j": per_sample}


def _interval_list(estimate: Optional[Estimate]) -> Optional[list[float]]:
    return estimate.interval() if estimate is not None else None


def throughput(step: Optional[Estimate], global_batch: Optional[int], notes: Notes) -> dict[str, Any]:
    """Samples per second, its interval the step time's interval carried through ``batch / t``."""
    if step is None or not global_batch:
        if step is not None:
            notes.unmeasured("samples_per_s", "the job's batch_size is not known: samples per step are unknown")
        return {"samples_per_s": None, "samples_per_s_ci": None}
    ci = step.interval()
    return {"samples_per_s": global_batch / step.mean,
            "samples_per_s_ci": [global_batch / ci[1], global_batch / ci[0]] if ci and ci[0] > 0 else None}


def _reserved_per_rank(m: ScalingMeasurement, notes: Notes) -> Optional[list[Optional[float]]]:
    if not m.timed_steps:
        notes.unmeasured("peak_mem_reserved_per_gpu_mb", "a command workload reports no torch memory per rank")
        return None
    reserved = [r.get("peak_mem_reserved_mb") for r in m.results()]
    if all(v is None for v in reserved):
        notes.unmeasured("peak_mem_reserved_per_gpu_mb", "torch reserves GPU memory only: the ranks trained on the CPU")
        return None
    return reserved


def scaling_record(case: Case, m: ScalingMeasurement, device: str, scale: float,
                   baseline: Optional[Record] = None) -> Record:
    """The case's record; ``baseline`` is the record of the one-GPU case of the same workload."""
    notes = Notes()
    gpus = m.plan.gpus
    step, blocks, measured, window = step_time(m, notes)
    comm, no_sync = comm_share(m, step, notes)
    eff = efficiency(step, gpus, baseline, notes)
    global_batch = m.per_gpu_batch * gpus if m.per_gpu_batch else None
    samples_done = global_batch * measured if global_batch and measured else None
    failure = failure_of(m)
    if device == "cpu":
        for key in ("scaling_efficiency", "comm_share"):
            notes.unmeasured(key, CPU_FIGURES)
    record = {**describe(case), "gpus": gpus, "backend": m.backend, "per_gpu_batch": m.per_gpu_batch,
              "global_batch": global_batch, "warmup_steps": m.plan.warmup_steps, "measured_steps": measured,
              "step_time_s": step.mean if step else None, "step_time_ci": _interval_list(step),
              "step_time_blocks": blocks or None,
              "step_time_method": STEP_TIME_METHOD if m.timed_steps else REPORTED_STEPS_METHOD,
              **throughput(step, global_batch, notes),
              "scaling_efficiency": eff.mean if eff else None, "scaling_efficiency_ci": _interval_list(eff),
              "comm_share": comm.mean if comm else None, "comm_share_ci": _interval_list(comm),
              "no_sync_step_time_s": no_sync, "comm_method": COMM_METHOD if comm else None,
              **data_time(m, step, notes), **validation_time(m, notes), **memory_by_phase(m, notes),
              "peak_mem_reserved_per_gpu_mb": _reserved_per_rank(m, notes),
              **gpu_figures(m, window, samples_done, notes),
              "window_s": window[1] - window[0] if window else None, "device": device, "scale": scale,
              "sample_hz": m.sample_hz if m.gpus else None, "vram_budget_mb": case.vram_budget_mb,
              "oom": any(r.oom for r in m.ranks), "failure": failure,
              "fg_exit_code": m.ranks[0].returncode if m.ranks else None}
    unused = max((r.get("unused_parameters") or 0 for r in m.results()), default=0)
    if unused:
        notes.unmeasured("step_time_s", f"{unused} parameter tensor(s) of the model get no gradient: DDP looked for "
                                        "them in every step (find_unused_parameters), a cost the step time includes")
    if step is not None and step.se is None:
        notes.unmeasured("step_time_ci", "fewer than two batch means: measure more steps for an interval")
    return built({**record, "notes": dict(notes)})
