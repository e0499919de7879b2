"""Measurements -> the result record: the figures of one round, a failed case's record, and the mean over rounds.

The same record goes into ``benchmark.extra_info`` and ``<out>/<case-id>/result.json``, so the
terminal summary, ``--benchmark-compare``, ``gpu-pairs compare`` and the reports all read one
set of numbers. A figure that could not be measured is None with its reason in ``notes``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import Case, describe
from pytest_gpu_pairs.monitor.counters import counter_energy_j, unwrap_counter
from pytest_gpu_pairs.monitor.samples import JOB_ROLES, GpuSample
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record import metrics
from pytest_gpu_pairs.record.checks import PROGRESS_FIX
from pytest_gpu_pairs.record.derived import with_derived
from pytest_gpu_pairs.record.groups import (
    Background,
    CaseFacts,
    CpuEnergy,
    EnergySplit,
    GpuEnergy,
    Interleaving,
    Memory,
    Outcome,
    Restarts,
    SerialComparison,
    Sharing,
    Timing,
    Where,
    merged,
)
from pytest_gpu_pairs.record.keys import PER_ROUND
from pytest_gpu_pairs.record.measurement import BackgroundRuns, DeviceFacts, InterleavedMeasurement, Measurement
from pytest_gpu_pairs.record.model import Record, built
from pytest_gpu_pairs.record.phases import SPLIT_METHOD, case_figures, device_state
from pytest_gpu_pairs.record.plausible import with_impossible_notes

VRAM_SOURCE = "nvml_process_memory"
IDLE_METHOD = "nvml_energy_counter_at_session_start"


class Notes(dict):
    """key -> why that key is None (or what qualifies it)."""

    def unmeasured(self, key: str, reason: str) -> None:
        self.setdefault(key, reason)

    def also(self, key: str, reason: str) -> None:
        """A second qualification of ``key``, after the first: both are said."""
        self[key] = f"{self[key]}; {reason}" if key in self else reason


def _job_cpus(notes: Notes, env: DeviceFacts, case: Case) -> Optional[dict[str, str]]:
    jobs = {role: env.one_loop(job.is_builtin) for role, job in zip(case.roles, case.jobs)}
    described = env.cpus.described(jobs)
    if described is None:
        notes.unmeasured("job_cpus", f"jobs not pinned: {env.cpus.reason}")
    return described


def _in_window(samples, window):
    start, end = window
    return [s for s in samples if start <= s.t <= end]


@dataclass(frozen=True)
class SoloCost:
    """A job alone on the card: energy per training step, of the whole card and above idle."""

    j_per_step: Optional[float] = None
    above_idle_j_per_step: Optional[float] = None


@dataclass(frozen=True)
class SoloBaseline:
    """A job alone on the card, as much of it as a shared run is compared with. Built from the
    measurement in the session that measured it, or from its record in a session resumed after it,
    so that a resumed case is compared with the same solo run as it would have been."""

    duration_s: Optional[float] = None
    steps_per_s: Optional[float] = None
    cost: SoloCost = SoloCost()

    @classmethod
    def measured(cls, solo: Measurement, env: DeviceFacts) -> SoloBaseline:
        steps = solo.fg.progress.steps_between(*solo.window) if solo.fg.progress.steps else None
        energy = (counter_energy_j(((s.t, s.energy_mj) for s in solo.samples), *solo.window)
                  if solo.samples else None)
        above = metrics.energy_above_idle(energy, env.idle_power_w, solo.window_s)
        pace = solo.fg.progress.warm_rate() or solo.fg.progress.training_rate()
        return cls(solo.fg.duration_s, pace,
                   SoloCost(metrics.energy_per_step(energy, steps), metrics.energy_per_step(above, steps)))

    @classmethod
    def recorded(cls, solo: Record) -> SoloBaseline:
        """From a solo round's record: the same figures ``measured`` gave when it was built."""
        steps = solo.fg_steps_in_window
        return cls(solo.fg_duration_s, solo.fg_solo_steps_per_s,
                   SoloCost(metrics.energy_per_step(solo.gpu_energy_j, steps),
                            metrics.energy_per_step(solo.gpu_energy_above_idle_j, steps)))


@dataclass(frozen=True)
class Work:
    """The steps each job did in the foreground window, and what a step costs each job alone."""

    sharing: str
    fg_steps: Optional[float]
    bg_steps: Optional[float]
    fg_solo: SoloCost
    bg_solo: SoloCost


UNSAMPLED = ("gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j",
             "fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j", "gpu_power_avg_w", "gpu_power_max_w",
             "gpu_util_avg_pct", "gpu_temp_max_c", "peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb",
             "other_peak_vram_mb", "serial_energy_j", "energy_saved_vs_serial", "energy_split_method",
             "sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "clock_event_reasons")
GpuFigures = tuple[GpuEnergy, Memory, EnergySplit, SerialComparison]


def _gpu_figures(m: Measurement, env: DeviceFacts, notes: Notes, work: Work) -> GpuFigures:
    """The card's figures over the window; without GPU samples every one is None, for one reason."""
    if not m.samples:
        reason = env.gpu_unavailable or "no GPU samples were taken"
        for key in UNSAMPLED:
            notes.unmeasured(key, f"not measurable on this run: {reason}")
        return (GpuEnergy(**dict.fromkeys(GpuEnergy.model_fields)), Memory(**dict.fromkeys(Memory.model_fields)),
                EnergySplit(**dict.fromkeys(EnergySplit.model_fields)),
                SerialComparison(**dict.fromkeys(SerialComparison.model_fields)))
    window, inside = m.window, _in_window(m.samples, m.window)
    energy = counter_energy_j(((s.t, s.energy_mj) for s in m.samples), *window)
    if energy is None:
        notes.unmeasured("gpu_energy_j", "the NVML total-energy counter was not readable over the window")
    above_idle = metrics.energy_above_idle(energy, env.idle_power_w, m.window_s)
    if env.idle_power_w is None:
        notes.unmeasured("gpu_energy_above_idle_j", env.idle_power_note or "idle power was not measured")
    memory = _memory_figures(m.samples, m.sharing_probe, m.mode, notes)
    split = _energy_split(m, above_idle, env.idle_power_w, notes, work)
    utils = [s.util_pct for s in inside if s.util_pct is not None]
    gpu = GpuEnergy(gpu_energy_j=energy, gpu_energy_above_idle_j=above_idle,
                    gpu_power_avg_w=energy / m.window_s if energy is not None and m.window_s > 0 else None,
                    gpu_power_max_w=metrics.peak(s.power_w for s in inside),
                    gpu_util_avg_pct=sum(utils) / len(utils) if utils else None,
                    gpu_temp_max_c=metrics.peak(s.temp_c for s in inside),
                    fg_gpu_energy_per_step_j=metrics.energy_per_step(split.fg_gpu_energy_j, work.fg_steps),
                    bg_gpu_energy_per_step_j=metrics.energy_per_step(split.bg_gpu_energy_j, work.bg_steps))
    return gpu, memory, split, _serial_comparison(m, energy, notes, work)


def _serial_comparison(m: Measurement, energy: Optional[float], notes: Notes, work: Work) -> SerialComparison:
    """The window's energy against running the same work one job after the other (whole card)."""
    if m.mode == "solo":
        for key in ("serial_energy_j", "energy_saved_vs_serial"):
            notes.unmeasured(key, "solo case: nothing shares the device")
        return SerialComparison(serial_energy_j=None, energy_saved_vs_serial=None)
    serial = metrics.serial_energy_j(work.fg_steps, work.fg_solo.j_per_step, work.bg_steps, work.bg_solo.j_per_step)
    if serial is None:
        notes.unmeasured("serial_energy_j", "a job's steps or its solo energy per step are unknown")
    saved = metrics.energy_saved_fraction(energy, serial)
    if saved is None:
        notes.unmeasured("energy_saved_vs_serial", "needs the window's energy and the serial energy")
    return SerialComparison(serial_energy_j=serial, energy_saved_vs_serial=saved)


def _mps_server_mb(sample: GpuSample, servers: frozenset[int]) -> float:
    return sum(v for pid, v in sample.proc_mem_mb.items() if pid in servers and v is not None)


def _role_peak(samples, roles: tuple[str, ...], servers: frozenset[int] = frozenset()) -> Optional[float]:
    """Peak summed memory of ``roles`` (plus MPS servers) over the samples listing one of their processes."""
    return metrics.peak(_plus(s.role_memory_mb(roles), _mps_server_mb(s, servers)) for s in samples if s.pids_with(roles))


def _plus(value: Optional[float], extra: float) -> Optional[float]:
    return None if value is None else value + extra


def _other_memory_mb(sample, servers: frozenset[int]) -> float:
    return sum(v for pid, v in sample.proc_mem_mb.items()
               if sample.roles.get(pid, "other") == "other" and pid not in servers and v is not None)


def _memory_figures(samples: Sequence[GpuSample], sharing_probe: dict[str, Any], mode: str, notes: Notes,
                    roles: Sequence[str] = JOB_ROLES) -> Memory:
    """Peaks of NVML per-process memory (CUDA contexts included) over the whole round.

    Only the case's own processes count (under MPS, with the MPS server that holds their
    memory); another user's process, or the ``--gpu-pairs-gpu-memory-mb`` ballast, is never in
    ``peak_vram_mb`` (``other_peak_vram_mb`` shows what others held).
    """
    servers = frozenset(sharing_probe.get("server_pids") or ())
    if servers:
        notes.unmeasured("peak_vram_mb", "under MPS it includes the MPS server's own memory (mps_server_vram_mb)")
    if mode == "solo":
        notes.unmeasured("bg_peak_vram_mb", "solo case: no background job")
    figures = Memory(peak_vram_mb=_role_peak(samples, tuple(roles), servers), fg_peak_vram_mb=_role_peak(samples, ("fg",)),
                     bg_peak_vram_mb=None if mode == "solo" else _role_peak(samples, ("bg",)),
                     other_peak_vram_mb=metrics.peak(_other_memory_mb(s, servers) for s in samples) or None,
                     mps_server_vram_mb=metrics.peak(_mps_server_mb(s, servers) for s in samples
                                                     if servers & set(s.proc_mem_mb)) if servers else None)
    for key, value in (("peak_vram_mb", figures.peak_vram_mb), ("fg_peak_vram_mb", figures.fg_peak_vram_mb),
                       ("bg_peak_vram_mb", figures.bg_peak_vram_mb)):
        if value is None:
            notes.unmeasured(key, "NVML listed no process of this job with its memory (a job that never reached "
                                  "the GPU, or NVML pids that do not match the jobs' pids, as in a container)")
    if figures.other_peak_vram_mb:
        notes.unmeasured("other_peak_vram_mb", "processes that are not the case's jobs held GPU memory; "
                                               "they are not in peak_vram_mb")
    return figures


def _sm_intervals(m: Measurement, idle_w: float) -> list[tuple[float, float, float]]:
    """(energy above idle, fg SM %, bg SM %) per stretch of the window, one stretch per sample
    that carried per-process utilisation (the stretch before it; the last one runs to the end)."""
    start, end = m.window
    ticks = [s for s in _in_window(m.samples, m.window) if s.has_sm_data]
    if not ticks:
        return []
    points = unwrap_counter((s.t, s.energy_mj) for s in m.samples)
    edges = [start] + [s.t for s in ticks[:-1]] + [end]
    energies = metrics.interval_energies_above_idle(points, edges, idle_w)
    return [(e, s.role_sm_pct("fg"), s.role_sm_pct("bg")) for e, s in zip(energies, ticks)]


def _other_sm_pids(m: Measurement) -> list[int]:
    return sorted({pid for s in _in_window(m.samples, m.window) for pid in s.pids_with(("other",))
                   if s.proc_sm_pct.get(pid, 0.0) > 0})


def _energy_split(m: Measurement, above_idle: Optional[float], idle_w: Optional[float],
                  notes: Notes, work: Work) -> EnergySplit:
    """fg + bg = energy above idle, exactly; ``energy_split_method`` says how it was split."""
    if above_idle is None:
        return EnergySplit(fg_gpu_energy_j=None, bg_gpu_energy_j=None, energy_split_method=None)
    if m.mode == "solo":
        return EnergySplit(fg_gpu_energy_j=above_idle, bg_gpu_energy_j=0.0, energy_split_method="solo")
    if work.sharing == "mps":
        fg, bg = metrics.progress_energy_split(above_idle, work.fg_steps, work.fg_solo.above_idle_j_per_step,
                                               work.bg_steps, work.bg_solo.above_idle_j_per_step)
        if fg is not None:
            return EnergySplit(fg_gpu_energy_j=fg, bg_gpu_energy_j=bg, energy_split_method="progress_x_solo_energy")
        return _time_share_split(m, above_idle, notes, "under MPS NVML reports the MPS server instead of its "
                                 "clients, and a solo energy per step is missing: split by time on the GPU")
    others = _other_sm_pids(m)
    if others:
        notes.unmeasured("energy_split_method", f"processes that are not the case's jobs computed during the window "
                                                f"(pids {others}); their energy is inside the split")
    fg_w, bg_w = metrics.sm_split_weights(_sm_intervals(m, idle_w or 0.0))
    if fg_w + bg_w > 0:
        fg, bg = metrics.split_energy(above_idle, fg_w, bg_w)
        return EnergySplit(fg_gpu_energy_j=fg, bg_gpu_energy_j=bg, energy_split_method="sm_util")
    return _time_share_split(m, above_idle, notes, "NVML gave no per-process SM utilisation for the jobs: split by "
                             "time on the GPU (fg: the whole window, bg: its training time in it)")


def _time_share_split(m: Measurement, above_idle: float, notes: Notes, why: str) -> EnergySplit:
    intervals = m.background.training_intervals() if m.background is not None else []
    bg_time = (metrics.coverage(intervals, *m.window) or 0.0) * m.window_s
    fg, bg = metrics.split_energy(above_idle, m.window_s, bg_time)
    notes.unmeasured("energy_split_method", why)
    return EnergySplit(fg_gpu_energy_j=fg, bg_gpu_energy_j=bg, energy_split_method="time_share")


def _no_progress(model: str, progress: Progress) -> str:
    """Why a job reported no steps: a progress_pattern that read nothing says so, with a line it
    missed; a job without one is told how to report."""
    return f"{model}'s log had lines but {progress.no_match}" if progress.no_match else PROGRESS_FIX.format(model)


def progress_source(progress: Progress) -> Optional[str]:
    """protocol or log, for a job that reported steps; None for one that reported none."""
    return progress.source if progress.steps else None


def _background_figures(m: Measurement, solo_bg: Optional[SoloBaseline], notes: Notes, kept: bool) -> Background:
    loop = m.background
    if loop is None:
        for key in ("bg_progress_ratio", "bg_coverage"):
            notes.unmeasured(key, "solo case: no background job")
        return Background(bg_runs=0, bg_failures=0, bg_coverage=None, bg_progress_ratio=None, bg_speed_ratio=None,
                          bg_progress_source=None, bg_steps_in_window=None, bg_solo_steps_per_s=None,
                          bg_peak_mem_reserved_mb=None)
    steps = loop.steps_between(*m.window) if any(r.outcome.progress.steps for r in loop.runs) else None
    solo_rate = solo_bg.steps_per_s if solo_bg is not None else None
    alone = _alone_paces(m, notes) if kept else _not_kept(notes)
    reference = alone.rate if alone.rate is not None else solo_rate
    if steps is None:
        model = loop.runs[0].outcome.model if loop.runs else "the background"
        progress = next((r.outcome.progress for r in loop.runs if r.outcome.progress.no_match), Progress())
        notes.unmeasured("bg_progress_ratio", f"the background job reports no steps: {_no_progress(model, progress)}")
    elif reference is None:
        notes.unmeasured("bg_progress_ratio", "the background job's solo baseline reported no step rate "
                                             "(fewer than two steps at this --gpu-pairs-scale, or none reported)")
    elif alone.rate is not None:
        notes.also("bg_progress_ratio", "against bg_alone_steps_per_s, the background's own pace alone just before "
                                       "and after the foreground's run, not its solo case's (bg_solo_steps_per_s)")
    reserved = [r.outcome.progress.result.get("peak_mem_reserved_mb") for r in loop.runs if r.outcome.progress.result]
    cover = metrics.coverage(loop.training_intervals(), *m.window)
    bg_perf = loop.last_completed_metrics()
    if bg_perf is None:
        notes.unmeasured("bg_perf", "no background run finished on its own during the case")
    return Background(bg_runs=len(loop.runs), bg_failures=len(loop.failures), bg_coverage=cover,
                      bg_progress_source=next((progress_source(r.outcome.progress) for r in loop.runs
                                               if r.outcome.progress.steps), None),
                      bg_progress_ratio=metrics.bg_progress_ratio(steps, m.window_s, reference),
                      bg_speed_ratio=metrics.bg_progress_ratio(steps, m.window_s * cover, reference) if cover else None,
                      bg_steps_in_window=steps, bg_solo_steps_per_s=solo_rate,
                      bg_alone_steps_per_s=alone.rate, bg_alone_drift=alone.drift,
                      bg_peak_mem_reserved_mb=metrics.peak(reserved), bg_perf=bg_perf,
                      bg_cycle_perf=_cycle_perf(m, notes) if kept else None)


@dataclass(frozen=True)
class AlonePaces:
    """A kept-running background's pace alone around the foreground's run, and how far it moved."""

    rate: Optional[float]
    drift: Optional[float]


def _not_kept(notes: Notes) -> AlonePaces:
    for key in ("bg_alone_steps_per_s", "bg_alone_drift"):
        notes.unmeasured(key, "the background is restarted, not kept running in its process (defaults.keep_background)")
    return AlonePaces(None, None)


def _alone_paces(m: Measurement, notes: Notes) -> AlonePaces:
    """Steps per second over the windows ``run.round`` let the background train alone (before and
    after the foreground's run), and the pace after over the pace before, less 1."""
    windows = [w for w in m.timeline.get("bg_alone") or [] if isinstance(w, list) and len(w) == 2 and w[1] > w[0]]
    loop = m.background
    paces = [loop.steps_between(a, b) / (b - a) for a, b in windows] if loop is not None else []
    seconds = sum(b - a for a, b in windows)
    if not paces or not seconds or not any(paces):
        notes.unmeasured("bg_alone_steps_per_s", "the background trained alone neither before nor after the "
                                                 "foreground's run (it ended no run in time, or a job failed)")
        notes.unmeasured("bg_alone_drift", "no window alone to compare")
        return AlonePaces(None, None)
    rate = sum(pace * (b - a) for pace, (a, b) in zip(paces, windows)) / seconds
    if len(paces) < 2 or not paces[0]:
        notes.unmeasured("bg_alone_drift", "one window alone only (the one before the run needs a run ended first)")
        return AlonePaces(rate, None)
    return AlonePaces(rate, paces[-1] / paces[0] - 1.0)


def _cycle_perf(m: Measurement, notes: Notes) -> Optional[list[dict[str, Any]]]:
    """The kept-running background's runs that shared the foreground's: its accuracy while shared."""
    loop = m.background
    if loop is None or not any(r.outcome.progress.cycles for r in loop.runs):
        notes.unmeasured("bg_cycle_perf", "the kept-running background ran no run to its end in its process "
                                          "(a command workload is restarted instead)")
        return None
    sharing = loop.cycles_sharing(*m.window)
    if not sharing:
        notes.unmeasured("bg_cycle_perf", "no run of the kept-running background ended after the foreground's "
                                          "run began")
    return sharing or None


UNFINISHED_FG = ("fg_duration_s", "fg_slowdown", "bg_progress_ratio", "bg_speed_ratio", "concurrency_efficiency")


def _foreground_unfinished(m: Measurement, notes: Notes) -> bool:
    """A foreground that crashed, ran out of memory, timed out or was stopped has no duration to
    compare: its partial figures would pass for a slowdown. They become None with the reason."""
    if m.fg.completed:
        return False
    why = m.fg_stopped_because or m.fg.reason()
    for key in UNFINISHED_FG:
        notes[key] = f"the foreground did not finish: {why}"
    return True


def _explain_missing_efficiency(sharing: Sharing, background: Background, notes: Notes) -> None:
    if sharing.fg_slowdown is None:
        notes.unmeasured("fg_slowdown", "the foreground's solo baseline gave no duration")
    if sharing.concurrency_efficiency is None:
        missing = " and ".join(k for k, v in (("fg_slowdown", sharing.fg_slowdown),
                                              ("bg_progress_ratio", background.bg_progress_ratio)) if v is None)
        notes.unmeasured("concurrency_efficiency", f"it needs {missing}, which this round did not measure")


def round_record(case: Case, m: Measurement, solo_fg: Optional[SoloBaseline], solo_bg: Optional[SoloBaseline],
                 env: DeviceFacts) -> Record:
    """The record of one round (one repeat) of a case."""
    return built(_round_figures(case, m, solo_fg, solo_bg, env))


def _timing(m: Measurement, solo_fg: Optional[SoloBaseline], notes: Notes) -> Timing:
    fg = m.fg
    startup = fg.progress.setup_t - fg.start_t if fg.progress.setup_t else None
    if startup is None:
        notes.unmeasured("fg_startup_s", "the foreground reported no setup event (built-ins do; a log read with a "
                                         "progress_pattern and pytest_gpu_pairs.progress have none)")
    if fg.duration_basis == "process":
        notes.unmeasured("duration_basis", "the foreground reports no progress, so durations are process wall times "
                                           f"(startup included): {_no_progress(fg.model, fg.progress)}")
    if fg.progress.problem_note:
        notes.also("duration_basis", f"{fg.progress_path}: {fg.progress.problem_note}")
    return Timing(fg_duration_s=fg.duration_s, fg_wall_s=fg.wall_s, fg_startup_s=startup,
                  duration_basis=fg.duration_basis, fg_progress_source=progress_source(fg.progress),
                  fg_solo_duration_s=solo_fg.duration_s if solo_fg is not None else None,
                  fg_solo_steps_per_s=solo_fg.steps_per_s if solo_fg is not None else None,
                  fg_steps_in_window=m.fg.progress.steps_between(*m.window) if m.fg.progress.steps else None,
                  window_s=m.window_s)


def _sharing(m: Measurement, timing: Timing, background: Background, notes: Notes) -> Sharing:
    slowdown = metrics.fg_slowdown(m.fg.duration_s, timing.fg_solo_duration_s) if m.mode != "solo" else None
    if m.mode == "solo":
        for key in ("fg_slowdown", "concurrency_efficiency"):
            notes.unmeasured(key, "solo case: nothing shares the device")
    return Sharing(fg_slowdown=slowdown,
                   concurrency_efficiency=metrics.concurrency_efficiency(slowdown, background.bg_progress_ratio))


def _cpu_energy(m: Measurement, notes: Notes) -> CpuEnergy:
    if m.cpu_energy_j is None:
        cause = f"not measurable: {m.cpu_energy_unavailable or 'RAPL not read'}"
        notes.unmeasured("cpu_energy_j", cause)
        notes.unmeasured("cpu_energy_method", cause)  # no method without a figure: the same cause, one summary line
    return CpuEnergy(cpu_energy_j=m.cpu_energy_j, cpu_energy_method="rapl" if m.cpu_energy_j is not None else None)


def _case_facts(case: Case, mode: str) -> CaseFacts:
    return CaseFacts(**{**describe(case), "mode": mode}, n_jobs=_n_jobs(case, mode), vram_budget_mb=case.vram_budget_mb,
                     vram_budget_source=VRAM_SOURCE, min_efficiency=case.min_efficiency)


def reused_record(case: Case, solo: Record, folder: Path) -> Record:
    """A solo case whose job another solo case already ran: that run's figures under this case's
    facts, with the folder of the run it reports."""
    return solo.updated(**_case_facts(case, "solo").keys_set(), reused_measurement=str(folder))


def _n_jobs(case: Case, mode: str) -> int:
    return 1 if mode == "solo" else len(case.jobs)


def _where(env: DeviceFacts, sampled: bool, job_cpus: Optional[dict[str, str]]) -> Where:
    return Where(device=env.device_name, gpu_uuid=env.gpu_uuid, host=env.host, scale=env.scale,
                 sample_hz=env.sample_hz if sampled else None,
                 idle_power_w=env.idle_power_w,
                 idle_power_method=IDLE_METHOD if env.idle_power_w is not None else None, job_cpus=job_cpus)


def _round_figures(case: Case, m: Measurement, solo_fg: Optional[SoloBaseline], solo_bg: Optional[SoloBaseline],
                   env: DeviceFacts) -> dict[str, Any]:
    """A round's figures as the dict the study's derived figures are added to before it is typed."""
    notes = Notes()
    timing = _timing(m, solo_fg, notes)
    background = _background_figures(m, solo_bg, notes, case.keep_background)
    sharing = _sharing(m, timing, background, notes)
    if _foreground_unfinished(m, notes):
        timing, background, sharing = (timing.without(UNFINISHED_FG), background.without(UNFINISHED_FG),
                                       sharing.without(UNFINISHED_FG))
    _explain_missing_efficiency(sharing, background, notes)
    work = Work(case.sharing, timing.fg_steps_in_window, background.bg_steps_in_window,
                solo_fg.cost if solo_fg is not None else SoloCost(), solo_bg.cost if solo_bg is not None else SoloCost())
    gpu = _gpu_figures(m, env, notes, work)
    bg_oom = m.background.ooms if m.background else []
    outcome = Outcome(oom=m.fg.oom or bool(bg_oom), failure=_failure_text(m, case.sharing),
                      fg_exit_code=m.fg.returncode,
                      fg_peak_mem_reserved_mb=(m.fg.progress.result or {}).get("peak_mem_reserved_mb"),
                      perf=m.fg.metrics, mps=_sharing_figures(case, m.sharing_probe, m.mode, notes))
    cpu = _cpu_energy(m, notes)
    where = _where(env, bool(m.samples), _job_cpus(notes, env, case))
    return merged(_case_facts(case, m.mode), timing, background, sharing, *gpu, cpu, outcome, where,
                  _clocks(m), {"notes": dict(notes)})


CLOCK_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "clock_event_reasons")


def _clocks(m: Measurement) -> dict[str, Any]:
    """The card's clocks over the window: a job that steps faster beside another than alone may be
    one the card clocked down while it ran alone, and a solo and a shared run can then be compared."""
    if not m.samples:
        return dict.fromkeys(CLOCK_KEYS)
    state = device_state(m.samples, *m.window)
    return {key: state[key] for key in CLOCK_KEYS}


def case_record(case: Case, m: Measurement, solo_fg: Optional[SoloBaseline], solo_bg: Optional[SoloBaseline],
                env: DeviceFacts, solo_fg_record: Optional[Record] = None) -> Record:
    """A round's whole record: its figures, then the study's derived figures (for a concurrent
    round, against the foreground's solo record). Solo baselines and cases are built the same way."""
    record = _round_figures(case, m, solo_fg, solo_bg, env)
    return built(with_impossible_notes(with_derived(record, case.fg, None if case.mode == "solo" else solo_fg_record)))


def _sharing_figures(case: Case, probe: dict[str, Any], mode: str, notes: Notes) -> Optional[dict[str, Any]]:
    """For an MPS case, the limits each job had and the servers and clients the daemon reported."""
    system_daemon = probe.get("system_mps_daemon_pid")
    if case.sharing == "timeslice" and system_daemon is not None:
        notes.unmeasured("sharing", f"an MPS control daemon of the system (pid {system_daemon}) was running: "
                                    "jobs that inherit its pipe directory become its clients")
    if case.sharing != "mps" or mode == "solo":
        return None
    return {key: probe.get(key) for key in ("limits", "control_pid", "server_pids", "client_pids")}


NOT_MPS_CLIENTS = ("sharing mps: the MPS daemon ran no server while the jobs trained, so the jobs did not become MPS "
                   "clients (they were time-sliced); see the daemon's control.log")


def _failure_text(m: Measurement, sharing: str = "timeslice") -> Optional[str]:
    problems = []
    if sharing == "mps" and m.mode != "solo" and not m.sharing_probe.get("server_pids"):
        problems.append(NOT_MPS_CLIENTS)
    if m.fg.failed:
        problems.append(f"foreground {m.fg.model} {m.fg.reason()}")
    if m.fg_stopped_because:
        problems.append(m.fg_stopped_because)
    elif m.background is not None and m.background.failure:
        problems.append(m.background.failure)
    if m.background is not None:
        problems += [f"background {r.outcome.model} run {r.index} {r.outcome.reason()}" for r in m.background.failures]
    return "; ".join(problems) or None


def failed_record(case: Case, failure: str, env: DeviceFacts, loop: Optional[BackgroundRuns] = None) -> Record:
    """The record of a case that could not be measured (a solo baseline failed, the background
    never became ready): what is known, the failure, and None for every figure, with the reason."""
    runs = loop.runs if loop is not None else []
    return built(merged(
        CaseFacts(**{**describe(case), "mode": case.mode}, n_jobs=_n_jobs(case, case.mode)),
        Outcome(failure=failure, oom=any(r.outcome.oom for r in runs), fg_exit_code=None, perf={}),
        Background(bg_runs=len(runs), bg_failures=sum(r.outcome.failed for r in runs), bg_progress_ratio=None,
                   bg_coverage=None),
        Timing(fg_duration_s=None, fg_solo_duration_s=None), Sharing(fg_slowdown=None, concurrency_efficiency=None),
        GpuEnergy(gpu_energy_j=None), Memory(peak_vram_mb=None), CpuEnergy(cpu_energy_j=None),
        Where(device=env.device_name, scale=env.scale),
        {"notes": {key: f"the case could not be measured: {failure}" for key in NOT_MEASURED_IN_A_FAILED_CASE}}))


NOT_MEASURED_IN_A_FAILED_CASE = ("fg_duration_s", "fg_solo_duration_s", "fg_slowdown", "bg_progress_ratio",
                                 "concurrency_efficiency", "gpu_energy_j", "peak_vram_mb", "bg_coverage", "cpu_energy_j")


def coverage_refusal(record: Record, min_coverage: Optional[float]) -> Optional[str]:
    """Why a round does not count as a run shared from start to end; None where it does or no rule applies.
    A round whose coverage was not measured (it failed) is left to its failure."""
    cover = record.bg_coverage
    if min_coverage is None or cover is None or cover >= min_coverage:
        return None
    return (f"the background covered {100 * cover:.0f} % of the foreground's run, below the {100 * min_coverage:.0f} % "
            f"a run's outcome needs")


def aggregate(rounds: Sequence[Record], min_coverage: Optional[float] = None) -> Record:
    """One record for all repeats: numeric keys hold the mean of the rounds that count, ``<key>_std``
    the spread. A round whose background covered less of the run than ``min_coverage`` is kept under
    ``rounds`` with its reason (its ``coverage_refused``) and left out of the figures; where none
    counts, the case holds no data point and says why (``coverage_refused``)."""
    refusals = [coverage_refusal(r, min_coverage) for r in rounds]
    counted = [r for r, why in zip(rounds, refusals) if why is None]
    record = {**(counted or rounds)[-1].to_dict(), "repeats": len(counted)}
    if min_coverage is not None:
        record.update(min_coverage=min_coverage, rounds_refused=len(rounds) - len(counted))
    if len(rounds) > 1:
        record.update(_over_rounds(counted or rounds, rounds, refusals))
    if not counted:
        record["coverage_refused"] = f"{refusals[-1]}: no round counts" if len(rounds) > 1 else refusals[-1]
    return built(with_impossible_notes(record))


def _over_rounds(counted: Sequence[Record], rounds: Sequence[Record], refusals: Sequence[Optional[str]]) -> dict[str, Any]:
    """Each per-round figure's mean and ``_std`` over the rounds that count (the table's per-round
    keys), whether any round ran out of memory or failed, and every round's own figures."""
    spread = {key: metrics.mean_and_std([getattr(r, key) for r in counted]) for key in PER_ROUND}
    return {**{key: mean for key, (mean, _) in spread.items()}, **{f"{key}_std": std for key, (_, std) in spread.items()},
            "oom": any(r.oom for r in rounds), "failure": "; ".join(r.failure for r in rounds if r.failure) or None,
            "rounds": [{**{k: getattr(r, k) for k in PER_ROUND + ("oom", "failure")},
                        **({"coverage_refused": why} if why else {})} for r, why in zip(rounds, refusals)]}


BUSY_KEYS = ("fg_solo_gpu_busy", "bg_solo_gpu_busy", "pair_gpu_busy", "efficiency_bound")
INTERLEAVED_WARMUP_RULE = ("both jobs started together; excluded, at every start of the pair: everything until both "
                           "had reported a training step, then until both step rates held steady (two consecutive "
                           "windows within 10 %), at least 1 s and at most warmup_s; after every switch of phase, "
                           "settle_s")


def interleaved_record(case: Case, m: InterleavedMeasurement, env: DeviceFacts) -> Record:
    """The record of an interleaved case: the mean of its rounds with intervals, and how it was measured."""
    notes = Notes()
    rounds = case_figures(m, env.idle_power_w)
    rounds["jobs"] = [{**figures, "model": job.model} for figures, job in zip(rounds["jobs"], case.jobs)]
    _explain_unsampled(m, env, notes)
    _explain_unread_busy(m, notes)
    record = merged(_case_facts(case, case.mode), _interleaving(case, m, rounds["precision_achieved"]),
                    Outcome(oom=m.oom, failure=_interleaved_failure(case, m), perf={}, fg_exit_code=None,
                            mps=_sharing_figures(case, m.sharing_probe, case.mode, notes)),
                    rounds, _restart_figures(m),
                    EnergySplit(energy_split_method=SPLIT_METHOD if m.samples else None),
                    Timing(fg_progress_source=progress_source(m.fg)), Background(bg_progress_source=progress_source(m.bg)),
                    _memory_figures(m.samples, m.sharing_probe, case.mode, notes, case.roles))
    _explain_solo_phases_under_limits(case, m, notes)
    _explain_excluded_rounds(record, notes)
    _explain_interleaved_nulls(record, m, env, notes)
    for role, progress in m.progresses.items():
        if progress.problem_note:
            key = f"{role}_progress_source" if role in ("fg", "bg") else "jobs"
            notes.also(key, progress.problem_note if key != "jobs" else f"{role}: {progress.problem_note}")
    where = _where(env, bool(m.samples), _job_cpus(notes, env, case))
    return built(with_impossible_notes(merged(record, where, {"notes": dict(notes)})))


def _interleaved_failure(case: Case, m: InterleavedMeasurement) -> Optional[str]:
    """The measurement's own failure, and under MPS a probe that found no server: the jobs were then
    time-sliced, whatever the case is called."""
    unserved = case.sharing == "mps" and "server_pids" in m.sharing_probe and not m.sharing_probe["server_pids"]
    return "; ".join(p for p in (m.failure, NOT_MPS_CLIENTS if unserved else None) if p) or None


def _explain_solo_phases_under_limits(case: Case, m: InterleavedMeasurement, notes: Notes) -> None:
    """An interleaved MPS case keeps its jobs as MPS clients throughout: a job's solo phase is the job
    alone under its own limits, not alone on the whole card, and a job that fills the card runs
    slower so. The efficiency is against that pace; the epoch method's solo baselines are plain."""
    limits = m.sharing_probe.get("limits") or {}
    threads = {role: (lim or {}).get("active_thread_percentage") for role, lim in limits.items()}
    if case.sharing != "mps" or not any(threads.values()):
        return
    shares = ", ".join(f"{role} {pct} %" if pct else f"{role} all" for role, pct in threads.items())
    reason = (f"alone as an MPS client under its limits (active threads: {shares}), not alone on the whole card: "
              "a job that fills the card steps slower so")
    for role in ("fg", "bg"):
        notes.also(f"{role}_solo_steps_per_s", reason)
    notes.also("concurrency_efficiency", "each job's pace is against its solo phases, each alone as an MPS client "
                                         f"under its limits (active threads: {shares}), not alone on the whole card")


def _failed_part_way(record: dict[str, Any], key: str, m: InterleavedMeasurement) -> str:
    """Why a failed case's figure is absent, or what the one it has covers: the rounds before the
    failure, not the starts the method takes."""
    if record.get(key) is None:
        return f"the case could not be measured: {m.failure}"
    starts = len({start.index for start in m.starts}) or 1
    return (f"over the {len(m.rounds)} round(s) of {starts} of {max(m.planned_starts, starts)} start(s) measured "
            f"before the case failed, so not the case's figure: {m.failure}")


def _interleaving(case: Case, m: InterleavedMeasurement, achieved: Optional[float]) -> Interleaving:
    """How the case was measured: phases, warm-up, the device time it held, and the stopping rule's verdict."""
    target = m.rule.precision if m.rule is not None else None
    return Interleaving(repeats=len(m.rounds), phase_s=m.phase_s or case.phase_s,
                        settle_s=case.settle_s if m.settle_s is None else m.settle_s,
                        warmup_rule=INTERLEAVED_WARMUP_RULE, warmup_s=m.warmup[1] - m.warmup[0],
                        gpu_seconds=(m.rounds[-1].end if m.rounds else m.warmup[1]) - m.warmup[0],
                        stop_reason=m.stop_reason, precision_target=target,
                        precision_reached=None if target is None else achieved is not None and achieved <= target)


def _restart_figures(m: InterleavedMeasurement) -> Restarts:
    """How often each job finished its run and was started again, and the rounds that cost."""
    return Restarts(fg_restarts=sum(1 for r in m.restarts if r.role == "fg"),
                    bg_restarts=sum(1 for r in m.restarts if r.role == "bg"),
                    rounds_discarded=sum(r.rounds_discarded for r in m.restarts),
                    restarts=[r.as_record() for r in m.restarts])


def _explain_excluded_rounds(record: dict[str, Any], notes: Notes) -> None:
    if record.get("rounds_excluded"):
        notes["rounds_excluded"] = (
            f"{record['rounds_excluded']} round(s) left out of every figure: a job reported no step through part of "
            "a phase (an evaluation pass, a checkpoint, a stall: see each round's rates under rounds), or the "
            "energy split could not be taken")
    if record.get("rounds_discarded"):
        notes["rounds_discarded"] = (
            f"{record['rounds_discarded']} round(s) discarded around restarts: measured after a job's last step "
            "report of a run that then ended (its end of training)")


def _explain_unsampled(m: InterleavedMeasurement, env: DeviceFacts, notes: Notes) -> None:
    """Without GPU samples every GPU figure has one reason: the GPU's, said before any other."""
    if m.samples:
        return
    reason = env.gpu_unavailable or "no GPU samples were taken"
    for key in ("gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "serial_energy_j",
                "energy_saved_vs_serial", "gpu_power_avg_w", "energy_split_method", "peak_vram_mb",
                "fg_peak_vram_mb", "bg_peak_vram_mb", "fg_gpu_energy_per_step_j", "bg_gpu_energy_per_step_j",
                "fg_alone_energy_j", "bg_alone_energy_j", *BUSY_KEYS):
        notes.unmeasured(key, f"not measurable on this run: {reason}")


def _explain_unread_busy(m: InterleavedMeasurement, notes: Notes) -> None:
    if m.samples and all(s.util_pct is None for s in m.samples):
        for key in BUSY_KEYS:
            notes.unmeasured(key, "NVML gave no utilisation reading on this GPU")


def _why_no_interval(record: dict[str, Any]) -> str:
    """The interval is over the rounds that count: rounds left out (a job silent through a phase) leave
    a case with several rounds measured and too few to give one."""
    excluded = record.get("rounds_excluded") or 0
    if not excluded:
        return "an interval needs at least two rounds"
    return (f"an interval needs at least two rounds that count ({record.get('n_rounds') or 0} here; "
            f"{excluded} left out, see rounds_excluded)")


def _explain_interleaved_nulls(record: dict[str, Any], m: InterleavedMeasurement, env: DeviceFacts,
                               notes: Notes) -> None:
    notes.unmeasured("perf", "interleaved rounds measure step rates, not a finished training run's metrics "
                             "(method epoch records those)")
    notes.unmeasured("fg_exit_code", "the harness ends both jobs at the end of an interleaved case")
    notes.unmeasured("fg_duration_s", "interleaved rounds measure step rates over phases, not a run's duration "
                                      "(method epoch records it)")
    if m.failure:
        for key in ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio"):
            notes.unmeasured(key, _failed_part_way(record, key, m))
    if env.idle_power_w is None and m.samples:
        notes.unmeasured("gpu_energy_above_idle_j", "idle power was not measured")
    stopped = f"; the case stopped: {m.stop_reason}" if m.stop_reason else ""
    for key in ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio"):
        if record.get(key) is None:
            notes.unmeasured(key, "no round had two step reports of each job inside each of its phases (phases of "
                                  f"{record['phase_s']:g} s{stopped}): a job without the progress protocol or a "
                                  "progress_pattern reports no steps, and a job slower than one step per phase_s / 2 "
                                  "needs longer phases (more --gpu-pairs-max-case-s, or a less loaded host)")
    if record["precision_target"] is None:
        notes.unmeasured("precision_reached", "no precision target: a fixed number of rounds (the CPU default, "
                                              "or --gpu-pairs-precision off)")
    if (record.get("n_rounds") or 0) < 2:
        notes.unmeasured("concurrency_efficiency_ci", _why_no_interval(record))
