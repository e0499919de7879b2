"""A workload alone, briefly: started as a real job process, its start-up, steady step rate, peak
memory and power measured over a few seconds, and every process of it ended.

What ``gpu-pairs profile`` stores for the estimator and the planner. The job runs as in an
interleaved case (a built-in told to train far longer than the profile lasts, in steady-state
mode: no per-epoch evaluation, twenty step reports a second; a command workload as declared, its
progress from the protocol or its ``progress_pattern``), so the rate measured is the rate a case
will see. The window starts ``warmup_s`` after the first step report (start-up, autotuning and
first steps left out) and lasts ``window_s``, or longer for a job that steps slowly: until it holds
``REPORTS_WANTED`` step reports, up to ``MAX_STRETCH`` times ``window_s`` (a CPU step of a large
model takes many seconds, and a rate needs several of them). On a GPU, NVML is sampled from this process (which
creates no CUDA context): the job's own peak memory, utilisation, power and energy; on the CPU,
the resident memory of the job's processes and, where RAPL is readable, the CPU package's power.
Where the card serves GPM (Hopper and newer), a GPM sample at each end of the window gives the share
of the SMs busy and of the DRAM bandwidth used over it (``monitor.gpm``): what the planner's MPS
model reads as how much of the card the job's kernels occupy, where power above idle only hints.
A figure that could not be measured is None, with the reason in ``unmeasured``.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import psutil

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.monitor.cpu import RaplSampler
from pytest_gpu_pairs.monitor.gpm import GPM_METRICS, GpmShares, GpmWindow, not_measured
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.protocol import STEADY_STATE_VAR, Progress, now
from pytest_gpu_pairs.run.interleaved import long_running
from pytest_gpu_pairs.run.jobs import JobProcess, build_spec
from pytest_gpu_pairs.run.minfit import RESOLUTION_MB, bisect_min_fit, probe_fits
from pytest_gpu_pairs.run.proctree import JOB_TAG_VAR, tagged_processes

POLL_S = 0.1
MB = 1024 * 1024
ROLE = "fg"
MIN_STEPS = 2  # step reports a window must hold for a rate
REPORTS_WANTED = 4  # step reports a window stretches for, where the job steps slowly
MAX_STRETCH = 10  # a window stretches to at most this many times the one asked for


@dataclass
class SoloRun:
    """What a short solo run of one job measured."""

    model: str
    device: str
    startup_s: Optional[float] = None  # process start to its first step report
    step_time_s: Optional[float] = None
    steps_in_window: float = 0
    window_s: Optional[float] = None
    report_gap_s: Optional[float] = None  # the usual time between step reports in the window
    peak_memory_mb: Optional[float] = None
    memory_kind: Optional[str] = None
    util_avg_pct: Optional[float] = None
    power_avg_w: Optional[float] = None
    energy_per_step_j: Optional[float] = None
    gpm_sm_util_pct: Optional[float] = None  # the share of the SMs busy over the window (GPM), in percent
    gpm_dram_bw_pct: Optional[float] = None  # the share of the DRAM bandwidth used over it (GPM), in percent
    gpm_sm_occupancy_pct: Optional[float] = None  # resident warps as a share of the SMs' room (GPM), in percent
    gpm_tensor_util_pct: Optional[float] = None
    gpm_fp32_util_pct: Optional[float] = None
    gpm_fp16_util_pct: Optional[float] = None
    cpu_package_power_w: Optional[float] = None
    run_s: Optional[float] = None  # the whole run, where it ended by itself within the profile
    run_steps: Optional[float] = None  # a log's progress_pattern may count fractional steps
    failure: Optional[str] = None
    log_path: str = ""
    unmeasured: dict[str, str] = field(default_factory=dict)
    processes_left: int = 0  # processes of the job still alive after it was ended: 0, or a leak


def cpu_name() -> Optional[str]:
    """The CPU's model name as the kernel gives it (None where it does not)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()[:200] or None
    return None


def _tree(pid: Optional[int]) -> list[psutil.Process]:
    """A process and its descendants, while it runs."""
    if pid is None:
        return []
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


def resident_mb(pid: Optional[int]) -> Optional[float]:
    """The resident memory of a process and its descendants, in MB (None once it is gone)."""
    total, seen = 0, False
    for process in _tree(pid):
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
            seen = True
    return total / MB if seen else None


class _Watch:
    """The job's host memory, polled while the profile waits."""

    def __init__(self, process: JobProcess):
        self.process = process
        self.peak_mb: Optional[float] = None

    def poll(self) -> None:
        now = resident_mb(self.process.pid)
        if now is not None:
            self.peak_mb = max(self.peak_mb or 0.0, now)


def _wait_first_step(process: JobProcess, watch: _Watch, timeout_s: float) -> Optional[float]:
    deadline = now() + timeout_s
    while now() < deadline:
        progress = process.progress()
        if progress.steps:
            return progress.steps[0][0]
        if process.poll() is not None:
            return None
        watch.poll()
        time.sleep(POLL_S)
    return None


def _hold_until(process: JobProcess, watch: _Watch, end_t: float) -> None:
    while now() < end_t and process.poll() is None:
        watch.poll()
        time.sleep(min(POLL_S, max(0.0, end_t - now())))


def _stretch(process: JobProcess, watch: _Watch, start: float, longest_s: float) -> float:
    """Hold a job that steps slowly until its window has ``REPORTS_WANTED`` step reports, for at most
    ``longest_s`` from ``start``; the window's end."""
    while process.poll() is None and now() < start + longest_s:
        if sum(1 for t, _ in process.progress().steps if t >= start) >= REPORTS_WANTED:
            break
        watch.poll()
        time.sleep(POLL_S)
    return min(now(), start + longest_s)


def window_rate(steps: list[tuple[float, float]], start: float, end: float) -> tuple[Optional[float], float, Optional[float]]:
    """(seconds per step, steps, median seconds between reports) of the reports inside [start, end]."""
    inside = [(t, s) for t, s in steps if start <= t <= end]
    if len(inside) < MIN_STEPS or inside[-1][1] <= inside[0][1]:
        return None, 0, None
    done = inside[-1][1] - inside[0][1]
    gaps = [b[0] - a[0] for a, b in zip(inside, inside[1:])]
    return (inside[-1][0] - inside[0][0]) / done, done, statistics.median(gaps)


def gpu_figures(samples: list[GpuSample], start: float, end: float, steps: float) -> dict[str, Optional[float]]:
    """The job's NVML peak memory over its life, and utilisation, power and energy per step in the window."""
    peaks = [m for m in (s.role_memory_mb((ROLE,)) for s in samples) if m is not None]
    inside = [s for s in samples if start <= s.t <= end]
    utils = [s.util_pct for s in inside if s.util_pct is not None]
    powers = [s.power_w for s in inside if s.power_w is not None]
    counters = [(s.t, s.energy_mj) for s in inside if s.energy_mj is not None]
    energy_j = (counters[-1][1] - counters[0][1]) / 1000 if len(counters) >= 2 else None
    power = energy_j / (counters[-1][0] - counters[0][0]) if energy_j is not None and counters[-1][0] > counters[0][0] \
        else (statistics.fmean(powers) if powers else None)
    return {"peak_memory_mb": max(peaks) if peaks else None,
            "util_avg_pct": statistics.fmean(utils) if utils else None, "power_avg_w": power,
            "energy_per_step_j": power * (end - start) / steps if power is not None and steps else None}


def _finish_gpu(run: SoloRun, sampler: Optional[Sampler], window: tuple[float, float], shares: GpmShares) -> None:
    if sampler is None:
        for key in ("util_avg_pct", "power_avg_w", "energy_per_step_j", *GPM_METRICS):
            run.unmeasured[key] = "measured on a GPU only: this profile ran on the CPU"
        return
    for key in GPM_METRICS:
        setattr(run, key, getattr(shares, key))
    run.unmeasured.update(shares.unmeasured)
    figures = gpu_figures(sampler.samples, *window, run.steps_in_window)
    for key, value in figures.items():
        setattr(run, key, value)
        if value is None:
            run.unmeasured[key] = "NVML gave no reading of it in the window"
    run.memory_kind = "GPU memory of the job's processes (NVML)"


def _finish_cpu(run: SoloRun, rapl: RaplSampler, window: tuple[float, float], peak_mb: Optional[float]) -> None:
    if run.device == "cpu":
        run.peak_memory_mb, run.memory_kind = peak_mb, "resident memory of the job's processes"
        joules = rapl.energy_j(*window)
        run.cpu_package_power_w = joules / (window[1] - window[0]) if joules is not None else None
        if joules is None:
            run.unmeasured["cpu_package_power_w"] = rapl.unavailable_reason or "RAPL gave no reading in the window"
    else:
        run.unmeasured["cpu_package_power_w"] = "measured on the CPU only: this profile ran on a GPU"
    if run.peak_memory_mb is None:
        run.unmeasured["peak_memory_mb"] = "no memory reading of the job was taken"


def _ended_run(run: SoloRun, process: JobProcess, progress: Progress) -> None:
    """A run that ended by itself: its length, or its failure."""
    code = process.poll()
    if code is None or process.stopped_by_harness:
        run.unmeasured.setdefault("run_s", "the run did not end within the profile (it was stopped)")
        return
    if code != 0:
        outcome = process.outcome()
        why = f"ran out of memory ({outcome.oom_message})" if outcome.oom else f"exit code {code}"
        run.failure = f"{run.model} ended during the profile: {why}; log: {process.log_path}"
        return
    run.run_s = (process.exit_t or now()) - process.start_t
    run.run_steps = progress.steps[-1][1] if progress.steps else 0


def profile_job(job: JobConfig, device: str, scale: float, work_dir: Path, warmup_s: float, window_s: float,
                ready_timeout_s: float, gpu: Any = None, sample_hz: float = 10.0,
                cpus: Optional[frozenset[int]] = None) -> SoloRun:
    """One job alone for ``warmup_s + window_s`` after its first step; ``gpu`` (an open NVML
    device) samples the card where the job trains on one."""
    work_dir.mkdir(parents=True, exist_ok=True)
    run = SoloRun(job.model, device)
    spec = build_spec(long_running(job), ROLE, device, scale, ready_timeout_s + warmup_s + MAX_STRETCH * window_s + 60.0,
                      {STEADY_STATE_VAR: "1"}, cpus)
    process = JobProcess(spec, work_dir / f"{job.model}.log", work_dir / f"{job.model}.progress.jsonl")
    run.log_path = process.log_path
    roles, rapl = PidRoles(), RaplSampler(clock=now)
    sampler = Sampler(gpu, sample_hz, roles).start() if gpu is not None and device == "cuda" else None
    gpm = GpmWindow(gpu) if sampler is not None else None
    rapl.start()
    try:
        _measure(run, process.start(), roles, (ready_timeout_s, warmup_s, window_s), sampler, rapl, gpm)
    finally:
        process.stop()
        if sampler is not None:
            sampler.stop()
        if gpm is not None:
            gpm.discard()
        rapl.stop()
    run.processes_left = len(tagged_processes(lambda environ: environ.get(JOB_TAG_VAR) == process.tag))
    return run


def _measure(run: SoloRun, process: JobProcess, roles: PidRoles, seconds: tuple[float, float, float],
             sampler: Optional[Sampler], rapl: RaplSampler, gpm: Optional[GpmWindow]) -> None:
    """``seconds``: (ready timeout, warm-up, window)."""
    ready_timeout_s, warmup_s, window_s = seconds
    if process.start_error:
        run.failure = f"{run.model} could not start: {process.start_error}"
        return
    roles.register(process.pid, ROLE, process.tag)
    watch = _Watch(process)
    first_t = _wait_first_step(process, watch, ready_timeout_s)
    if first_t is None:
        _no_step(run, process, ready_timeout_s)
        return
    run.startup_s = first_t - process.start_t
    _hold_until(process, watch, first_t + warmup_s)
    if gpm is not None:
        gpm.open()
    _hold_until(process, watch, first_t + warmup_s + window_s)
    stretched = _stretch(process, watch, first_t + warmup_s, MAX_STRETCH * window_s)
    end_t = min(now(), max(first_t + warmup_s + window_s, stretched))
    shares = gpm.close() if gpm is not None else not_measured("measured on a GPU only")
    window = (first_t + warmup_s, end_t)
    progress = process.progress()
    run.step_time_s, run.steps_in_window, run.report_gap_s = window_rate(progress.steps, *window)
    if run.step_time_s is None:  # a run that ended early: its whole training stands in for the window
        window = (first_t, progress.steps[-1][0])
        shares = not_measured("the run ended before its window: GPM's samples bound the window, not the whole run")
        run.step_time_s, run.steps_in_window, run.report_gap_s = window_rate(progress.steps, *window)
    run.window_s = window[1] - window[0] if run.step_time_s is not None else None
    if run.step_time_s is None:
        run.unmeasured["step_time_s"] = (f"fewer than {MIN_STEPS} step reports after the first, in "
                                         f"{end_t - first_t:.0f} s of training (the window stretches to "
                                         f"{MAX_STRETCH} x --seconds for a job that steps slowly): give it a "
                                         f"longer window with --seconds")
    _ended_run(run, process, progress)
    _finish_gpu(run, sampler, window, shares)
    _finish_cpu(run, rapl, window, watch.peak_mb)


def _no_step(run: SoloRun, process: JobProcess, ready_timeout_s: float) -> None:
    code = process.poll()
    if code is None:
        run.failure = (f"{run.model} reported no training step within {ready_timeout_s:g} s; "
                       f"log: {process.log_path}")
        return
    outcome = process.outcome()
    why = f"ran out of memory ({outcome.oom_message})" if outcome.oom else f"exit code {code}"
    run.failure = f"{run.model} ended before its first step report: {why}; log: {process.log_path}"


MIN_CARD_MB = 512


class _Inconclusive(Exception):
    pass


def min_fit(job: JobConfig, gpu: Any, work_dir: Path, hint_mb: Optional[float]) -> tuple[Optional[int], str]:
    """The smallest emulated card the job runs its steady state on, to within ``RESOLUTION_MB``
    (``run.minfit``'s bisection over ballast-emulated cards); (None, why) where it could not be found."""
    high = int(gpu.info.memory_total_mb)

    def fits(card_mb: int) -> bool:
        outcome = probe_fits([job], card_mb, gpu, work_dir)
        if not outcome.conclusive:
            raise _Inconclusive(outcome.reason)
        return outcome.fits

    try:
        found = bisect_min_fit(fits, MIN_CARD_MB, high, int(hint_mb) if hint_mb else None, RESOLUTION_MB)
    except _Inconclusive as stop:
        return None, f"inconclusive: {stop}"
    if found.fit_mb is None:
        return None, f"did not run its steady state even on the whole {high} MB card"
    return found.fit_mb, f"bisection over emulated cards to within {RESOLUTION_MB} MB"
