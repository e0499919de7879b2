"""The plain facts a round hands over: nothing here runs, owns a thread or touches a device."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from pytest_gpu_pairs.experiment.vocabulary import job_roles
from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record.stats import BetweenStarts, StoppingRule

STILL_STEPPING_GAPS = 3  # a background stopped within this many of its report gaps of its last step was training


@dataclass
class Measurement:
    """The raw facts of one round; ``results`` turns them into the record."""

    mode: str
    fg: JobOutcome
    window: tuple[float, float]
    samples: list[GpuSample]
    background: Optional[BackgroundRuns]
    cpu_energy_j: Optional[float]
    cpu_energy_unavailable: Optional[str]
    out_dir: Path
    sharing_probe: dict[str, Any] = field(default_factory=dict)
    timeline: dict[str, Any] = field(default_factory=dict)
    fg_stopped_because: Optional[str] = None

    @property
    def window_s(self) -> float:
        return self.window[1] - self.window[0]


@dataclass
class JobOutcome:
    """How one job process ended, with everything needed to explain it."""

    role: str
    model: str
    argv: list[str]
    log_path: str
    progress_path: str
    start_t: float
    end_t: float
    returncode: Optional[int]
    timed_out: bool = False
    stopped_by_harness: bool = False
    oom: bool = False
    oom_message: Optional[str] = None
    progress: Progress = field(default_factory=Progress)
    start_error: Optional[str] = None
    leftovers_killed: int = 0
    log_metrics: dict[str, Any] = field(default_factory=dict)
    timeout_s: Optional[float] = None
    has_output: bool = True  # the job printed a line of its own

    @property
    def wall_s(self) -> float:
        return self.end_t - self.start_t

    @property
    def training_window(self) -> tuple[float, float]:
        """From the first optimiser step to the last reported step; the process's lifetime for a
        job that does not speak the progress protocol. Startup (imports, CUDA context, data) is
        seconds of noise that a long real job amortises, so durations and energies use this."""
        first, last = self.progress.ready_t, self.progress.last_t
        if first is not None and last is not None and last > first:
            return first, last
        return self.start_t, self.end_t

    @property
    def duration_s(self) -> float:
        start, end = self.training_window
        return end - start

    @property
    def duration_basis(self) -> str:
        return "training" if self.training_window != (self.start_t, self.end_t) else "process"

    @property
    def metrics(self) -> dict[str, Any]:
        """The job's model metrics: its protocol result, then its ``log_patterns`` matches."""
        reported = dict((self.progress.result or {}).get("metrics") or {})
        return {**reported, **self.log_metrics}

    @property
    def trained_nothing(self) -> bool:
        """Exited 0 on its own without a sign of training: no progress report, no metric, not a
        line of output. Exit code 0 alone proves nothing (``true`` exits 0)."""
        return (self.returncode == 0 and not (self.timed_out or self.oom or self.stopped_by_harness)
                and not self.progress.steps and self.progress.result is None and not self.log_metrics
                and not self.has_output)

    @property
    def completed(self) -> bool:
        """Ran to its own end with exit code 0: its durations and metrics mean something."""
        return (self.returncode == 0 and not (self.timed_out or self.oom or self.stopped_by_harness)
                and not self.trained_nothing)

    @property
    def failed(self) -> bool:
        return not self.stopped_by_harness and (self.timed_out or self.oom or self.returncode != 0
                                                or self.trained_nothing)

    def reason(self) -> str:
        if self.trained_nothing:
            return ("exited with code 0 without training anything: no progress report, no metric and no "
                    f"output; log: {self.log_path}")
        if self.start_error:
            return f"could not start: {self.start_error}"
        if self.oom:
            return f"out of memory ({self.oom_message}); log: {self.log_path}"
        if self.timed_out:
            return f"timed out (limit {self.timeout_s:g} s) and was killed; log: {self.log_path}"
        if self.returncode not in (0, None) and not self.stopped_by_harness:
            return f"exited with code {self.returncode}; log: {self.log_path}"
        return "ok"


@dataclass
class BackgroundRun:
    index: int
    outcome: JobOutcome
    ready_t: Optional[float]
    ready_basis: Optional[str] = None  # protocol, ready_pattern or fallback (ReadinessWatch)
    ended_unready: bool = False  # ended on its own before it was seen training: counts towards a crash loop

    def training_interval(self) -> Optional[tuple[float, float]]:
        """From readiness to the last sign of training: its end where the harness stopped it while it
        was still stepping (its last report no further back than a few of its own report gaps), else
        its last step, or its end where it reported none."""
        if self.ready_t is None:
            return None
        progress, end_t = self.outcome.progress, self.outcome.end_t
        end = end_t if not progress.steps or self._stopped_while_stepping() else progress.last_t
        return (self.ready_t, max(self.ready_t, end or end_t))

    def _stopped_while_stepping(self) -> bool:
        times = [t for t, _ in self.outcome.progress.steps]
        if not self.outcome.stopped_by_harness or len(times) < 2 or self.outcome.end_t is None:
            return False
        gap = statistics.median(b - a for a, b in zip(times, times[1:]))
        return self.outcome.end_t - times[-1] <= STILL_STEPPING_GAPS * gap


@dataclass(frozen=True)
class BackgroundRuns:
    """The background loop's runs up to the end of a round, and why the loop gave up, if it did."""

    runs: tuple[BackgroundRun, ...] = ()
    failure: Optional[str] = None

    def steps_between(self, start: float, end: float) -> float:
        return sum(r.outcome.progress.steps_between(start, end) for r in self.runs)

    def training_intervals(self) -> list[tuple[float, float]]:
        return [iv for iv in (r.training_interval() for r in self.runs) if iv is not None]

    def last_completed_metrics(self) -> Optional[dict[str, Any]]:
        """Model metrics of the last run that finished on its own, a kept-running background's last
        cycle among them (None when none did)."""
        finished = [(r.outcome.end_t or 0.0, r.outcome.metrics) for r in self.runs if r.outcome.completed]
        finished += [(cycle["t"], cycle["metrics"]) for run in self.runs for cycle in run.outcome.progress.cycles]
        return max(finished, key=lambda done: done[0])[1] if finished else None

    def cycles_sharing(self, start: float, end: float) -> list[dict[str, Any]]:
        """A kept-running background's runs that overlapped ``start``-``end``, each with its metrics and
        ``shared``, the fraction of the run inside that window (a run begins where the one before it
        ended, the first at the process's readiness)."""
        overlapping = []
        for run in self.runs:
            begun = run.ready_t
            for cycle in run.outcome.progress.cycles:
                if begun is not None and cycle["t"] > begun:
                    inside = min(end, cycle["t"]) - max(start, begun)
                    if inside > 0:
                        overlapping.append({"metrics": cycle["metrics"], "shared": inside / (cycle["t"] - begun)})
                begun = cycle["t"]
        return overlapping

    @property
    def failures(self) -> list[BackgroundRun]:
        return [r for r in self.runs if r.outcome.failed]

    @property
    def ooms(self) -> list[BackgroundRun]:
        return [r for r in self.runs if r.outcome.oom]


class JobCpus(Protocol):
    """Which CPUs the jobs were pinned to, as the record says it (the run layer's ``CpuPlan``)."""

    @property
    def reason(self) -> Optional[str]: ...  # why there was no pinning

    def described(self, one_loop: dict[str, bool]) -> Optional[dict[str, str]]: ...


class DeviceFacts(Protocol):
    """What a record says about where it was measured (the run layer's ``Environment`` has these);
    read-only, so a dataclass's field and a property both provide one."""

    @property
    def device_name(self) -> str: ...
    @property
    def gpu_uuid(self) -> Optional[str]: ...
    @property
    def host(self) -> str: ...
    @property
    def scale(self) -> float: ...
    @property
    def sample_hz(self) -> float: ...
    @property
    def idle_power_w(self) -> Optional[float]: ...
    @property
    def idle_power_note(self) -> Optional[str]: ...
    @property
    def gpu_unavailable(self) -> Optional[str]: ...
    @property
    def cpus(self) -> JobCpus: ...

    def one_loop(self, builtin: bool) -> bool: ...


@dataclass(frozen=True)
class Phase:
    """One phase of an interleaved round: who ran (``fg`` alone, ``bg`` alone, or the ``pair``),
    when it was switched on, and the window measured in it (the settling time after the switch
    left out)."""

    name: str
    switched_t: float
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class PhaseRound:
    """One round's phases; ``segment`` counts the restarts before it: a job that finished its run
    and was started again begins a new segment, and a pair phase is bracketed only by solo phases
    of its own segment (the jobs' runs on the other side of a restart are other processes)."""

    index: int
    phases: tuple[Phase, ...]
    segment: int = 0

    def phase(self, name: str) -> Optional[Phase]:
        return next((p for p in self.phases if p.name == name), None)

    @property
    def start(self) -> float:
        return min(p.switched_t for p in self.phases)

    @property
    def end(self) -> float:
        return max(p.end for p in self.phases)


@dataclass(frozen=True)
class Restart:
    """A job that finished its run (exit code 0) during an interleaved case and was started again:
    the rounds after its last step report were discarded and its new run warmed up again."""

    role: str
    run: int  # the run that ended: 1 for the job's first process
    exit_t: float
    last_step_t: Optional[float]
    trained_s: float  # the ended run's training time, first step to last
    rounds_discarded: int
    restarted_t: float  # the new run's start; rounds go on once it trained and warmed up

    def as_record(self) -> dict[str, Any]:
        return {"role": self.role, "run": self.run, "exit_t": self.exit_t, "last_step_t": self.last_step_t,
                "trained_s": self.trained_s, "rounds_discarded": self.rounds_discarded,
                "restarted_t": self.restarted_t}


@dataclass(frozen=True)
class StartInfo:
    """One independent start of the pair in an interleaved case: both jobs started (or taken from
    standby at their start gates), trained, warmed up until steady; its rounds are the segment
    ``segment`` (a job that ended and was started again opens a further segment of the same start)."""

    index: int
    segment: int
    began_t: float
    trained_t: float  # both jobs reported a training step
    warm_t: float  # warm-up over: rounds begin
    from_standby: bool  # the jobs had started with the first start's and waited at their gates
    steady: bool  # the warm-up ended because both rates held steady (False: at the warmup_s cap)

    def as_record(self) -> dict[str, Any]:
        return {"start": self.index, "segment": self.segment, "startup_s": self.trained_t - self.began_t,
                "warmup_s": self.warm_t - self.trained_t, "from_standby": self.from_standby, "steady": self.steady}


@dataclass(frozen=True)
class InterleavedMeasurement:
    """Both jobs kept alive for the whole case and switched between phases: what was measured.

    ``fg`` and ``bg`` are each job's progress (its step reports); ``warmup`` is the span from the
    jobs' start to the first round, excluded from every figure."""

    fg: Progress
    bg: Progress
    rounds: tuple[PhaseRound, ...]
    samples: tuple[GpuSample, ...]
    warmup: tuple[float, float]
    rule: Optional[StoppingRule] = None  # the rule that ended the measurement
    stop_reason: Optional[str] = None
    failure: Optional[str] = None
    oom: bool = False
    cpu_readings: tuple[tuple[float, float], ...] = ()
    out_dir: Optional[Path] = None
    phase_s: Optional[float] = None  # as measured: the settings' value, or longer for a slow reporter
    settle_s: Optional[float] = None
    report_gap_s: dict[str, float] = field(default_factory=dict)  # each job's usual time between step reports
    restarts: tuple[Restart, ...] = ()
    starts: tuple[StartInfo, ...] = ()
    planned_starts: int = 1
    prior: Optional[BetweenStarts] = None  # what the interval pooled with the starts' own offsets (None: none)
    more_bgs: tuple[Progress, ...] = ()  # a group's further backgrounds' progress (roles bg2, bg3, ...)
    sharing_probe: dict[str, Any] = field(default_factory=dict)  # the mechanism, probed once both jobs trained

    @property
    def progresses(self) -> dict[str, Progress]:
        """Every job's progress by role, the foreground first: fg, bg, bg2, ..."""
        return dict(zip(job_roles(2 + len(self.more_bgs)), (self.fg, self.bg, *self.more_bgs)))
