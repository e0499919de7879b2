"""The background load: a training job restarted after every run until the case ends.

The predecessor tool's bash ``while true`` loop died silently on the first failed run; this loop logs
every run (its own log, start, end, exit code), notices OOM in any run, and stops itself with
a reason when the job crashes over and over instead of spinning.
"""
from __future__ import annotations

import json
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.experiment.schema import DEFAULTS
from pytest_gpu_pairs.inputs import open_regular
from pytest_gpu_pairs.patterns import compile_pattern
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.measurement import BackgroundRun, BackgroundRuns
from pytest_gpu_pairs.run.joblog import HARNESS_LINE, LOG_LINE_BYTES
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec

CRASH_LOOP_FAILURES = DEFAULTS.crash_loop_failures
CRASH_LOOP_WINDOW_S = DEFAULTS.crash_loop_window_s
READY_FALLBACK_S = 5.0
FINISHED_RUN_MIN_S = 2.0  # a run without progress reports that exits 0 sooner did not train
LOG_READ_CHUNK = 1 << 20


class ReadinessWatch:
    """Decides when a run is really training, in this order:

    1. ``protocol``: the progress protocol's ready event (after the first optimiser step); the
       only way for a built-in workload, and for a command workload once its progress file exists;
    2. ``progress_pattern``: a command workload with a progress_pattern is ready at its log's first
       progress line (at its ready_pattern's first match, when it has one too);
    3. ``ready_pattern``: the workload's ``ready_pattern`` matches a line of its log;
    4. ``fallback`` (a command workload with none of these): the job has printed its first line and is
       still alive ``READY_FALLBACK_S`` later, or it exited with code 0 after running at least
       ``FINISHED_RUN_MIN_S`` (it trained, from its first line on: a finished run, restarted as
       usual). One that exits 0 sooner is ready only on its exit (``ready_on_exit``) and counts
       towards the crash loop: it trained nothing a foreground could share the device with.

    The log is read incrementally, so a watch on a long log costs what the new lines cost.
    """

    def __init__(self, job: JobProcess, fallback_s: float = READY_FALLBACK_S):
        self.job, self.fallback_s = job, fallback_s
        self.ready_t: Optional[float] = None
        self.basis: Optional[str] = None
        self.first_output_t: Optional[float] = None
        self.ready_on_exit = False  # ready only because it exited 0: never seen training while it ran
        self._pattern = compile_pattern(job.spec.ready_pattern) if job.spec.ready_pattern else None
        self._offset = 0
        self._partial = ""

    def check(self) -> Optional[float]:
        if self.ready_t is None:
            found = self._detect()
            if found is not None:
                self.ready_t, self.basis = found
        return self.ready_t

    def _detect(self) -> Optional[tuple[float, str]]:
        progress = self.job.progress(until_ready=True)
        if progress.ready_t is not None:
            return progress.ready_t, "protocol" if progress.source == "protocol" else "progress_pattern"
        if self.job.spec.protocol or self.job.spec.progress_pattern or Path(self.job.progress_path).exists():
            return None  # speaks the protocol or prints its progress: wait for its first step
        matched = self._scan_new_output()
        if self._pattern is not None:
            return (now(), "ready_pattern") if matched else None
        return self._fallback()

    def _fallback(self) -> Optional[tuple[float, str]]:
        if self.first_output_t is None:
            return None
        exit_code = self.job.poll()
        if exit_code == 0:
            self.ready_on_exit = self._ran_s() < FINISHED_RUN_MIN_S
            return self.first_output_t, "fallback"
        if exit_code is None and now() - self.first_output_t >= self.fallback_s:
            return now(), "fallback"
        return None

    def _ran_s(self) -> float:
        """How long the job ran, start to exit (to now while its exit is not yet stamped)."""
        return (self.job.exit_t or now()) - self.job.start_t

    def _scan_new_output(self) -> bool:
        """Reads what the log gained since the last call, at most ``LOG_READ_CHUNK``; a log further
        ahead (a flood, a sparse file) is read from its newest chunk. True when ``ready_pattern`` matched."""
        try:
            with open_regular(self.job.log_path) as handle:
                size = os.fstat(handle.fileno()).st_size
                if size - self._offset > 2 * LOG_READ_CHUNK:
                    self._offset, self._partial = size - LOG_READ_CHUNK, ""
                handle.seek(self._offset)
                chunk = handle.read(LOG_READ_CHUNK)
        except OSError:
            return False
        self._offset += len(chunk)
        lines = (self._partial + chunk.decode("utf-8", "replace")).split("\n")
        self._partial = lines.pop()[-LOG_LINE_BYTES:]  # a line without end must not grow without bound
        lines = [line[:LOG_LINE_BYTES] for line in lines]
        own = [line for line in lines + [self._partial] if line.strip() and not line.startswith(HARNESS_LINE)]
        if own and self.first_output_t is None:
            self.first_output_t = now()
        return self._pattern is not None and any(self._pattern.search(line) for line in own)


def _trained_too_briefly(outcome, ready_t: Optional[float], basis: Optional[str]) -> bool:
    """A run that ended on its own with exit code 0 less than ``FINISHED_RUN_MIN_S`` after it said it
    was ready (a ready event, a progress line, its ready_pattern) and sooner than it took to become
    ready: it spent more time starting than training, and restarted without end it would leave the
    case a storm of start-ups (coverage near 0) that passes. (A run ready by the fallback has its
    own rule: ``ReadinessWatch.ready_on_exit``.)"""
    if basis == "fallback" or not outcome.completed or ready_t is None or outcome.end_t is None:
        return False
    trained = outcome.end_t - ready_t
    return trained < FINISHED_RUN_MIN_S and trained < ready_t - outcome.start_t


def _run_reason(run: BackgroundRun, ready_rule: str) -> str:
    """Why a run counts towards the crash loop: how it failed, that it trained too briefly, or that
    it ended before it was ready (and, where its log had lines its progress_pattern read nothing
    from, that)."""
    if run.outcome.failed or not run.ended_unready:
        return run.outcome.reason()
    if run.ready_t is not None and run.outcome.end_t is not None and \
            _trained_too_briefly(run.outcome, run.ready_t, run.ready_basis):
        return (f"exited with code 0 {run.outcome.end_t - run.ready_t:.2f} s after it was ready, less than "
                f"{FINISHED_RUN_MIN_S:g} s and less than the {run.ready_t - run.outcome.start_t:.2f} s it took to start: "
                "each run trains too little for a foreground to share the device with; give each run more work "
                f"(more epochs or steps); log: {run.outcome.log_path}")
    missed = f"; its log had lines but {run.outcome.progress.no_match}" if run.outcome.progress.no_match else ""
    return (f"exited with code {run.outcome.returncode} before it was ready ({ready_rule}{missed}); "
            f"log: {run.outcome.log_path}")


_LOOPS: weakref.WeakSet[BackgroundLoop] = weakref.WeakSet()


def stop_all_loops() -> int:
    """Stop every background loop still running (before killing jobs: a loop would restart them)."""
    loops = [loop for loop in list(_LOOPS) if loop.running]
    for loop in loops:
        loop.stop()
    return len(loops)


class BackgroundLoop:
    def __init__(self, spec: JobSpec, out_dir: str | Path, restart_delay_s: float,
                 crash_loop_failures: int = CRASH_LOOP_FAILURES, crash_loop_window_s: float = CRASH_LOOP_WINDOW_S,
                 on_start: Callable[[JobProcess], None] = lambda job: None):
        self.spec, self.out_dir, self.on_start = spec, Path(out_dir), on_start
        self.restart_delay_s = restart_delay_s
        self.crash_loop_failures, self.crash_loop_window_s = crash_loop_failures, crash_loop_window_s
        self.runs: list[BackgroundRun] = []
        self.failure: Optional[str] = None
        self.started_t: Optional[float] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._current: Optional[JobProcess] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._ready_t: Optional[float] = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def ready_t(self) -> Optional[float]:
        """When the first run became ready (None until then)."""
        return self._ready_t

    def start(self) -> BackgroundLoop:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.started_t = now()
        self._thread = threading.Thread(target=self._loop, name=f"gpu-pairs-bg-{self.spec.model}", daemon=True)
        _LOOPS.add(self)
        self._thread.start()
        return self

    def wait_ready(self, timeout_s: float) -> bool:
        """True once a run is training; False if the loop failed or ``timeout_s`` passed."""
        deadline = now() + timeout_s
        while now() < deadline and not self._ready.is_set() and self.failure is None:
            self._ready.wait(0.05)
        return self._ready.is_set()

    def not_ready_reason(self, timeout_s: float) -> str:
        """Why ``wait_ready`` gave up, in words that point at the logs."""
        if self.failure:
            return self.failure
        runs = list(self.runs)
        what = f"{len(runs)} finished run(s)" + (f", last: {runs[-1].outcome.reason()}" if runs else "")
        return (f"background {self.spec.model} did not become ready within {timeout_s:g} s ({what}); "
                f"readiness comes from {self._readiness_source()}{self._missed()}; see {self.out_dir}/bg-run-*.log")

    def _missed(self) -> str:
        """What the running (else the last) run's progress_pattern missed, where its log had lines."""
        with self._lock:
            current = self._current
        progress = current.progress() if current is not None else (self.runs[-1].outcome.progress if self.runs else None)
        return f"; its log had lines but {progress.no_match}" if progress is not None and progress.no_match else ""

    def _readiness_source(self) -> str:
        if self.spec.ready_pattern:
            return f"its ready_pattern {self.spec.ready_pattern!r}"
        if self.spec.progress_pattern:
            return f"the first log line its progress_pattern {self.spec.progress_pattern!r} matches"
        return "its progress protocol's ready event or the documented fallback"

    def runs_ended_in_process(self) -> int:
        """How many runs the running process has trained to their end (a kept-running background
        reports each as a cycle); 0 with none running."""
        with self._lock:
            current = self._current
        return len(current.progress().cycles) if current is not None else 0

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            current = self._current
        if current is not None:
            current.stop()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        try:
            self._run_until_stopped()
        except Exception as exc:  # a loop that dies silently is what this module exists to prevent
            self.failure = f"background loop of {self.spec.model} failed: {type(exc).__name__}: {exc}"
            with self._lock:
                current = self._current
            if current is not None:
                current.stop()

    def _run_until_stopped(self) -> None:
        index = 0
        while not self._stop.is_set():
            index += 1
            record = self._one_run(index)
            if record is None:
                return
            self.runs.append(record)
            self._log_run(record)
            if self._crash_looping():
                self.failure = (f"background {self.spec.model} crash-looped: {self.crash_loop_failures} consecutive "
                                f"runs that failed or ended before they were ready within "
                                f"{self.crash_loop_window_s:g} s, last: {_run_reason(record, self._ready_rule())}")
                return
            self._stop.wait(self.restart_delay_s)

    def _one_run(self, index: int) -> Optional[BackgroundRun]:
        stem = self.out_dir / f"bg-run-{index:03d}"
        job = JobProcess(self.spec, f"{stem}.log", f"{stem}.progress.jsonl")
        watch = ReadinessWatch(job)
        with self._lock:
            if self._stop.is_set():
                return None
            job.start()
            self._current = job
        if job.pid is not None:
            self.on_start(job)
        job.wait(on_tick=lambda: self._note_ready(watch))
        self._note_ready(watch)
        with self._lock:
            self._current = None
        outcome = job.outcome()
        unready = not outcome.stopped_by_harness and (watch.ready_t is None or watch.ready_on_exit
                                                      or _trained_too_briefly(outcome, watch.ready_t, watch.basis))
        return BackgroundRun(index, outcome, watch.ready_t, watch.basis, unready)

    def _note_ready(self, watch: ReadinessWatch) -> None:
        if watch.check() is not None and not self._ready.is_set():
            self._ready_t = watch.ready_t
            self._ready.set()

    def _crash_looping(self) -> bool:
        recent = self.runs[-self.crash_loop_failures:]
        if len(recent) < self.crash_loop_failures or not all(r.outcome.failed or r.ended_unready for r in recent):
            return False
        return recent[-1].outcome.end_t - recent[0].outcome.start_t <= self.crash_loop_window_s

    def _log_run(self, record: BackgroundRun) -> None:
        o = record.outcome
        line = {"run": record.index, "start_t": o.start_t, "end_t": o.end_t, "ready_t": record.ready_t,
                "ready_basis": record.ready_basis, "exit_code": o.returncode, "timed_out": o.timed_out,
                "stopped_by_harness": o.stopped_by_harness, "oom": o.oom, "failed": o.failed, "ended_unready": record.ended_unready,
                "reason": o.reason(), "steps": o.progress.total_steps, "log": o.log_path}
        with open(self.out_dir / "bg-runs.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    def _ready_rule(self) -> str:
        if self.spec.protocol:
            return "no ready event"
        if self.spec.ready_pattern:
            return "no ready event and no line matching its ready_pattern"
        if self.spec.progress_pattern:
            return "no ready event and no step read with its progress_pattern"
        return (f"no ready event, not {READY_FALLBACK_S:g} s alive after its first line, and not "
                f"{FINISHED_RUN_MIN_S:g} s run before its exit")

    def snapshot(self) -> BackgroundRuns:
        """What the loop has done so far, as plain values: records are built from this, never from
        the live loop and its thread."""
        return BackgroundRuns(tuple(self.runs), self.failure)
