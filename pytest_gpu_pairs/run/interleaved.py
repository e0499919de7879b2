"""Interleaved rounds: both jobs started once and kept alive, switched between phases with
SIGSTOP/SIGCONT (no cooperation from the job needed), so every round measures each job alone and
the pair within seconds of each other and drift, clocks and cold starts fall on both sides of
every ratio.

A case: start both jobs -> warm-up (both report steps, then ``warmup_s`` more, all excluded) ->
rounds of three phases, the two solo phases in alternating order (fg, bg, pair / bg, fg, pair),
each phase ``settle_s`` of settling then ``phase_s`` measured -> more rounds until the stopping
rule is satisfied -> closing solo phases, so the last pair phase is bracketed like the others ->
both jobs resumed and killed. Every way out ends both process trees.

Most training scripts end. A job that exits 0 during the case finished its run: it is started
again, the rounds after its last step report are discarded (its end of training: a final
evaluation, a checkpoint), the other job waits paused while it starts, and both warm up again
before rounds go on in a new segment. A job that fails is the case's failure, and so is a run too
short to hold its warm-up and a few rounds: the message says how long a run must be.
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
from pytest_gpu_pairs.protocol import STEADY_STATE_VAR, Progress, now
from pytest_gpu_pairs.record.measurement import InterleavedMeasurement, Phase, PhaseRound, Restart
from pytest_gpu_pairs.record.phases import complete_rounds
from pytest_gpu_pairs.record.stats import StoppingRule, bracketed_interval
from pytest_gpu_pairs.record.store import save_cpu_readings, save_samples
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.jobs import JobProcess, build_spec
from pytest_gpu_pairs.run.proctree import deferred_signals

LONG_EPOCHS = 100000  # a built-in job runs until the harness ends it, never to its own end mid-case
POLL_S = 0.1
REPORTS_PER_PHASE = 4  # step reports of the slower reporter inside a measured phase, at least
STEPS_PER_SETTLE = 2  # steps of the slower job that settling lasts, at least (its GPU queue drains)
MIN_ROUNDS_PER_RUN = 3  # rounds a job's run must hold after its warm-up, or the case cannot be measured
MAX_PHASE_GROWTH = 16  # phases lengthen to at most this many times the settings' phase_s
ROLES = ("fg", "bg")


class InterleavedFailure(RuntimeError):
    """A job failed or never trained; the message is the case's failure."""


class CapReached(Exception):
    """The case's time cap passed while it held a phase or a warm-up: it stops there."""


class JobEnded(Exception):
    """A job exited 0 on its own: it finished its run and is started again."""

    def __init__(self, role: str):
        super().__init__(role)
        self.role = role


def long_running(job: JobConfig) -> JobConfig:
    """A built-in job told to train far longer than any case lasts; a command workload as given."""
    return job.with_hyperparameters(epochs=LONG_EPOCHS) if job.is_builtin else job


def report_gaps(progresses: Sequence[Progress], since: float, until: float) -> list[Optional[float]]:
    """Each job's median time between step reports inside [since, until]; None with fewer than two."""
    gaps: list[Optional[float]] = []
    for progress in progresses:
        inside = [t for t, _ in progress.steps if since <= t <= until]
        gaps.append(statistics.median(b - a for a, b in zip(inside, inside[1:])) if len(inside) >= 2 else None)
    return gaps


def phase_lengths(progresses: Sequence[Progress], since: float, until: float, phase_s: float,
                  settle_s: float) -> tuple[float, float]:
    """Measured and settling seconds per phase, from the jobs' cadence in the warm-up: short
    phases keep a round's solo and pair phases within seconds of each other, so the slow drift of
    a host-bound job falls on both sides of its ratio; but a phase must hold enough step reports
    of a job that reports rarely (then it lasts a whole multiple of ``phase_s``, so the same jobs
    get the same phases in every session), and settling must outlast a step of a slow job. A step
    lasts at most the time between two reports (each ends a step): a job whose progress counts
    epochs (a Hugging Face ``'epoch': 0.5``) settles for its steps, not for two epochs."""
    step_times = []
    for progress, gap in zip(progresses, report_gaps(progresses, since, until)):
        inside = [(t, s) for t, s in progress.steps if since <= t <= until]
        if len(inside) >= 2 and inside[-1][1] > inside[0][1]:
            per_unit = (inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1])
            step_times.append(per_unit if gap is None else min(per_unit, gap))
    gaps = [g for g in report_gaps(progresses, since, until) if g is not None]
    needed = max([REPORTS_PER_PHASE * g for g in gaps], default=0.0)
    phase = phase_s * max(1, math.ceil(needed / phase_s - 1e-9))
    settle = max([settle_s] + [STEPS_PER_SETTLE * t for t in step_times])
    return phase, settle


def run_files(out_dir: Path, role: str, run: int) -> tuple[Path, Path]:
    """A job's log and progress file; its first run keeps the plain names the other tools read."""
    stem = role if run == 1 else f"{role}.run{run}"
    return out_dir / f"{stem}.log", out_dir / f"{stem}.progress.jsonl"


class InterleavedPair:
    def __init__(self, case: Case, env: Environment, out_dir: str | Path, rule: StoppingRule,
                 job_env: Optional[dict[str, dict[str, str]]] = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.case, self.env, self.out_dir, self.rule = case, env, Path(out_dir), rule
        self.job_env, self.sleep = job_env or {}, sleep
        self.roles = PidRoles()
        for pgid, role in env.fixed_roles.items():
            self.roles.register(pgid, role)
        self.jobs: dict[str, JobProcess] = {}  # each role's running process
        self.runs: dict[str, list[JobProcess]] = {role: [] for role in ROLES}
        self._ended_progress: dict[str, list[Progress]] = {role: [] for role in ROLES}
        self.run_started_t: dict[str, float] = {}
        self.sampler: Optional[Sampler] = None
        self.rapl = RaplSampler(clock=now)
        self.rounds: list[PhaseRound] = []
        self.restarts: list[Restart] = []
        self.segment = 0
        self.round_s = 0.0
        self.started_t = self.warm_t = 0.0
        self.phase_s, self.settle_s = case.phase_s, case.settle_s
        self.report_gap_s: dict[str, float] = {}
        self._phases_settled = False  # a round was complete: the phase lengths stay
        self.stop_reason: Optional[str] = None
        self.failure: Optional[str] = None
        self._closed = False

    def run(self) -> InterleavedMeasurement:
        """The whole measurement, started, warmed up, measured and closed."""
        try:
            self._start()
            self._warm_up()
            self._measure_rounds()
        except InterleavedFailure as exc:
            self.failure = str(exc)
        except CapReached:
            rounds = len(complete_rounds(self.snapshot(), self.env.idle_power_w))
            self.stop_reason = f"time cap {self.rule.max_seconds:g} s reached after {rounds} complete round(s)"
        finally:
            self.close()
        return self.measurement()

    def _start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.started_t = now()
        if self.env.gpu is not None and self.env.device == "cuda":
            self.sampler = Sampler(self.env.gpu, self.env.sample_hz, self.roles).start()
        self.rapl.start()
        for role in ROLES:
            self._start_job(role)

    def _job(self, role: str) -> JobConfig:
        return self.case.fg if role == "fg" else self.case.bg

    def _start_job(self, role: str) -> None:
        job = self._job(role)
        spec = build_spec(long_running(job), role, self.env.device, self.env.scale, self.case.timeout_s,
                          {**self.env.extra_env, **self.job_env.get(role, {}), STEADY_STATE_VAR: "1"},
                          self.env.job_cpus(role, job.is_builtin))
        log, progress = run_files(self.out_dir, role, len(self.runs[role]) + 1)
        process = JobProcess(spec, log, progress).start()
        self.jobs[role] = process
        self.runs[role].append(process)
        self.run_started_t[role] = process.start_t
        if process.start_error:
            raise InterleavedFailure(f"{role} {job.model} could not start: {process.start_error}")
        self.roles.register(process.pid, role, process.tag)

    def _progress(self, role: str) -> Progress:
        """Every run of the job so far as one count: the ended runs' (read once) and the running one's."""
        return Progress.chained(self._ended_progress[role] + [self.jobs[role].progress()])

    def _current_steps(self, role: str) -> list[tuple[float, int]]:
        return self.jobs[role].progress().steps  # the protocol's, or read from the log (progress_pattern)

    def _check_alive(self) -> None:
        """A job that exited 0 finished its run (``JobEnded``); any other end fails the case."""
        for role, process in self.jobs.items():
            if process.poll() is None:
                continue
            outcome = process.outcome()
            if outcome.completed:
                raise JobEnded(role)
            why = outcome.oom_message and f"ran out of memory ({outcome.oom_message})"
            if outcome.trained_nothing:
                why = "exited with code 0 without training anything: no step report and no output"
            raise InterleavedFailure(f"{role} {process.spec.model} ended during the measurement "
                                     f"({why or f'exit code {process.poll()}'}); log: {process.log_path}")

    def _await_first_steps(self, roles: Sequence[str], since: float) -> None:
        """Until each of ``roles`` has reported a training step in its current run."""
        deadline = since + self.case.ready_timeout_s
        while waiting := [role for role in roles if not self._current_steps(role)]:
            self._check_alive()
            if now() > deadline:
                raise InterleavedFailure(f"{', '.join(waiting)} reported no training step within "
                                         f"{self.case.ready_timeout_s:g} s (ready_timeout_s)"
                                         + "".join(self._missed(role) for role in waiting))
            self.sleep(POLL_S)

    def _warm_up(self) -> None:
        """Both jobs train, then ``warmup_s`` more: startup, autotuning and first steps excluded."""
        try:
            self._await_first_steps(ROLES, self.started_t)
            trained_t = now()
            for process in self.jobs.values():
                process.pin_tree()
            self._hold(self.case.warmup_s)
        except JobEnded as ended:
            raise InterleavedFailure(self._too_short(ended.role)) from None
        self.warm_t = now()
        progresses = [self._progress(role) for role in ROLES]
        self.phase_s, self.settle_s = phase_lengths(progresses, trained_t, self.warm_t, self.case.phase_s,
                                                    self.case.settle_s)
        gaps = report_gaps(progresses, trained_t, self.warm_t)
        self.report_gap_s = {role: gap for role, gap in zip(ROLES, gaps) if gap is not None}

    def _hold(self, seconds: float) -> None:
        """``seconds`` with both jobs watched; the case's time cap ends it there (``CapReached``),
        however long a phase or its settling is."""
        cap = self.started_t + self.rule.max_seconds
        end = min(now() + seconds, cap)
        while (left := end - now()) > 0:
            self._check_alive()
            self.sleep(min(POLL_S, left))
        if now() >= cap:
            raise CapReached()

    def _phase(self, name: str) -> Phase:
        running = ROLES if name == "pair" else (name,)
        for role, process in self.jobs.items():
            (process.resume if role in running else process.pause)()
        switched = now()
        self._hold(self.settle_s)
        start = now()
        self._hold(self.phase_s)
        return Phase(name, switched, start, now())

    def _measure_rounds(self) -> None:
        """Rounds until the stopping rule is met; a job that finished its run is started again."""
        while True:
            try:
                if self._one_round():
                    return
            except JobEnded as ended:
                self._restart(ended.role)

    def _one_round(self) -> bool:
        """Solo phases, then the pair phase; True once enough is measured. The stopping rule is
        asked once a round's solo phases have closed the bracket around the previous pair phase,
        so a case ends on solo phases and every pair phase lies between solo phases of both jobs."""
        index = len(self.rounds)
        solo_order = ROLES if index % 2 == 0 else ROLES[::-1]
        round_start = now()
        solos = tuple(self._phase(name) for name in solo_order)
        self.rounds.append(PhaseRound(index + 1, solos, self.segment))
        if index and self._enough():
            return True
        self.rounds[-1] = PhaseRound(index + 1, solos + (self._phase("pair"),), self.segment)
        self.round_s = now() - round_start
        self._lengthen_phases_if_too_short(self.rounds[-1])
        return False

    def _lengthen_phases_if_too_short(self, last: PhaseRound) -> None:
        """Until a round is complete, a job that reported fewer than two steps in a phase of its own
        steps more slowly than its warm-up cadence promised (a loaded host, a slower stretch of its
        data): the phases and the settling double, up to ``MAX_PHASE_GROWTH`` times the settings'.
        Once a round is complete the lengths stay, so that a case's rounds all have the same phases."""
        if self._phases_settled or self.phase_s * 2 > MAX_PHASE_GROWTH * self.case.phase_s:
            return
        if complete_rounds(self.snapshot(), self.env.idle_power_w):
            self._phases_settled = True
        elif any(_reports_in(self._progress(role), phase) < 2 for phase in last.phases
                 for role in (ROLES if phase.name == "pair" else (phase.name,))):
            self.phase_s, self.settle_s = self.phase_s * 2, self.settle_s * 2

    def _restart(self, role: str) -> None:
        """The ended run's tail discarded, a new run started while the other job waits paused, and
        both warmed up again before the next segment's rounds. Two scripts may end together: one
        that ends while the other is being restarted is restarted too, and both warm up again."""
        renewed: list[str] = []
        pending: Optional[str] = role
        while pending is not None:
            since = self._replace_run(pending)
            if pending not in renewed:
                renewed.append(pending)
            try:
                self._warm_up_again(renewed, since)
                pending = None
            except JobEnded as ended:
                pending = ended.role

    def _replace_run(self, role: str) -> float:
        """Stop the ended run, keep what it measured, start the next one; when it started."""
        ended = self.jobs[role]
        ended.stop()  # whatever its tree left behind
        progress = ended.progress()
        if self._rounds_in_run(role, progress.last_t) < MIN_ROUNDS_PER_RUN:
            raise InterleavedFailure(self._too_short(role))
        discarded = self._discard_after(progress.last_t)
        self._ended_progress[role].append(progress)
        for other in ROLES:
            if other != role:
                self.jobs[other].pause()
        restart_t = now()
        self._start_job(role)
        self.restarts.append(Restart(role, len(self.runs[role]) - 1, ended.end_t, progress.last_t,
                                     _trained_s(progress), discarded, restart_t))
        self.segment += 1
        return restart_t

    def _warm_up_again(self, renewed: Sequence[str], since: float) -> None:
        """The new runs train (the others wait paused meanwhile), then ``warmup_s`` more of both."""
        waiting = [role for role in ROLES if role not in renewed]
        for role in renewed:  # a run renewed before this one was paused while this one started
            self.jobs[role].resume()
        try:
            self._await_first_steps(tuple(renewed), since)
        finally:
            for role in waiting:
                self.jobs[role].resume()
        for role in renewed:
            self.jobs[role].pin_tree()
        self._hold(self.case.warmup_s)

    def _rounds_in_run(self, role: str, last_step_t: Optional[float]) -> int:
        """Whole rounds measured while this run of ``role`` trained, after its warm-up."""
        started = self.run_started_t[role]
        return sum(1 for r in self.rounds if r.phase("pair") and r.start >= started
                   and (last_step_t is None or r.end <= last_step_t))

    def _discard_after(self, last_step_t: Optional[float]) -> int:
        """Drop the rounds of this segment that end after the ended job's last step report."""
        keep = [r for r in self.rounds if r.segment != self.segment or (last_step_t is not None and r.end <= last_step_t)]
        discarded = len(self.rounds) - len(keep)
        self.rounds = [replace(r, index=i + 1) for i, r in enumerate(keep)]
        return discarded

    def _too_short(self, role: str) -> str:
        process = self.jobs[role]
        trained = _trained_s(process.progress())
        round_s = self.round_s or 3 * (self.phase_s + self.settle_s)
        needed = self.case.warmup_s + MIN_ROUNDS_PER_RUN * round_s
        return (f"{role} {process.spec.model} finished its run (exit code 0) after {trained:.1f} s of training, too "
                f"short to measure: every run must train through the warm-up ({self.case.warmup_s:g} s) and "
                f"{MIN_ROUNDS_PER_RUN} rounds (about {round_s:.1f} s each here), about {needed:.0f} s; give each run "
                f"more work (more epochs or iterations) or set a shorter defaults.warmup_s{self._missed(role)}; "
                f"log: {process.log_path}")

    def _missed(self, role: str) -> str:
        """Where the job's log had lines its progress_pattern read no step from: that, with a line it missed."""
        no_match = self.jobs[role].progress().no_match
        return f"; {role}'s log had lines but {no_match}" if no_match else ""

    def _enough(self) -> bool:
        efficiencies = [r["concurrency_efficiency"] for r in complete_rounds(self.snapshot(), self.env.idle_power_w)]
        stop, why = self.rule.verdict(efficiencies, now() - self.started_t, self.round_s, bracketed_interval)
        self.stop_reason = why
        return stop

    def snapshot(self) -> InterleavedMeasurement:
        samples = tuple(self.sampler.samples) if self.sampler else ()
        return InterleavedMeasurement(self._progress("fg"), self._progress("bg"), tuple(self.rounds), samples,
                                      (self.started_t, self.warm_t or now()), self.rule, self.stop_reason,
                                      self.failure, out_dir=self.out_dir, phase_s=self.phase_s,
                                      settle_s=self.settle_s, report_gap_s=dict(self.report_gap_s),
                                      restarts=tuple(self.restarts))

    def measurement(self) -> InterleavedMeasurement:
        oom = any(process.outcome().oom for runs in self.runs.values() for process in runs)
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


def _reports_in(progress: Progress, phase: Phase) -> int:
    return sum(1 for t, _ in progress.steps if phase.start <= t <= phase.end)


def _trained_s(progress: Progress) -> float:
    if len(progress.steps) < 2:
        return 0.0
    return progress.steps[-1][0] - progress.steps[0][0]
