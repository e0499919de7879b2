"""The progress protocol: JSON lines a job appends to ``$GPU_PAIRS_PROGRESS``.

Both sides live here and neither imports torch: the writer runs inside the job, the reader in
the harness. Readiness ("the background is really training") and background progress during
the foreground window are read from these lines, not guessed from sleeps.
"""
from __future__ import annotations

import bisect
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Optional, TypeGuard

from pytest_gpu_pairs.inputs import describe_number, finite_or_none, is_finite_number, open_regular

ENV_VAR = "GPU_PAIRS_PROGRESS"
GATE_VAR = "GPU_PAIRS_START_GATE"
STEADY_STATE_VAR = "GPU_PAIRS_STEADY_STATE"
CYCLES_VAR = "GPU_PAIRS_CYCLES"  # a built-in background trains its run again and again in one process
RUNS_VAR = "GPU_PAIRS_RUNS"  # a built-in trains its run this many times in one process, then ends
MAX_RUNS = 1000
FIT_RUN_VAR = "GPU_PAIRS_FIT_RUN"  # a built-in's fit run: this many training steps, then evaluation and a checkpoint
MEMORY_PHASES = ("setup", "start", "train", "eval", "checkpoint")  # the parts of a run a fit run reports memory for
STEP_INTERVAL_S = 0.25
STEADY_STEP_INTERVAL_S = 0.05  # interleaved phases last half a second: a rate needs several reports in one
MONOTONIC_KEY = "mono"  # an event's CLOCK_MONOTONIC seconds, beside its wall-clock "t"
_EPOCH_AT_MONOTONIC_ZERO = time.time() - time.monotonic()


def now() -> float:
    """The harness's clock: seconds since the epoch as the wall clock stood when this process
    started, advanced by CLOCK_MONOTONIC. Durations, deadlines, holds and every stamp compared with
    another (phases, samples, step reports) are taken on it, so a wall clock stepped back an hour
    mid-case (NTP, a person) neither stretches a hold by that hour nor puts a step before its
    phase; stamps in records still read as dates."""
    return time.monotonic() + _EPOCH_AT_MONOTONIC_ZERO


def from_monotonic(seconds: float) -> float:
    """A job's CLOCK_MONOTONIC reading on ``now``'s scale: the clock is one for every process of a
    host (Linux, macOS, Windows), so a step a job stamps lies where the harness's phases do."""
    return seconds + _EPOCH_AT_MONOTONIC_ZERO


def steady_state_only() -> bool:
    """True when the harness measures only this job's steady training rate (interleaved rounds):
    a job then leaves out its per-epoch evaluation, a pass of up to seconds with no steps that
    would land in some phases and not others and move their rates by more than the sharing does."""
    return os.environ.get(STEADY_STATE_VAR) == "1"


def cycling() -> bool:
    """True when the harness keeps this job running as a background: after its run it starts the
    same run again (same seed, fresh model) in this process, so no restart gap (a new process, its
    CUDA context, cuDNN's autotuning) falls inside the foreground's run."""
    return os.environ.get(CYCLES_VAR) == "1"


def runs_wanted() -> int:
    """How many times to train the run in this process before ending: a kept-running background
    alone, measured as it runs beside a foreground. 1 where the variable is unset or not a count."""
    text = os.environ.get(RUNS_VAR, "")
    is_count = text.isascii() and text.isdigit() and int(text) >= 1
    return min(int(text), MAX_RUNS) if is_count else 1


def wait_for_start_gate(poll_s: float = 0.01) -> None:
    """Hold the first training step until the harness creates the gate file.

    The harness starts the foreground while the background is still starting up and opens the
    gate once the background trains: the foreground's seconds of imports and CUDA setup then
    overlap the background's, and its first step meets a background that is really training.
    """
    path = os.environ.get(GATE_VAR)
    while path and not os.path.exists(path):
        time.sleep(poll_s)


FIT_RESTART = "restart"  # FIT_RUN_VAR's suffix for a second start: start-up and training only


def fit_run_steps() -> tuple[Optional[int], bool]:
    """The training steps of a fit run (None: the harness asked for an ordinary run) and whether it
    is a whole run. A whole fit run goes through every part of a run that holds memory (start-up
    and autotuning, training, evaluation, a checkpoint), each reported with the allocator's peak,
    and then ends; a restart (``N:restart``) repeats the start-up, whose transient differs between
    starts, and training, and leaves out the evaluation and checkpoint the first start measured."""
    steps, _, kind = os.environ.get(FIT_RUN_VAR, "").partition(":")
    if not steps.isdigit() or int(steps) <= 0:
        return None, False
    return int(steps), kind != FIT_RESTART


def step_interval_s() -> float:
    """How often a job reports its steps: four times a second, or twenty under interleaved rounds,
    whose half-second phases each need several reports for a rate."""
    return STEADY_STEP_INTERVAL_S if steady_state_only() else STEP_INTERVAL_S


class ProgressWriter:
    """Appends events; step events are throttled to one per ``interval_s``.

    ``sync`` is called before each written step so that a step counted is a step the device
    has finished (CUDA queues run ahead of Python by up to hundreds of kernels). Each event carries
    the wall time (``t``, for people) and CLOCK_MONOTONIC (``mono``, which the harness measures
    with, and the throttle runs on); a ``clock`` given (a test's script) is the only time written.
    """

    def __init__(self, path: Optional[str], sync: Callable[[], None] = lambda: None,
                 clock: Optional[Callable[[], float]] = None, interval_s: float = STEP_INTERVAL_S):
        self._file = open(path, "a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115 - the job's lifetime
        self._sync, self._clock, self._interval_s = sync, clock or time.monotonic, interval_s
        self._stamp = (lambda: {"t": clock()}) if clock else (lambda: {"t": time.time(), MONOTONIC_KEY: time.monotonic()})
        self._last_step_t = 0.0

    @classmethod
    def from_env(cls, sync: Callable[[], None] = lambda: None) -> ProgressWriter:
        return cls(os.environ.get(ENV_VAR), sync, interval_s=step_interval_s())

    def _emit(self, event: dict[str, Any]) -> None:
        """One line; a metric that is NaN or Infinity (a diverged loss) is written as null: JSON has
        no such numbers, and a bare ``NaN`` is a line other readers refuse."""
        if self._file is not None:
            line = finite_or_none({**event, **self._stamp()})[0]
            self._file.write(json.dumps(line, allow_nan=False, default=str) + "\n")
            self._file.flush()

    def setup_done(self) -> None:
        """Model and data are built: what came before this line is startup, not training."""
        self._sync()
        self._emit({"event": "setup"})

    def ready(self) -> None:
        self._sync()
        self._emit({"event": "ready"})
        self._last_step_t = self._clock()

    def step(self, step: int, epoch: float, force: bool = False) -> None:
        """A step report (throttled); ``ValueError`` for a step or epoch the reader would refuse,
        before anything is written."""
        problem = step_problem(step, epoch)
        if problem:
            raise ValueError(problem)
        if force or self._clock() - self._last_step_t >= self._interval_s:
            self._sync()
            self._emit({"event": "step", "step": step, "epoch": round(epoch, 4)})
            self._last_step_t = self._clock()

    def result(self, metrics: dict[str, Any], steps: int, peak_mem_reserved_mb: Optional[float], **extra) -> None:
        self._sync()
        self._emit({"event": "result", "metrics": metrics, "steps": steps,
                    "peak_mem_reserved_mb": peak_mem_reserved_mb, **extra})

    def cycle(self, metrics: dict[str, Any], steps: int) -> None:
        """One run of a kept-running background ended (its evaluation's metrics, the steps counted
        so far over every run of the process); the next one starts at once."""
        self._sync()
        self._emit({"event": "cycle", "metrics": metrics, "steps": steps})

    def memory(self, phase: str, peak_reserved_mb: float, peak_allocated_mb: float, reserved_mb: float) -> None:
        """One part of a fit run ended: the caching allocator's peaks over it and what it holds now."""
        self._sync()
        self._emit({"event": "memory", "phase": phase, "peak_reserved_mb": peak_reserved_mb,
                    "peak_allocated_mb": peak_allocated_mb, "reserved_mb": reserved_mb})

    def error(self, message: str, oom: bool) -> None:
        self._emit({"event": "error", "oom": oom, "message": message[-2000:]})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


MAX_LINE_BYTES = 1 << 20  # a protocol line is well under 1 KiB; longer is not the protocol
MAX_STEPS = 100_000  # step reports kept; past this every other one is dropped (the pace stays readable)
EVENTS = ("setup", "ready", "step", "result", "error", "memory", "cycle")
MAX_CYCLES = 10_000  # cycle events kept: a kept-running background's runs of a case are far fewer
MEMORY_FIGURES = ("peak_reserved_mb", "peak_allocated_mb", "reserved_mb")


def bounded_lines(handle: IO[bytes], max_bytes: int = MAX_LINE_BYTES,
                  budget: Optional[int] = None) -> Iterator[tuple[bytes, bool]]:
    """The lines of a binary file, streamed: each at most ``max_bytes`` long, with True where a
    longer line was cut there (the rest of it is skipped unread into memory), and no more than
    ``budget`` bytes read in all (None: to the end). A job's output is untrusted: a 300 MB line
    without a newline must not become a 300 MB string in the harness, nor a sparse file of
    terabytes a read that never ends."""
    left = budget if budget is not None else -1
    while left != 0:
        line = handle.readline(max_bytes + 1 if left < 0 else min(max_bytes + 1, left))
        if not line:
            return
        left = max(0, left - len(line)) if left > 0 else left
        if len(line) <= max_bytes or line.endswith(b"\n"):
            yield line, False
            continue
        rest = line
        while rest and not rest.endswith(b"\n") and left != 0:
            rest = handle.readline(max_bytes if left < 0 else min(max_bytes, left))
            left = max(0, left - len(rest)) if left > 0 else left
        yield line[:max_bytes], True


MAX_COUNT = 2**53  # steps, epochs' batches: every whole number up to here is exact as a float too


def _is_number(value: Any) -> TypeGuard[float]:
    return is_finite_number(value)


def _is_count(value: Any) -> bool:
    return _is_number(value) and 0 <= value <= MAX_COUNT and float(value).is_integer()


def step_problem(step: Any, epoch: Any = None) -> Optional[str]:
    """Why a step report cannot be written or read (None when it can): the step a whole number from
    0 to 2**53, the epoch a finite number or None."""
    if not _is_count(step):
        return f"expected 'step' to be a whole number from 0 to 2**53, got {describe_number(step)}"
    if epoch is not None and not (_is_number(epoch) and abs(epoch) <= MAX_COUNT):
        return f"expected 'epoch' to be a finite number (at most 2**53), got {describe_number(epoch)}"
    return None


def event_problem(event: Any) -> Optional[str]:
    """What is wrong with one decoded protocol line, or None when it is a usable event. Unknown
    event names are not a problem: a newer writer may add some, and they are skipped."""
    if not isinstance(event, dict):
        return f"expected a JSON object, got {type(event).__name__}"
    kind = event.get("event")
    if not isinstance(kind, str):
        return "expected 'event' to be a string"
    if kind not in EVENTS:
        return None
    if not _is_number(event.get("t")):
        return f"expected 't' to be a finite number of seconds, got {describe_number(event.get('t'))}"
    if MONOTONIC_KEY in event and not _is_number(event[MONOTONIC_KEY]):
        return f"expected 'mono' to be a finite number of seconds, got {describe_number(event[MONOTONIC_KEY])}"
    if kind == "step":
        return step_problem(event.get("step"), event.get("epoch"))
    if kind in ("result", "cycle"):
        return _result_problem(event)
    if kind == "memory":
        return _memory_problem(event)
    if kind == "error" and not (isinstance(event.get("message", ""), str) and isinstance(event.get("oom", False), bool)):
        return "expected an error event with a string 'message' and a boolean 'oom'"
    return None


def _result_problem(event: dict[str, Any]) -> Optional[str]:
    if not isinstance(event.get("metrics", {}), dict):
        return f"expected 'metrics' to be an object, got {type(event.get('metrics')).__name__}"
    if event.get("steps") is not None and not _is_count(event.get("steps")):
        return f"expected 'steps' to be a whole number from 0 to 2**53, got {describe_number(event.get('steps'))}"
    peak = event.get("peak_mem_reserved_mb")
    if peak is not None and not _is_number(peak):
        return f"expected 'peak_mem_reserved_mb' to be a finite number, got {describe_number(peak)}"
    return None


def _memory_problem(event: dict[str, Any]) -> Optional[str]:
    if event.get("phase") not in MEMORY_PHASES:
        return f"expected 'phase' to be one of {', '.join(MEMORY_PHASES)}, got {str(event.get('phase'))[:40]!r}"
    for key in MEMORY_FIGURES:
        value = event.get(key)
        if not (_is_number(value) and 0 <= value <= MAX_COUNT):
            return f"expected '{key}' to be a finite number of MB, 0 or more, got {describe_number(value)}"
    return None


def event_time(event: dict[str, Any]) -> float:
    """When an event happened on the harness's clock (``now``): its ``mono`` where it has one (every
    event ``ProgressWriter`` writes), else its wall-clock ``t`` as it is (a line written by hand)."""
    if MONOTONIC_KEY in event:
        return from_monotonic(float(event[MONOTONIC_KEY]))
    return float(event["t"])


def parse_event(raw: bytes) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """One line of a progress file: (event, None), or (None, why it cannot be used)."""
    try:
        event = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "expected UTF-8 text"
    except (json.JSONDecodeError, RecursionError):
        return None, "expected one JSON object"
    except ValueError:  # an integer of thousands of digits: Python refuses to convert it
        return None, "expected one JSON object with numbers of at most a few hundred digits"
    problem = event_problem(event)
    return (None, problem) if problem else (event, None)


@dataclass
class Progress:
    """What a job reported, parsed tolerantly: a job's output is untrusted. A half-written last
    line (a killed job) is skipped quietly; every other line that is not a valid event is counted
    in ``bad_lines`` and the first one explained in ``first_problem``, never raised."""

    ready_t: Optional[float] = None
    setup_t: Optional[float] = None
    steps: list[tuple[float, float]] = field(default_factory=list)  # (time, step): a log's progress_pattern counts fractional steps
    result: Optional[dict[str, Any]] = None
    error: Optional[dict[str, Any]] = None
    bad_lines: int = 0
    first_problem: Optional[str] = None
    source: str = "protocol"  # or "log": read from the job's log with its progress_pattern
    memory: list[dict[str, Any]] = field(default_factory=list)  # a fit run's memory events, in order
    cycles: list[dict[str, Any]] = field(default_factory=list)  # a kept-running background's runs: t, steps, metrics
    skipped_bytes: int = 0  # of a log that ran ahead of its reader: the lines in them were not read
    no_match: Optional[str] = None  # a log with lines and no step: its progress_pattern and a line it missed
    _line: int = field(default=0, init=False, repr=False, compare=False)

    @classmethod
    def read(cls, path: str | Path, until_ready: bool = False) -> Progress:
        """The progress file, streamed line by line (memory stays flat on a file of any size);
        ``until_ready`` stops at the ready event, for a watcher that needs nothing more."""
        return ProgressReader(path).read(until_ready)

    @classmethod
    def chained(cls, runs: list[Progress]) -> Progress:
        """Several runs of one job (restarted after each ended) as one count that only grows: each
        run's steps continue from the last step of the run before it, so a rate taken inside one
        run is that run's own rate."""
        if len(runs) == 1:
            return runs[0]
        chained = cls(ready_t=runs[0].ready_t, setup_t=runs[0].setup_t, source=runs[0].source,
                      no_match=next((run.no_match for run in runs if run.no_match), None))
        offset: float = 0
        for run in runs:
            chained.steps += [(t, step + offset) for t, step in run.steps]
            offset = chained.steps[-1][1] if chained.steps else offset
            chained.bad_lines += run.bad_lines
            chained.skipped_bytes += run.skipped_bytes
            chained.first_problem = chained.first_problem or run.first_problem
            chained.result, chained.error = run.result or chained.result, run.error or chained.error
            chained.cycles += run.cycles
        return chained

    def _reject(self, problem: str) -> None:
        self.bad_lines += 1
        if self.first_problem is None:
            self.first_problem = f"line {self._line}: {problem}" if self._line else problem

    @property
    def problem_note(self) -> Optional[str]:
        """One line about the lines that were ignored or skipped, or None when every line was read."""
        parts = [f"{self.bad_lines} malformed progress line(s) ignored (first: {self.first_problem})"] \
            if self.bad_lines else []
        if self.skipped_bytes:
            what = "log" if self.source == "log" else "progress file"
            parts.append(f"{self.skipped_bytes} bytes of {what} skipped unread: the job wrote faster than they "
                         "could be read (or made its file sparse and huge), so only its newest lines were")
        return "; ".join(parts) or None

    def _add(self, event: dict[str, Any]) -> None:
        kind, t = event.get("event"), event_time(event)
        if kind == "setup":
            self.setup_t = t
        elif kind == "ready" and self.ready_t is None:
            self.ready_t = t
            self._add_step(t, 1)
        elif kind == "step":
            if self.ready_t is None and self.skipped_bytes:
                self.ready_t = t  # its ready event lay in the bytes skipped: it trains since this step at the latest
            self._add_step(t, int(event["step"]))
        elif kind == "result":
            self.result = event
        elif kind == "error":
            self.error = event
        elif kind == "cycle" and len(self.cycles) < MAX_CYCLES:
            self.cycles.append({"t": t, "steps": event.get("steps"), "metrics": event.get("metrics") or {}})
        elif kind == "memory" and len(self.memory) < len(MEMORY_PHASES) * 4:
            self.memory.append({"phase": event["phase"], "t": t, **{key: event[key] for key in MEMORY_FIGURES}})

    def _add_step(self, t: float, step: int) -> None:
        if self.steps and t < self.steps[-1][0]:
            self._reject(f"a step report at t={t} before the one at t={self.steps[-1][0]}")
            return
        self.steps.append((t, step))
        if len(self.steps) > MAX_STEPS:
            last = self.steps[-1]
            self.steps = self.steps[::2]
            if self.steps[-1] is not last:
                self.steps.append(last)

    @property
    def last_t(self) -> Optional[float]:
        return self.steps[-1][0] if self.steps else None

    @property
    def total_steps(self) -> float:
        reported = int(self.result.get("steps") or 0) if self.result else 0
        return max(self.steps[-1][1] if self.steps else 0, reported)

    def steps_at(self, t: float) -> float:
        """Cumulative steps at time ``t``, linearly interpolated between reports."""
        if not self.steps or t <= self.steps[0][0]:
            return 0.0 if not self.steps or t < self.steps[0][0] else float(self.steps[0][1])
        times = [s[0] for s in self.steps]
        i = bisect.bisect_right(times, t)
        if i >= len(self.steps):
            return float(self.steps[-1][1])
        (t0, s0), (t1, s1) = self.steps[i - 1], self.steps[i]
        return s0 + (s1 - s0) * (t - t0) / (t1 - t0) if t1 > t0 else float(s1)

    def steps_between(self, start: float, end: float) -> float:
        return max(0.0, self.steps_at(end) - self.steps_at(start))

    def warm_rate(self) -> Optional[float]:
        """Steps per second over the whole runs a job trained again in its process after its first
        (from the first run's end to the last run's end that was reported), their evaluations and
        restarts included: a kept-running background's pace as it runs beside a foreground, warm.
        None with fewer than two runs ended."""
        if len(self.cycles) < 2:
            return None
        start, end = self.cycles[0]["t"], self.cycles[-1]["t"]
        steps = self.steps_between(start, end)
        return steps / (end - start) if end > start and steps > 0 else None

    def training_rate(self) -> Optional[float]:
        """Steps per second from readiness to the last report: the job's pace, startup excluded.

        Readiness is the first step, so a one-step run has no pace to measure: None, not 0.
        """
        if len(self.steps) < 2:
            return None
        (t0, s0), (t1, s1) = self.steps[0], self.steps[-1]
        if t1 <= t0 or s1 <= s0:
            return None
        return (s1 - s0) / (t1 - t0)


MAX_BACKLOG_BYTES = 64 << 20  # a file further ahead of its reader than this is read from its newest part


class ProgressReader:
    """A job's progress file read as it grows. Each call parses only the lines appended since the
    last one, so polling a run of hours costs what it wrote since, not the whole file again. A line
    still being written is read again when finished; a file replaced or truncated is read anew.
    Callers in several threads (the background loop, the round) share one reader, hence the lock.

    Every call is bounded, whatever the job does to its file: a file more than ``MAX_BACKLOG_BYTES``
    ahead (a flood of lines, or a sparse file ``truncate`` made terabytes long without writing them)
    is read from its newest part, the bytes passed over counted in ``skipped_bytes``; and a line
    longer than any protocol line is refused once and passed over as it grows, never read again
    from its start."""

    def __init__(self, path: str | Path):
        self.path = path
        self._lock = threading.Lock()
        self._start_over(None)

    def _start_over(self, identity: Optional[tuple[int, int]]) -> None:
        self._identity, self._offset, self._progress = identity, 0, Progress()
        self._passing_over = False  # inside a line that is refused (too long) or was cut by a skip

    def read(self, until_ready: bool = False) -> Progress:
        """What the file holds so far, as a ``Progress`` of its own (the reader keeps adding to its copy)."""
        with self._lock:
            try:
                handle = open_regular(self.path)
            except FileNotFoundError:
                return Progress()
            except OSError as exc:
                unreadable = Progress()
                unreadable._reject(f"unreadable ({exc.strerror or exc})")
                return unreadable
            with handle:
                stopped = self._catch_up(handle, until_ready)
                tail = b"" if stopped or self._passing_over else handle.read(MAX_LINE_BYTES + 1)
            return self._snapshot(tail)

    def _catch_up(self, handle: IO[bytes], until_ready: bool) -> bool:
        """Parse the finished lines since the last call, at most ``MAX_BACKLOG_BYTES`` and a line of
        them; True where it stopped at the ready event."""
        info = os.fstat(handle.fileno())
        identity = (info.st_dev, info.st_ino)
        if identity != self._identity or info.st_size < self._offset:
            self._start_over(identity)
        if info.st_size - self._offset > MAX_BACKLOG_BYTES:
            newest = info.st_size - MAX_BACKLOG_BYTES
            self._progress.skipped_bytes += newest - self._offset
            self._offset, self._passing_over = newest, True  # mid-line, most likely: on from the next one
        handle.seek(self._offset)
        budget = info.st_size - self._offset
        while budget > 0:
            line = handle.readline(min(MAX_LINE_BYTES + 1, budget))
            if not line:  # the file shrank since it was measured: read anew next time
                return False
            budget -= len(line)
            if not line.endswith(b"\n") and len(line) <= MAX_LINE_BYTES and not self._passing_over:
                handle.seek(self._offset)  # still being written: read again once it is finished
                return False
            self._offset += len(line)
            if self._take(line) and until_ready:
                return True
        return False

    def _take(self, line: bytes) -> bool:
        """One line read: parsed, refused as too long, or (the rest of a refused line) passed over;
        True once the job is ready."""
        finished = line.endswith(b"\n")
        if self._passing_over:
            self._passing_over = not finished
            return False
        progress = self._progress
        progress._line += 1
        _take_line(progress, line[:MAX_LINE_BYTES], cut=not finished)
        self._passing_over = not finished
        return progress.ready_t is not None

    def _snapshot(self, tail: bytes) -> Progress:
        """A copy of what was read, with a last line that has no newline yet read as the one-off
        reader always did: an event where it parses (a job killed right after writing it), quietly
        nothing where it does not, a problem where it is longer than any protocol line."""
        kept = self._progress
        copy = Progress(ready_t=kept.ready_t, setup_t=kept.setup_t, steps=list(kept.steps), result=kept.result,
                        error=kept.error, bad_lines=kept.bad_lines, first_problem=kept.first_problem,
                        skipped_bytes=kept.skipped_bytes, memory=list(kept.memory), cycles=list(kept.cycles))
        copy._line = kept._line
        if tail.strip():
            copy._line += 1
            if len(tail) > MAX_LINE_BYTES:
                copy._reject(f"a line longer than {MAX_LINE_BYTES} bytes")
            else:
                event, _ = parse_event(tail)
                if event is not None:
                    copy._add(event)
        return copy


def _take_line(progress: Progress, raw: bytes, cut: bool) -> None:
    if cut:
        progress._reject(f"a line longer than {MAX_LINE_BYTES} bytes")
        return
    event, problem = parse_event(raw)
    if problem is not None:
        progress._reject(problem)
    elif event is not None:
        progress._add(event)
