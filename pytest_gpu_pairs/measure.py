"""One round of a case, from monitors up to monitors down: Case -> Measurement.

The phases are separate methods so that pytest-benchmark times only the foreground job
(``run_foreground``) while the background and monitors are set up and torn down around it. A
built-in foreground starts beside the background and waits at a start gate, opened when the
background trains, so both jobs' startups overlap and neither trains alone at the window's start.
``abort`` is safe to call at any point and more than once: it is what teardown calls when a
phase raised.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .background import BackgroundLoop
from .cases import JobConfig
from .jobs import JobOutcome, JobProcess, build_spec
from .monitor.cpu import RaplSampler
from .monitor.nvml import Gpu, PidRoles, Sampler
from .monitor.samples import GpuSample, save_cpu_readings, save_samples
from .workloads.progress import GATE_VAR


@dataclass
class Environment:
    """Session-wide facts every measurement needs."""

    device: str
    scale: float
    sample_hz: float
    gpu: Optional[Gpu] = None
    gpu_unavailable: Optional[str] = None
    idle_power_w: Optional[float] = None
    idle_power_note: Optional[str] = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # process groups of helpers that are not jobs (the --gpu-memory-mb ballast), by role
    fixed_roles: dict[int, str] = field(default_factory=dict)
    live: Optional[Any] = None  # live.LiveLine when the terminal shows one: told when a round starts and ends

    @property
    def device_name(self) -> str:
        return self.gpu.info.name if self.gpu is not None and self.device == "cuda" else "cpu"


@dataclass
class Measurement:
    """The raw facts of one round; ``results`` turns them into the record."""

    mode: str
    fg: JobOutcome
    window: tuple[float, float]
    samples: list[GpuSample]
    background: Optional[BackgroundLoop]
    cpu_energy_j: Optional[float]
    cpu_energy_unavailable: Optional[str]
    out_dir: Path
    sharing_probe: dict[str, Any] = field(default_factory=dict)

    @property
    def window_s(self) -> float:
        return self.window[1] - self.window[0]


class BackgroundNotReady(RuntimeError):
    pass


class Round:
    """``job_env`` adds variables per role ("fg", "bg"), e.g. an MPS client's; ``probe`` is read once
    the foreground is done and before the background stops, while the sharing mechanism is live."""

    def __init__(self, fg: JobConfig, bg: Optional[JobConfig], env: Environment, out_dir: str | Path,
                 timeout_s: float, restart_delay_s: float, job_env: Optional[dict[str, dict[str, str]]] = None,
                 probe: Optional[Callable[[], dict[str, Any]]] = None):
        self.fg_job, self.bg_job, self.env = fg, bg, env
        self.out_dir, self.timeout_s, self.restart_delay_s = Path(out_dir), timeout_s, restart_delay_s
        self.job_env, self.probe = job_env or {}, probe
        self.roles = PidRoles()
        for pgid, role in env.fixed_roles.items():
            self.roles.register(pgid, role)
        self.sampler: Optional[Sampler] = None
        self.rapl = RaplSampler()
        self.background: Optional[BackgroundLoop] = None
        self.fg_outcome: Optional[JobOutcome] = None
        self._fg_process: Optional[JobProcess] = None
        self._gate: Optional[Path] = None
        self._closed = False

    @property
    def mode(self) -> str:
        return "solo" if self.bg_job is None else "concurrent"

    def _spec(self, job: JobConfig, role: str):
        return build_spec(job, role, self.env.device, self.env.scale, self.timeout_s,
                          {**self.env.extra_env, **self.job_env.get(role, {})})

    def start(self) -> None:
        """Monitors up, then the background loop, returning once the background is training."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.env.live is not None:
            self.env.live.round_started(self)
        if self.env.gpu is not None and self.env.device == "cuda":
            self.sampler = Sampler(self.env.gpu, self.env.sample_hz, self.roles).start()
        self.rapl.start()
        if self.bg_job is None:
            return
        self.background = BackgroundLoop(self._spec(self.bg_job, "bg"), self.out_dir, self.restart_delay_s,
                                         on_start=lambda job: self.roles.register(job.pid, "bg")).start()
        if self.fg_job.is_builtin:
            self._start_foreground(gate=self.out_dir / "fg.start-gate")
        if not self.background.wait_ready(self.timeout_s):
            reason = self.background.failure or (
                f"background {self.bg_job.model} did not become ready within {self.timeout_s:.0f} s"
                f" (see {self.out_dir}/bg-run-*.log)")
            raise BackgroundNotReady(reason)
        if self._gate is not None:
            self._gate.touch()

    def _start_foreground(self, gate: Optional[Path] = None) -> None:
        """Start the foreground job; a built-in one held at ``gate`` (see ``wait_for_start_gate``)."""
        spec = self._spec(self.fg_job, "fg")
        if gate is not None:
            gate.unlink(missing_ok=True)
            spec.env[GATE_VAR] = str(gate)
        self._gate = gate
        self._fg_process = JobProcess(spec, self.out_dir / "fg.log", self.out_dir / "fg.progress.jsonl").start()
        self.roles.register(self._fg_process.pid, "fg")

    def run_foreground(self) -> JobOutcome:
        if self._fg_process is None:
            self._start_foreground()
        self._fg_process.wait()
        self.fg_outcome = self._fg_process.outcome()
        return self.fg_outcome

    def finish(self) -> Measurement:
        """Stop the background and monitors, save the samples, and hand back the round's facts."""
        probed = self.probe() if self.probe is not None else {}
        self._close()
        window = self.fg_outcome.training_window
        samples = self.sampler.samples if self.sampler else []
        if samples:
            save_samples(samples, self.out_dir)
        if self.rapl.readings:
            save_cpu_readings(self.rapl.readings, self.out_dir)
        return Measurement(self.mode, self.fg_outcome, window, samples, self.background,
                           self.rapl.energy_j(*window), self.rapl.unavailable_reason, self.out_dir, probed)

    def abort(self) -> None:
        if self._fg_process is not None:
            self._fg_process.kill_tree()
        self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.env.live is not None:
            self.env.live.round_ended(self)
        try:
            if self.background is not None:
                self.background.stop()
        finally:
            if self.sampler is not None:
                self.sampler.stop()
            self.rapl.stop()


def measure_solo(job: JobConfig, env: Environment, out_dir: str | Path, timeout_s: float) -> Measurement:
    """One job alone on the device: the baseline its concurrent runs are compared with."""
    round_ = Round(job, None, env, out_dir, timeout_s, restart_delay_s=0.0)
    try:
        round_.start()
        round_.run_foreground()
        return round_.finish()
    finally:
        round_.abort()


def settle(seconds: float) -> None:
    """A cool-down between cases, only when the settings ask for one."""
    if seconds > 0:
        time.sleep(seconds)
