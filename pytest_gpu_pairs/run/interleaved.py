"""Interleaved rounds: both jobs started once and kept alive, switched between phases with
SIGSTOP/SIGCONT (no cooperation from the job needed), so every round measures each job alone and
the pair within seconds of each other and drift, clocks and cold starts fall on both sides of
every ratio.

A case: start both jobs -> warm-up (both report steps, then ``warmup_s`` more, all excluded) ->
rounds of three phases, the two solo phases in alternating order (fg, bg, pair / bg, fg, pair),
each phase ``settle_s`` of settling then ``phase_s`` measured -> more rounds until the stopping
rule is satisfied -> closing solo phases, so the last pair phase is bracketed like the others ->
both jobs resumed and killed. Every way out ends both process trees.

A group of more jobs (``bg2``, ``bg3``, ...) is measured the same way: each job alone, the others
stopped, in an order reversed from round to round, then all of them together in the ``pair`` phase.

Most training scripts end. A job that exits 0 during the case finished its run: it is started
again, the rounds after its last step report are discarded (its end of training: a final
evaluation, a checkpoint), the other job waits paused while it starts, and both warm up again
before rounds go on in a new segment. A job that fails is the case's failure, and so is a run too
short to hold its warm-up and a few rounds: the message says how long a run must be.
"""
from __future__ import annotations

import bisect
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import Case, JobConfig
from pytest_gpu_pairs.monitor.cpu import RaplSampler
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.protocol import GATE_VAR, STEADY_STATE_VAR, Progress, now
from pytest_gpu_pairs.record.checks import PROGRESS_FIX
from pytest_gpu_pairs.record.measurement import InterleavedMeasurement, Phase, PhaseRound, Restart, StartInfo
from pytest_gpu_pairs.record.phases import BETWEEN_START_PRIOR, complete_rounds
from pytest_gpu_pairs.record.stats import BetweenStarts, StoppingRule, bracket_inflation, start_interval, t_quantile
from pytest_gpu_pairs.record.store import save_cpu_readings, save_samples
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.jobs import JobProcess, build_spec
from pytest_gpu_pairs.run.proctree import deferred_signals

LONG_EPOCHS = 100000  # a built-in job runs until the harness ends it, never to its own end mid-case
POLL_S = 0.1
REPORTS_PER_PHASE = 4  # step reports of the slower reporter inside a measured phase, at least
STEPS_PER_SETTLE = 2  # steps of the slower job that settling lasts, at least (its GPU queue drains)
MIN_ROUNDS_PER_RUN = 3  # rounds a job's run must hold after its warm-up, or the case cannot be measured
PACE_SLACK = 1.0  # a phase fits a job's pace when it holds the step reports wanted at that pace
STARTS_ON_GPU = 3  # independent starts of the pair a case spreads its rounds over on a GPU (settings: starts)
MIN_ROUNDS_PER_START = 6  # rounds each start but the last measures before the next one begins
MIN_WARMUP_S = 1.0  # a warm-up lasts at least this long after both jobs' first steps, at most warmup_s
STEADY_TOLERANCE = 0.10  # two consecutive warm-up windows whose rates differ by less: the job runs steadily
STEADY_WINDOW_S = 0.5  # a warm-up window, or four of the job's report gaps if longer
TOO_SHORT_MARGIN = 1.5  # a run is refused as too short only below this fraction of what it needed
STANDBY_ROLE = "standby"  # a later start's job, started with the first and waiting at its start gate
SWITCH_MARGIN_S = 1.0  # beginning a start also stops the last one's jobs and opens gates
STANDBY_WAIT_S = 30.0  # after the first start's warm-up, the longest its rounds wait for the later starts' start-up
UNREACHABLE_ROUNDS = 10**6  # rounds per start "needed" where no number of rounds reaches the target


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


def planned_starts(case: Case, device: str) -> int:
    """Independent starts of the pair the case spreads its rounds over: the settings' ``starts``, else
    ``STARTS_ON_GPU`` on a GPU (so the interval covers where the next start lands) and one on the
    CPU (whose few rounds only show that the pipeline works)."""
    if case.starts is not None:
        return case.starts
    return STARTS_ON_GPU if device == "cuda" else 1


def report_gaps(progresses: Sequence[Progress], since: float, until: float) -> list[Optional[float]]:
    """Each job's median time between step reports inside [since, until]; None with fewer than two."""
    gaps: list[Optional[float]] = []
    for progress in progresses:
        inside = [t for t, _ in progress.steps if since <= t <= until]
        gaps.append(statistics.median(b - a for a, b in zip(inside, inside[1:])) if len(inside) >= 2 else None)
    return gaps


def phase_lengths(progresses: Sequence[Progress], since: float, until: float, phase_s: float,
                  settle_s: float, queued: bool = True) -> tuple[float, float]:
    """Measured and settling seconds per phase, from the jobs' cadence in the warm-up: short
    phases keep a round's solo and pair phases within seconds of each other, so the slow drift of
    a host-bound job falls on both sides of its ratio; but a phase must hold enough step reports
    of a job that reports rarely (then it lasts a whole multiple of ``phase_s``, so the same jobs
    get the same phases in every session), and settling must outlast a step of a slow job. A step
    lasts at most the time between two reports (each ends a step): a job whose progress counts
    epochs (a Hugging Face ``'epoch': 0.5``) settles for its steps, not for two epochs.
    On a device that queues work (``queued``: a GPU) settling outlasts those steps; on the CPU a
    stopped job stops at once and a continued one runs again at once, so settling stays
    ``settle_s``, since a step that takes seconds there would otherwise spend a third of every
    round waiting."""
    step_times = []
    for progress, gap in zip(progresses, report_gaps(progresses, since, until)):
        inside = [(t, s) for t, s in progress.steps if since <= t <= until]
        if len(inside) >= 2 and inside[-1][1] > inside[0][1]:
            per_unit = (inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1])
            step_times.append(per_unit if gap is None else min(per_unit, gap))
    gaps = [g for g in report_gaps(progresses, since, until) if g is not None]
    needed = max([REPORTS_PER_PHASE * g for g in gaps], default=0.0)
    phase = phase_s * max(1, math.ceil(needed / phase_s - 1e-9))
    settle = max([settle_s] + [STEPS_PER_SETTLE * t for t in step_times if queued])
    return phase, settle


def is_steady(steps: Sequence[tuple[float, float]], now: float, window_s: float, tolerance: float) -> bool:
    """Whether a job's step rate has settled: its two latest windows of ``window_s`` each hold at
    least two step reports and their rates differ by at most ``tolerance`` (relative). A job still
    speeding up after its start (kernels loading, caches filling, autotuning) fails it; a job as
    noisy as a host-bound loop passes within a few windows."""
    earlier, latest = (_window_rate(steps, now - (k + 1) * window_s, now - k * window_s) for k in (1, 0))
    if earlier is None or latest is None or not earlier:
        return False
    return abs(latest - earlier) / earlier <= tolerance


def _window_rate(steps: Sequence[tuple[float, float]], start: float, end: float) -> Optional[float]:
    inside = [(t, n) for t, n in steps if start <= t <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0] or inside[-1][1] <= inside[0][1]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def steady_window(steps: Sequence[tuple[float, float]]) -> float:
    """A warm-up window: half a second, or four of the job's gaps between reports if longer."""
    gaps = sorted(b[0] - a[0] for a, b in zip(steps, steps[1:]))
    return max(STEADY_WINDOW_S, 4 * gaps[len(gaps) // 2]) if gaps else STEADY_WINDOW_S


def too_short(trained_s: float, needed_s: float) -> bool:
    """A run that ended with fewer rounds than a run must hold is refused only when it trained well
    short of what its warm-up and those rounds took here: a run about as long as needed (a loaded
    host stretched the rounds, the run ended mid-round) is kept and the job started again."""
    return trained_s * TOO_SHORT_MARGIN < needed_s


def rounds_for_target(values: Sequence[float], starts: int, precision: float, prior: Optional[BetweenStarts]) -> int:
    """Rounds per start that bring the 95 % interval over ``starts`` starts within ``precision`` of
    the mean, given one start's rounds (their variance, bracketed) and the prior between-start sd;
    ``UNREACHABLE_ROUNDS`` where the offsets alone keep it wider."""
    mean = statistics.fmean(values)
    if not mean or len(values) < 2:
        return UNREACHABLE_ROUNDS
    per_round = statistics.variance(values) * bracket_inflation(values) / mean**2
    between = (prior.sd**2 if prior is not None else 0.0) / starts
    t = t_quantile(0.975, (prior.df if prior is not None else 0.0) + starts - 1 + len(values))
    room = (precision / t) ** 2 - between
    if room <= 0:
        return UNREACHABLE_ROUNDS
    return max(1, math.ceil(per_round / (starts * room)))


def _pct(value: Optional[float]) -> str:
    return "none" if value is None else f"+-{value:.0%}"


def run_files(out_dir: Path, role: str, run: int) -> tuple[Path, Path]:
    """A job's log and progress file; its first run keeps the plain names the other tools read."""
    stem = role if run == 1 else f"{role}.run{run}"
    return out_dir / f"{stem}.log", out_dir / f"{stem}.progress.jsonl"


class InterleavedPair:
    def __init__(self, case: Case, env: Environment, out_dir: str | Path, rule: StoppingRule,
                 job_env: Optional[dict[str, dict[str, str]]] = None,
                 sleep: Callable[[float], None] = time.sleep, standby_allowed: bool = True,
                 probe: Optional[Callable[[], dict[str, Any]]] = None):
        """``probe``: what the sharing mechanism says while both jobs train (under MPS, its servers
        and clients), asked once after the first warm-up."""
        self.case, self.env, self.out_dir, self.rule = case, env, Path(out_dir), rule
        self.probe = probe
        self.sharing_probe: dict[str, Any] = {}
        self.job_roles = case.roles  # fg, bg, and a group's further backgrounds bg2, bg3, ...
        self.job_env, self.sleep = job_env or {}, sleep
        self.planned_starts = planned_starts(case, env.device)
        self.prior = BETWEEN_START_PRIOR if env.device == "cuda" else None
        self.standby: list[dict[str, JobProcess]] = []  # the later starts' jobs, waiting at their gates
        self.standby_allowed = standby_allowed
        self.starts: list[StartInfo] = []
        self.planned_rounds: Optional[int] = None  # rounds per start, planned once the first start shows its noise
        self.roles = PidRoles()
        for pgid, role in env.fixed_roles.items():
            self.roles.register(pgid, role)
        self.jobs: dict[str, JobProcess] = {}  # each role's running process
        self.runs: dict[str, list[JobProcess]] = {role: [] for role in self.job_roles}
        self._ended_progress: dict[str, list[Progress]] = {role: [] for role in self.job_roles}
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
        self._phase_now: Optional[str] = None  # what runs now, for the live line

    def run(self) -> InterleavedMeasurement:
        """The whole measurement, started, warmed up, measured and closed."""
        try:
            self._tell_live("round_started")
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
        for role in self.job_roles:
            self._start_job(role)
        self._start_standby()

    def _start_standby(self) -> None:
        """The later starts' jobs, started with the first start's and held at their start gates: each
        later start then costs its first step and warm-up, not a second start-up. They start up on
        spare CPUs of their role where the share has them (else on the role's own: either way before
        any round, which waits for their start-up), and take the role's own CPUs when their start
        begins. Only built-ins wait at a gate; on an emulated card their memory would not be the card's."""
        if not self.standby_allowed or self.env.device != "cuda":
            return
        if not all(self._job(role).is_builtin for role in self.job_roles):
            return
        for index in range(1, self.planned_starts):
            self.standby.append({role: self._standby_job(role, index, self.env.cpus.spare_for(role, index)
                                                         or self.env.job_cpus(role, True))
                                 for role in self.job_roles})

    def _standby_job(self, role: str, index: int, cpus: Optional[frozenset[int]]) -> JobProcess:
        job = self._job(role)
        gate = self.out_dir / f"{role}.start{index + 1}.gate"
        gate.unlink(missing_ok=True)
        spec = build_spec(long_running(job), role, self.env.device, self.env.scale, self.case.timeout_s,
                          {**self.env.extra_env, **self.job_env.get(role, {}), STEADY_STATE_VAR: "1",
                           GATE_VAR: str(gate)}, cpus)
        log, progress = run_files(self.out_dir, role, len(self.runs[role]) + 1)
        process = JobProcess(spec, log, progress).start()
        self.runs[role].append(process)
        if process.start_error:
            raise InterleavedFailure(f"{role} {job.model} could not start: {process.start_error}")
        self.roles.register(process.pid, STANDBY_ROLE, process.tag)
        return process

    def _job(self, role: str) -> JobConfig:
        job = self.case.job_of(role)
        if job is None:
            raise InterleavedFailure(f"an interleaved case needs a {role} job")
        return job

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
        running = self.jobs.get(role)  # None where the case failed before this job started
        runs = self._ended_progress[role] + ([running.progress()] if running is not None else [])
        return Progress.chained(runs) if runs else Progress()

    def _current_steps(self, role: str) -> list[tuple[float, float]]:
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
        """Both jobs train, until their rates hold steady: startup, autotuning and first steps
        excluded. The later starts' jobs finish their start-up meanwhile, before any round."""
        trained_t, steady = self._train_until_steady(self.started_t, standby=True)
        self.warm_t = now()
        self.starts.append(StartInfo(1, self.segment, self.started_t, trained_t, self.warm_t, False, steady))
        progresses = [self._progress(role) for role in self.job_roles]
        self.phase_s, self.settle_s = phase_lengths(progresses, trained_t, self.warm_t, self.case.phase_s,
                                                    self.case.settle_s, self._queued)
        gaps = report_gaps(progresses, trained_t, self.warm_t)
        self.report_gap_s = {role: gap for role, gap in zip(self.job_roles, gaps) if gap is not None}
        if self.probe is not None:
            self.sharing_probe = self.probe()

    def _train_until_steady(self, since: float, standby: bool = False) -> tuple[float, bool]:
        """Every job's first steps, then their steady rates (and the later starts' set-up where
        ``standby``): when, and whether they were seen steady. A run that ends meanwhile, while the
        other job is still setting up (a 20-s run beside a model that builds for longer), is started
        again as a run that ends mid-case is; only one too short for any round fails the case."""
        while True:
            try:
                self._await_first_steps(self.job_roles, since)
                trained_t = now()
                for process in self.jobs.values():
                    process.pin_tree()
                steady = self._hold_until_steady(trained_t)
                if standby:
                    self._await_standby_setup()
                return trained_t, steady
            except JobEnded as ended:
                self._start_again_before_rounds(ended.role)

    def _start_again_before_rounds(self, role: str) -> None:
        """The ended run replaced (``_replace_run`` refuses one too short); the others, paused while it
        started, train again at once: no round is under way to keep clean."""
        self._replace_run(role)
        for other in self.job_roles:
            if other != role:
                self.jobs[other].resume()

    def _hold_until_steady(self, trained_t: float) -> bool:
        """Until both jobs' step rates hold steady (``is_steady``), at least ``MIN_WARMUP_S`` after their
        first steps and at most the settings' ``warmup_s``; True where they were seen steady."""
        cap = self.started_t + self.rule.max_seconds
        end = min(trained_t + max(self.case.warmup_s, MIN_WARMUP_S), cap)
        while (t := now()) < end:
            self._check_alive()
            if t - trained_t >= MIN_WARMUP_S and all(self._steady(role, trained_t, t) for role in self.job_roles):
                return True
            self.sleep(min(POLL_S, end - t))
        if now() >= cap:
            raise CapReached()
        return False

    def _steady(self, role: str, since: float, at: float) -> bool:
        steps = [(t, n) for t, n in self._current_steps(role) if t >= since]
        return is_steady(steps, at, steady_window(steps), STEADY_TOLERANCE)

    def _await_standby_setup(self) -> None:
        """The later starts' jobs built their model and data (their start-up done, waiting at the
        gate), so none of it lands in a round; one that failed is replaced by a fresh start later."""
        deadline = now() + STANDBY_WAIT_S
        pending = [p for pair in self.standby for p in pair.values()]
        while pending := [p for p in pending if p.progress().setup_t is None and p.poll() is None]:
            self._check_alive()
            if now() > deadline:
                return
            self.sleep(POLL_S)

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
        self._phase_now = name
        running = self.job_roles if name == "pair" else (name,)
        for role, process in self.jobs.items():
            (process.resume if role in running else process.pause)()
        switched = now()
        self._hold(self.settle_s)
        start = now()
        self._hold(self.phase_s)
        return Phase(name, switched, start, now())

    def _measure_rounds(self) -> None:
        """Rounds until the stopping rule is met, spread over the planned starts of the pair; a job
        that finished its run is started again."""
        while True:
            try:
                step = self._one_round()
                if step == "stop":
                    return
                if step == "next start":
                    self._next_start()
            except JobEnded as ended:
                self._restart(ended.role)

    def _one_round(self) -> Optional[str]:
        """Solo phases, then the pair phase; "stop" once enough is measured, "next start" once this
        start has its rounds and another is planned. Both are decided once a round's solo phases
        have closed the bracket around the previous pair phase, so a start ends on solo phases and
        every pair phase lies between solo phases of both jobs."""
        index = len(self.rounds)
        solo_order = self.job_roles if index % 2 == 0 else self.job_roles[::-1]
        round_start = now()
        solos = tuple(self._phase(name) for name in solo_order)
        self.rounds.append(PhaseRound(index + 1, solos, self.segment))
        decision = self._decide() if index else None
        if decision:
            return decision
        self.rounds[-1] = PhaseRound(index + 1, solos + (self._phase("pair"),), self.segment)
        self.round_s = now() - round_start
        self._lengthen_phases_if_too_short(self.rounds[-1])
        return None

    def _more_starts(self) -> bool:
        return len(self.starts) < self.planned_starts and self._next_start_fits()

    def _next_start_fits(self) -> bool:
        """The time cap leaves room for one more start's switch and its rounds."""
        rounds = self.planned_rounds or self.min_rounds_per_start
        return (now() - self.started_t + self._switch_s() + rounds * max(self.round_s, 1e-3)
                <= self.rule.max_seconds)

    def _switch_s(self) -> float:
        """What beginning another start costs, as the first start showed it: closing solo phases, the
        jobs' way to their first step (from their start gate where the next start waits in standby: a
        job that autotunes spends seconds there; from process start otherwise), and the warm-up."""
        first = self.starts[0]
        to_first_step = first.trained_t - first.began_t
        if self.standby:
            gated = [_gate_to_first_step(self.runs[role][0].progress()) for role in self.job_roles]
            to_first_step = max((g for g in gated if g is not None), default=to_first_step)
        closing = len(self.job_roles) * (self.phase_s + self.settle_s)
        return closing + to_first_step + (first.warm_t - first.trained_t) + SWITCH_MARGIN_S

    def _rounds_this_start(self) -> int:
        first = self.starts[-1].segment if self.starts else 0
        return sum(1 for r in self.rounds if r.segment >= first and r.phase("pair"))

    def _decide(self) -> Optional[str]:
        """After a round's solo phases: go on, begin the next start, or stop. With one start the
        stopping rule decides alone. With several, every start measures the same planned number of
        rounds (the interval over starts is narrowest for a given number of rounds when they are
        spread evenly), and the precision target and the time cap are also asked at each start's end.
        The last start goes on past its planned rounds while a precision target is unmet and the cap
        leaves room: the plan was made from a few rounds' noise, and stopping on it left cases at two
        thirds of their cap with the target far off."""
        if self.planned_starts == 1:
            return "stop" if self._enough() else None
        done = self._rounds_this_start()
        if self.planned_rounds is None and done >= self.min_rounds_per_start:
            self.planned_rounds = self._plan_rounds()
        if self.planned_rounds is not None and done >= self.planned_rounds:
            if self._enough(early=True):
                return "stop"
            if self._more_starts():
                return "next start"
            if self.rule.precision is None:
                self.stop_reason = self.stop_reason or self._planned_reason()
                return "stop"
        return "stop" if self._enough() else None

    @property
    def min_rounds_per_start(self) -> int:
        return max(MIN_ROUNDS_PER_START, math.ceil(self.rule.min_rounds / self.planned_starts))

    def _plan_rounds(self) -> int:
        """Rounds each start measures: as many as the time cap leaves room for in every start (their
        switches counted as the first start showed them), fewer where the first start's noise says
        that fewer already reach the precision target over all starts. Where the cap cannot hold
        ``MIN_ROUNDS_PER_START`` rounds in every planned start (a pair whose first step autotunes for
        seconds), fewer starts are measured, each with more rounds."""
        spent, done, switch_s = now() - self.started_t, self._rounds_this_start(), self._switch_s()
        for starts in range(self.planned_starts, 0, -1):
            left = self.rule.max_seconds - spent - (starts - 1) * switch_s
            by_time = math.floor((left / max(self.round_s, 1e-3) + done) / starts)
            if by_time >= MIN_ROUNDS_PER_START or starts == 1:
                self.planned_starts = starts
                return max(done, min(by_time, self._rounds_for_target(starts)))
        return done

    def _rounds_for_target(self, starts: int) -> int:
        """Rounds per start at which the interval over all planned starts would reach the target,
        from the first start's rounds and the prior between-start offset; a large number where the
        offset alone keeps the interval wider than the target."""
        values = [r["concurrency_efficiency"] for r in complete_rounds(self.snapshot(), self.env.idle_power_w)]
        if self.rule.precision is None or len(values) < 2:
            return self.min_rounds_per_start
        return rounds_for_target(values, starts, self.rule.precision, self.prior)

    def _planned_reason(self) -> str:
        return (f"planned: {self.planned_rounds} rounds in each of {len(self.starts)} starts, as many as the time cap "
                f"of {self.rule.max_seconds:g} s holds (precision target {_pct(self.rule.precision)})")

    def _next_start(self) -> None:
        """Both jobs of this start ended, the next start's begun (from standby where it waits at its
        gate), and warmed up until steady before its rounds, which form a segment of their own."""
        for role in self.job_roles:
            ended = self.jobs[role]
            ended.stop()
            self._ended_progress[role].append(ended.progress())
        self.segment += 1
        began = now()
        waiting = self.standby.pop(0) if self.standby else None
        used_standby = waiting is not None and all(p.poll() is None and p.progress().setup_t for p in waiting.values())
        for role in self.job_roles:
            if used_standby and waiting is not None:
                self._take_standby(role, waiting[role])
            else:
                if waiting is not None:
                    waiting[role].stop()
                self._start_job(role)
        trained_t, steady = self._train_until_steady(began)
        self.starts.append(StartInfo(len(self.starts) + 1, self.segment, began, trained_t, now(),
                                     used_standby, steady))

    def _take_standby(self, role: str, process: JobProcess) -> None:
        """A job waiting at its gate becomes this start's: on the role's own CPUs, counted under its
        role by the monitors, its gate opened."""
        process.spec.cpus = self.env.job_cpus(role, True)
        process.pin_tree()
        self.roles.register(process.pid, role, process.tag)
        self.jobs[role] = process
        self.run_started_t[role] = now()
        Path(process.spec.env[GATE_VAR]).touch()

    def _lengthen_phases_if_too_short(self, last: PhaseRound) -> None:
        """A job that stepped more slowly than its warm-up cadence promised (a loaded host, a slower
        stretch of its data) lengthens the phases after a round: to hold ``REPORTS_PER_PHASE``
        reports at the pace it showed in that round (seconds of running per step report, the time
        it was paused left out), and where it reported fewer than two steps in a phase, to at least
        double; on a GPU the settling grows to ``STEPS_PER_SETTLE`` of its steps. The lengths settle at the
        first complete round whose pace they fit, and stay while rounds hold two reports of each job
        in each phase, so that a case's rounds have the same phases; a round that does not (the
        host got busier) lengthens them again. Phases that leave no room in the case's time cap for
        one bracketed round cannot measure this pair here: before any round is complete the case
        fails, saying so; after, the lengths stay and the cap ends the case with what it has."""
        sparse = [(role, phase) for phase in last.phases for role in self._running(phase)
                  if _reports_in(self._progress(role), phase) < 2]
        if self._phases_settled and not sparse:
            return
        gaps = {role: running_gap(self._progress(role), self._running_spans(role), last.start, last.end)
                for role in self.job_roles}
        role = max(gaps, key=gaps.__getitem__)
        unit = self.case.phase_s
        needed = unit * math.ceil(REPORTS_PER_PHASE * gaps[role] / unit - 1e-9)
        if not sparse and needed <= PACE_SLACK * self.phase_s:
            self._phases_settled = bool(complete_rounds(self.snapshot(), self.env.idle_power_w))
            return
        phase_s = max(2 * self.phase_s if sparse else self.phase_s, needed)
        settle_s = max(self.settle_s, STEPS_PER_SETTLE * gaps[role] if self._queued else 0.0)
        left = self.rule.max_seconds - (now() - self.started_t)
        if self._phases_per_bracketed_round * (phase_s + settle_s) <= left:
            self.phase_s, self.settle_s, self._phases_settled = phase_s, settle_s, False
        elif not complete_rounds(self.snapshot(), self.env.idle_power_w):
            self.phase_s, self.settle_s = phase_s, settle_s
            phase = next((phase for sparse_role, phase in sparse if sparse_role == role), None)
            raise InterleavedFailure(self._too_slow(role, phase, gaps[role], left))

    @property
    def _phases_per_bracketed_round(self) -> int:
        """A round's solo phases and its pair phase, and the solo phases that close its bracket: five
        for a pair, seven for three jobs."""
        return 2 * len(self.job_roles) + 1

    def _running(self, phase: Phase) -> tuple[str, ...]:
        """The jobs that ran in a phase: one alone, or all of them in the ``pair`` phase."""
        return self.job_roles if phase.name == "pair" else (phase.name,)

    @property
    def _queued(self) -> bool:
        """The jobs train on a device that queues their work (a GPU), which settling must let drain."""
        return getattr(self.env, "device", "cuda") == "cuda"

    def _running_spans(self, role: str) -> list[tuple[float, float]]:
        """When the job ran: the warm-up, and every phase it was not paused in."""
        return [(self.started_t, self.warm_t)] + [(p.switched_t, p.end) for r in self.rounds for p in r.phases
                                                   if role in self._running(p)]

    def _too_slow(self, role: str, phase: Optional[Phase], gap: float, left: float) -> str:
        model = self._job(role).model
        sparse = (f"; it reported fewer than 2 steps in a {phase.end - phase.switched_t:.1f} s phase ({phase.name})"
                  if phase is not None else "")
        return (f"{role} {model} steps too slowly here for the case's time cap: about one step report every "
                f"{gap:.1f} s of its running in the last round{sparse}; phases that hold {REPORTS_PER_PHASE} of them "
                f"({self.phase_s:g} s, settling {self.settle_s:.1f} s) leave no room for one bracketed round in the "
                f"{max(0.0, left):.0f} s left of {self.rule.max_seconds:g} s: raise --gpu-pairs-max-case-s, run where "
                f"the jobs step faster (a less loaded host, a GPU), or give the job less work per step")

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
        if self._rounds_in_run(role, progress.last_t) < MIN_ROUNDS_PER_RUN and too_short(
                _trained_s(progress), self._needed_s()):
            raise InterleavedFailure(self._too_short(role))
        discarded = self._discard_after(progress.last_t)
        self._ended_progress[role].append(progress)
        for other in self.job_roles:
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
        waiting = [role for role in self.job_roles if role not in renewed]
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

    def _warmup_used_s(self) -> float:
        """The warm-up a run had here: the last start's, or the settings' cap before any."""
        if not self.starts:
            return max(self.case.warmup_s, MIN_WARMUP_S)
        return self.starts[-1].warm_t - self.starts[-1].trained_t

    def _round_s_here(self) -> float:
        return self.round_s or (len(self.job_roles) + 1) * (self.phase_s + self.settle_s)

    def _needed_s(self) -> float:
        """The training a run must hold here: its warm-up and ``MIN_ROUNDS_PER_RUN`` rounds, as long as
        they took on this host."""
        return self._warmup_used_s() + MIN_ROUNDS_PER_RUN * self._round_s_here()

    def _too_short(self, role: str) -> str:
        process = self.jobs[role]
        if not process.progress().steps:
            return self._never_reported(role)
        trained = _trained_s(process.progress())
        return (f"{role} {process.spec.model} finished its run (exit code 0) after {trained:.1f} s of training, too "
                f"short to measure: a run must train through its warm-up ({self._warmup_used_s():.1f} s here) and "
                f"{MIN_ROUNDS_PER_RUN} rounds ({self._round_s_here():.1f} s each here), about {self._needed_s():.0f} s; "
                f"give each run more work (more epochs or iterations) or set a shorter defaults.warmup_s"
                f"{self._missed(role)}; log: {process.log_path}")

    def _never_reported(self, role: str) -> str:
        """A run that ended without one step report the harness could read: its length is unknown, and
        no length would help."""
        process = self.jobs[role]
        ran = (process.exit_t or now()) - process.start_t
        fix = self._missed(role) or f"; {PROGRESS_FIX.format(process.spec.model)}"
        return (f"{role} {process.spec.model} finished its run (exit code 0) after {ran:.1f} s without a step report "
                f"the harness could read, so its training cannot be measured{fix}; log: {process.log_path}")

    def _missed(self, role: str) -> str:
        """Where the job's log had lines its progress_pattern read no step from: that, with a line it missed."""
        no_match = self.jobs[role].progress().no_match
        return f"; {role}'s log had lines but {no_match}" if no_match else ""

    def _enough(self, early: bool = False) -> bool:
        """The stopping rule's verdict on the rounds so far. With several starts a start measures its
        planned rounds unless the time cap or a round limit stops it; at a start's end (``early``)
        the precision target may also end the case before the planned starts. The rule's "the starts'
        offsets limit the interval" is not asked there (the plan decides how many starts), so the cap
        and the round limit are always reached."""
        complete = complete_rounds(self.snapshot(), self.env.idle_power_w)
        segments = [r["segment"] for r in complete]

        def estimate(values):
            return start_interval(values, segments, self.prior).interval

        stop, why = self.rule.verdict([r["concurrency_efficiency"] for r in complete], now() - self.started_t,
                                      self.round_s, estimate, self.planned_starts > 1)
        allowed = ("time cap", "--gpu-pairs-max-rounds") + (("precision reached",) if early else ())
        if self.planned_starts > 1 and why is not None and not why.startswith(allowed):
            return False
        self.stop_reason = why
        return stop

    def _tell_live(self, event: str) -> None:
        """The live line draws this case while it runs (``live_status``) and is erased when it ends."""
        live = getattr(self.env, "live", None)
        if live is not None:
            getattr(live, event)(self)

    def live_status(self) -> str:
        """What the live line says runs now: the jobs starting, the warm-up, or a round's phase."""
        if self._phase_now is None:
            return "warm-up" if self.jobs else "starting"
        what = "pair" if self._phase_now == "pair" else f"{self._phase_now} alone"
        start = f"start {max(1, len(self.starts))}/{self.planned_starts} " if self.planned_starts > 1 else ""
        return f"{start}round {sum(1 for r in self.rounds if r.phase('pair')) + 1}: {what}"

    @property
    def fg_progress_path(self) -> Optional[str]:
        process = self.jobs.get("fg")
        return process.progress_path if process is not None else None

    def snapshot(self) -> InterleavedMeasurement:
        samples = tuple(self.sampler.samples) if self.sampler else ()
        return InterleavedMeasurement(self._progress("fg"), self._progress("bg"), tuple(self.rounds), samples,
                                      (self.started_t, self.warm_t or now()), self.rule, self.stop_reason,
                                      self.failure, out_dir=self.out_dir, phase_s=self.phase_s,
                                      settle_s=self.settle_s, report_gap_s=dict(self.report_gap_s),
                                      restarts=tuple(self.restarts), starts=tuple(self.starts),
                                      planned_starts=self.planned_starts, prior=self.prior,
                                      more_bgs=tuple(self._progress(role) for role in self.job_roles[2:]),
                                      sharing_probe=dict(self.sharing_probe))

    def measurement(self) -> InterleavedMeasurement:
        oom = any(process.outcome().oom for runs in self.runs.values() for process in runs)
        return replace(self.snapshot(), oom=oom, cpu_readings=tuple(self.rapl.readings))

    def close(self) -> None:
        """Both jobs resumed and their trees killed, monitors stopped, samples saved; safe to
        call at any point and more than once."""
        if self._closed:
            return
        self._closed = True
        self._tell_live("round_ended")
        with deferred_signals():
            try:
                for process in [*self.jobs.values(), *(p for pair in self.standby for p in pair.values())]:
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


def _gate_to_first_step(progress: Progress) -> Optional[float]:
    """From a job's setup event (model and data built, at its start gate) to its first step."""
    if progress.setup_t is None or progress.ready_t is None:
        return None
    return max(0.0, progress.ready_t - progress.setup_t)


def _reports_in(progress: Progress, phase: Phase) -> int:
    return sum(1 for t, _ in progress.steps if phase.start <= t <= phase.end)


def running_gap(progress: Progress, spans: Sequence[tuple[float, float]], since: float, until: float) -> float:
    """A job's seconds of running per step report from ``since`` to ``until``: the median of its
    gaps between reports counted over ``spans`` (when it ran) only, so a pause between two
    reports adds nothing; and at least the running time since its last report, which a job that
    stopped reporting still owes."""
    times = [t for t, _ in progress.steps if t <= until]
    anchors = times[max(0, bisect.bisect_left(times, since) - 1):]
    gaps = [_ran(spans, a, b) for a, b in zip(anchors, anchors[1:])]
    silent = _ran(spans, anchors[-1] if anchors else since, until)
    return max(statistics.median(gaps) if gaps else 0.0, silent)


def _ran(spans: Sequence[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans)


def _trained_s(progress: Progress) -> float:
    if len(progress.steps) < 2:
        return 0.0
    return progress.steps[-1][0] - progress.steps[0][0]
