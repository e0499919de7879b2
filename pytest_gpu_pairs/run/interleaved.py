"""Interleaved rounds: both jobs started once and kept alive, switched between phases with
SIGSTOP/SIGCONT (no cooperation from the job needed), so every round measures each job alone and
the pair within seconds of each other and drift, clocks and cold starts fall on both sides of
every ratio.

A case: start both jobs -> warm-up (both report steps, then ``warmup_s`` more, all excluded) ->
rounds of three phases, the two solo phases in alternating order (fg, bg, pair / bg, fg, pair),
each phase ``settle_s`` of settling then ``phase_s`` measured -> more rounds until the stopping
rule is satisfied -> closing solo phases, so the last pair phase is bracketed like the others ->
both jobs resumed and killed. Every way out ends both process trees.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.experiment.cases import Case, JobConfig
from pytest_gpu_pairs.monitor.cpu import RaplSampler
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.protocol import STEADY_STATE_VAR, Progress
from pytest_gpu_pairs.record.measurement import InterleavedMeasurement, Phase, PhaseRound
from pytest_gpu_pairs.record.phases import figure_rounds
from pytest_gpu_pairs.record.stats import StoppingRule, bracketed_interval
from pytest_gpu_pairs.record.store import save_cpu_readings, save_samples
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.jobs import JobProcess, build_spec
from pytest_gpu_pairs.run.proctree import deferred_signals

LONG_EPOCHS = 100000  # a built-in job runs until the harness ends it, never to its own end mid-case
POLL_S = 0.1
REPORTS_PER_PHASE = 6  # step reports of the slower reporter inside a measured phase, at least
STEPS_PER_SETTLE = 2  # steps of the slower job that settling lasts, at least (its GPU queue drains)


class InterleavedFailure(RuntimeError):
    """A job ended or never trained; the message is the case's failure."""


def long_running(job: JobConfig) -> JobConfig:
    """A built-in job told to train far longer than any case lasts; a command workload as given."""
    return job.with_hyperparameters(epochs=LONG_EPOCHS) if job.is_builtin else job


def phase_lengths(progresses: Sequence[Progress], since: float, until: float, phase_s: float,
                  settle_s: float) -> tuple[float, float]:
    """Measured and settling seconds per phase, from the jobs' cadence in the warm-up: short
    phases keep a round's solo and pair phases within seconds of each other, so the slow drift of
    a host-bound job falls on both sides of its ratio; but a phase must hold enough step reports
    of a job that reports rarely (then it lasts a whole multiple of ``phase_s``, so the same jobs
    get the same phases in every session and per-phase energies compare), and settling must
    outlast a step of a slow job."""
    gaps, step_times = [], []
    for progress in progresses:
        inside = [(t, s) for t, s in progress.steps if since <= t <= until]
        if len(inside) >= 2:
            gaps.append(statistics.median(b[0] - a[0] for a, b in zip(inside, inside[1:])))
        if len(inside) >= 2 and inside[-1][1] > inside[0][1]:
            step_times.append((inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1]))
    needed = max([REPORTS_PER_PHASE * g for g in gaps], default=0.0)
    phase = phase_s * max(1, math.ceil(needed / phase_s - 1e-9))
    settle = max([settle_s] + [STEPS_PER_SETTLE * t for t in step_times])
    return phase, settle


class InterleavedPair:
    def __init__(self, case: Case, env: Environment, out_dir: str | Path, rule: StoppingRule,
                 job_env: Optional[dict[str, dict[str, str]]] = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.case, self.env, self.out_dir, self.rule = case, env, Path(out_dir), rule
        self.job_env, self.sleep = job_env or {}, sleep
        self.roles = PidRoles()
        for pgid, role in env.fixed_roles.items():
            self.roles.register(pgid, role)
        self.jobs: dict[str, JobProcess] = {}
        self.sampler: Optional[Sampler] = None
        self.rapl = RaplSampler()
        self.rounds: list[PhaseRound] = []
        self.started_t = self.warm_t = 0.0
        self.phase_s, self.settle_s = case.phase_s, case.settle_s
        self.stop_reason: Optional[str] = None
        self.failure: Optional[str] = None
        self._closed = False

    def run(self) -> InterleavedMeasurement:
        """The whole measurement; what pytest-benchmark times for an interleaved case."""
        try:
            self._start()
            self._warm_up()
            self._measure_rounds()
        except InterleavedFailure as exc:
            self.failure = str(exc)
        finally:
            self.close()
        return self.measurement()

    def _start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.started_t = time.time()
        if self.env.gpu is not None and self.env.device == "cuda":
            self.sampler = Sampler(self.env.gpu, self.env.sample_hz, self.roles).start()
        self.rapl.start()
        for role, job in (("fg", self.case.fg), ("bg", self.case.bg)):
            spec = build_spec(long_running(job), role, self.env.device, self.env.scale, self.case.timeout_s,
                              {**self.env.extra_env, **self.job_env.get(role, {}), STEADY_STATE_VAR: "1"},
                              self.env.job_cpus(role, job.is_builtin))
            process = JobProcess(spec, self.out_dir / f"{role}.log", self.out_dir / f"{role}.progress.jsonl").start()
            self.jobs[role] = process
            if process.start_error:
                raise InterleavedFailure(f"{role} {job.model} could not start: {process.start_error}")
            self.roles.register(process.pid, role, process.tag)

    def _progress(self, role: str) -> Progress:
        return self.jobs[role].progress()  # the protocol's, or read from the log (progress_pattern)

    def _check_alive(self) -> None:
        for role, process in self.jobs.items():
            if process.poll() is not None:
                outcome = process.outcome()
                why = outcome.oom_message and f"ran out of memory ({outcome.oom_message})"
                raise InterleavedFailure(f"{role} {process.spec.model} ended during the measurement "
                                         f"({why or f'exit code {process.poll()}'}); log: {process.log_path}")

    def _warm_up(self) -> None:
        """Both jobs train, then ``warmup_s`` more: startup, autotuning and first steps excluded."""
        deadline = self.started_t + self.case.ready_timeout_s
        while not all(self._progress(role).steps for role in self.jobs):
            self._check_alive()
            if time.time() > deadline:
                waiting = [r for r in self.jobs if not self._progress(r).steps]
                raise InterleavedFailure(f"{', '.join(waiting)} reported no training step within "
                                         f"{self.case.ready_timeout_s:g} s (ready_timeout_s)")
            self.sleep(POLL_S)
        trained_t = time.time()
        for process in self.jobs.values():
            process.pin_tree()
        self._hold(self.case.warmup_s)
        self.warm_t = time.time()
        self.phase_s, self.settle_s = phase_lengths([self._progress(role) for role in self.jobs], trained_t,
                                                    self.warm_t, self.case.phase_s, self.case.settle_s)

    def _hold(self, seconds: float) -> None:
        end = time.time() + seconds
        while (left := end - time.time()) > 0:
            self._check_alive()
            self.sleep(min(POLL_S, left))

    def _phase(self, name: str) -> Phase:
        running = ("fg", "bg") if name == "pair" else (name,)
        for role, process in self.jobs.items():
            (process.resume if role in running else process.pause)()
        switched = time.time()
        self._hold(self.settle_s)
        start = time.time()
        self._hold(self.phase_s)
        return Phase(name, switched, start, time.time())

    def _measure_rounds(self) -> None:
        """Solo phases, then the pair phase, round after round; the stopping rule is asked once a
        round's solo phases have closed the bracket around the previous pair phase, so a case ends
        on solo phases and every pair phase lies between solo phases of both jobs."""
        round_s = 0.0
        while True:
            index = len(self.rounds)
            solo_order = ("fg", "bg") if index % 2 == 0 else ("bg", "fg")
            round_start = time.time()
            solos = tuple(self._phase(name) for name in solo_order)
            self.rounds.append(PhaseRound(index + 1, solos))
            if index and self._enough(round_s):
                return
            self.rounds[-1] = PhaseRound(index + 1, solos + (self._phase("pair"),))
            round_s = time.time() - round_start

    def _enough(self, round_s: float) -> bool:
        efficiencies = [r["concurrency_efficiency"] for r in figure_rounds(self.snapshot(), self.env.idle_power_w)]
        stop, why = self.rule.verdict(efficiencies, time.time() - self.started_t, round_s, bracketed_interval)
        self.stop_reason = why
        return stop

    def snapshot(self) -> InterleavedMeasurement:
        samples = tuple(self.sampler.samples) if self.sampler else ()
        return InterleavedMeasurement(self._progress("fg"), self._progress("bg"), tuple(self.rounds), samples,
                                      (self.started_t, self.warm_t or time.time()), self.rule, self.stop_reason,
                                      self.failure, out_dir=self.out_dir, phase_s=self.phase_s,
                                      settle_s=self.settle_s)

    def measurement(self) -> InterleavedMeasurement:
        oom = any(process.outcome().oom for process in self.jobs.values())
        return replace(self.snapshot(), oom=oom, cpu_readings=tuple(self.rapl.readings))

    def close(self) -> None:
        """Both jobs resumed and their trees killed, monitors stopped, samples saved; safe to
        call at any point and more than once."""
        if self._closed:
            return
        self._closed = True
        with deferred_signals():
            try:
                for process in self.jobs.values():
                    process.resume()
                    process.stop()
            finally:
                if self.sampler is not None:
                    self.sampler.stop()
                    if self.sampler.samples:
                        save_samples(self.sampler.samples, self.out_dir)
                self.rapl.stop()
                if self.rapl.readings:
                    save_cpu_readings(self.rapl.readings, self.out_dir)
