"""One round of a case, from monitors up to monitors down: Case -> Measurement.

The phases are separate methods so that pytest-benchmark times only the foreground job
(``run_foreground``) while the background and monitors are set up and torn down around it. A
built-in foreground starts beside the background and waits at a start gate, opened when the
background trains, so both jobs' startups overlap and neither trains alone at the window's start.
``abort`` is safe to call at any point and more than once: it is what teardown calls when a
phase raised. Every phase boundary is stamped in ``timeline`` (wall-clock seconds), which is
what the dead-time accounting reads.

A kept-running built-in background also trains alone, in its own process, for
``defaults.background_alone_s`` just before the foreground's run (once it has ended a run, warm,
and the foreground waits at its gate) and just after it (``timeline["bg_alone"]``): its progress in
the window is compared with that pace, minutes from it, instead of with a solo case measured
minutes to an hour away. On the device's hosts the pace of host-bound jobs moved by 10-15 % within
one session, more than sharing moved it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import Case, JobConfig
from pytest_gpu_pairs.experiment.schema import DEFAULTS
from pytest_gpu_pairs.monitor.cpu import RaplSampler
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.protocol import CYCLES_VAR, GATE_VAR, now
from pytest_gpu_pairs.record.measurement import JobOutcome, Measurement
from pytest_gpu_pairs.record.store import save_cpu_readings, save_samples
from pytest_gpu_pairs.run.background import BackgroundLoop
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec, build_spec
from pytest_gpu_pairs.run.proctree import deferred_signals

ALONE_SETTLE_S = 1.0  # after the foreground's exit, before its window alone: the process's teardown


class BackgroundNotReady(RuntimeError):
    pass


@dataclass(frozen=True)
class Supervision:
    """How a round's jobs are supervised (the settings' ``defaults``)."""

    timeout_s: float = DEFAULTS.timeout_s
    restart_delay_s: float = DEFAULTS.restart_delay_s
    ready_timeout_s: float = DEFAULTS.ready_timeout_s
    crash_loop_failures: int = DEFAULTS.crash_loop_failures
    crash_loop_window_s: float = DEFAULTS.crash_loop_window_s
    keep_background: bool = False
    background_alone_s: float = 0.0

    @classmethod
    def of(cls, case: Case) -> Supervision:
        return cls(case.timeout_s, case.restart_delay_s, case.ready_timeout_s, case.crash_loop_failures,
                   case.crash_loop_window_s, case.keep_background, case.background_alone_s)


class Round:
    """``job_env`` adds variables per role ("fg", "bg"), e.g. an MPS client's; ``probe`` is read once
    the foreground is done and before the background stops, while the sharing mechanism is live."""

    def __init__(self, fg: JobConfig, bg: Optional[JobConfig], env: Environment, out_dir: str | Path,
                 supervision: Supervision = Supervision(), job_env: Optional[dict[str, dict[str, str]]] = None,
                 probe: Optional[Callable[[], dict[str, Any]]] = None):
        self.fg_job, self.bg_job, self.env = fg, bg, env
        self.out_dir, self.supervision = Path(out_dir), supervision
        self.job_env, self.probe = job_env or {}, probe
        self.timeline: dict[str, Any] = {}
        self.fg_stopped_because: Optional[str] = None
        self.roles = PidRoles()
        for pgid, role in env.fixed_roles.items():
            self.roles.register(pgid, role)
        self.sampler: Optional[Sampler] = None
        self.rapl = RaplSampler(clock=now)
        self.background: Optional[BackgroundLoop] = None
        self.fg_outcome: Optional[JobOutcome] = None
        self._fg_process: Optional[JobProcess] = None
        self._gate: Optional[Path] = None
        self._closed = False

    @property
    def mode(self) -> str:
        return "solo" if self.bg_job is None else "concurrent"

    def _spec(self, job: JobConfig, role: str):
        return build_spec(job, role, self.env.device, self.env.scale, self.supervision.timeout_s,
                          {**self.env.extra_env, **self.job_env.get(role, {})}, self.env.job_cpus(role, job.is_builtin))

    def _background_spec(self, job: JobConfig, role: str) -> JobSpec:
        """A background's job; kept running (a built-in trains its run again in its process)
        where the case asks, so that no restart falls inside the foreground's run."""
        spec = self._spec(job, role)
        if self.supervision.keep_background and job.is_builtin:
            spec.env[CYCLES_VAR] = "1"
        return spec

    def _stamp(self, name: str, t: Optional[float] = None) -> None:
        self.timeline[name] = now() if t is None else t

    def start(self) -> None:
        """Monitors up, then the background loop, returning as soon as the background is training
        (no fixed sleep); ``BackgroundNotReady`` after ``ready_timeout_s`` or a crash loop."""
        self._stamp("round_start_t")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.env.live is not None:
            self.env.live.round_started(self)
        if self.env.gpu is not None and self.env.device == "cuda":
            self.sampler = Sampler(self.env.gpu, self.env.sample_hz, self.roles).start()
        self.rapl.start()
        if self.bg_job is None:
            return
        sup = self.supervision
        self._stamp("bg_start_t")
        self.background = BackgroundLoop(self._background_spec(self.bg_job, "bg"), self.out_dir, sup.restart_delay_s,
                                         sup.crash_loop_failures, sup.crash_loop_window_s,
                                         on_start=lambda job: self.roles.register(job.pid, "bg", job.tag)).start()
        if self.fg_job.is_builtin:
            self._start_foreground(gate=self.out_dir / "fg.start-gate")
        ready = self.background.wait_ready(sup.ready_timeout_s)
        self._stamp("bg_ready_t", self.background.ready_t)
        if not ready:
            raise BackgroundNotReady(self.background.not_ready_reason(sup.ready_timeout_s))
        if self._alone_windows() and self._background_warm_and_foreground_set_up():
            self._background_alone()
        if self._gate is not None:
            self._gate.touch()
            self._stamp("fg_go_t")

    def _alone_windows(self) -> bool:
        sup = self.supervision
        return sup.keep_background and sup.background_alone_s > 0 and self.bg_job is not None and self.bg_job.is_builtin

    def _background_warm_and_foreground_set_up(self) -> bool:
        """Wait until the background has ended its first run in its process (its start-up and
        autotuning behind it) and a gated foreground has built its model and data; False if that
        does not come within ``ready_timeout_s`` (the window before is then left out)."""
        deadline = now() + self.supervision.ready_timeout_s
        while now() < deadline and self.background is not None and self.background.failure is None:
            gated = self._fg_process is None or self._gate is None or self._fg_process.progress().setup_t is not None
            if gated and self.background.runs_ended_in_process() >= 1:
                return True
            time.sleep(0.1)
        return False

    def _background_alone(self) -> None:
        start = now()
        time.sleep(self.supervision.background_alone_s)
        self.timeline.setdefault("bg_alone", []).append([start, now()])

    def _start_foreground(self, gate: Optional[Path] = None) -> JobProcess:
        """Start the foreground job; a built-in one held at ``gate`` (see ``wait_for_start_gate``)."""
        spec = self._spec(self.fg_job, "fg")
        if gate is not None:
            gate.unlink(missing_ok=True)
            spec.env[GATE_VAR] = str(gate)
        self._gate = gate
        process = self._fg_process = JobProcess(spec, self.out_dir / "fg.log", self.out_dir / "fg.progress.jsonl").start()
        self._stamp("fg_start_t", process.start_t)
        if process.pid is not None:
            self.roles.register(process.pid, "fg", process.tag)
        return process

    def run_foreground(self) -> JobOutcome:
        """The foreground job under the load (``fg_go_t``: when it may train); stopped early if the
        background loop fails (a crash-looping background makes the rest of its run worthless)."""
        process = self._fg_process
        if process is None:
            process = self._start_foreground()
            self._stamp("fg_go_t", process.start_t)
        process.wait(on_tick=self._watch_background, tick_s=0.2)
        outcome = self.fg_outcome = process.outcome()
        self._stamp("fg_end_t", outcome.end_t)
        return outcome

    def _watch_background(self) -> None:
        if self.background is not None and self.background.failure and self.fg_stopped_because is None:
            self.fg_stopped_because = f"foreground stopped: {self.background.failure}"
            if self._fg_process is not None:
                self._fg_process.stop()

    def finish(self) -> Measurement:
        """Stop the background and monitors, save the samples, and hand back the round's facts."""
        probed = self.probe() if self.probe is not None else {}
        if self._alone_windows() and self.background is not None and self.background.failure is None \
                and self.fg_outcome is not None and not self.fg_outcome.failed:
            time.sleep(ALONE_SETTLE_S)
            self._background_alone()
        self._close()
        if self.fg_outcome is None:
            raise RuntimeError("a round is finished after its foreground ran")
        window = self.fg_outcome.training_window
        samples = self.sampler.samples if self.sampler else []
        if samples:
            save_samples(samples, self.out_dir)
        if self.rapl.readings:
            save_cpu_readings(self.rapl.readings, self.out_dir)
        self._stamp("round_end_t")
        background = self.background.snapshot() if self.background is not None else None
        return Measurement(self.mode, self.fg_outcome, window, samples, background,
                           self.rapl.energy_j(*window), self.rapl.unavailable_reason, self.out_dir, probed,
                           dict(self.timeline), self.fg_stopped_because)

    def abort(self) -> None:
        with deferred_signals():
            if self._fg_process is not None:
                self._fg_process.kill_tree()
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.env.live is not None:
            self.env.live.round_ended(self)
        with deferred_signals():
            try:
                if self.background is not None:
                    self.background.stop()
            finally:
                if self.sampler is not None:
                    self.sampler.stop()
                self.rapl.stop()


def measure_solo(job: JobConfig, env: Environment, out_dir: str | Path, timeout_s: float) -> Measurement:
    """One job alone on the device: the baseline its concurrent runs are compared with."""
    round_ = Round(job, None, env, out_dir, Supervision(timeout_s=timeout_s, restart_delay_s=0.0))
    try:
        round_.start()
        round_.run_foreground()
        return round_.finish()
    finally:
        round_.abort()


def cool_down(seconds: float, device_released_t: Optional[float], clock=now, sleep=time.sleep) -> float:
    """Wait until the device has been free of our jobs for ``seconds`` (the settings'
    ``cool_down_s``; 0 by default: no fixed sleep between cases). Returns the seconds slept."""
    if seconds <= 0 or device_released_t is None:
        return 0.0
    remaining = device_released_t + seconds - clock()
    if remaining > 0:
        sleep(remaining)
    return max(0.0, remaining)
