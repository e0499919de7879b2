"""The background load: a training job restarted after every run until the case ends.

The seed tool's bash ``while true`` loop died silently on the first failed run; this loop logs
every run (its own log, start, end, exit code), notices OOM in any run, and stops itself with
a reason when the job crashes over and over instead of spinning.
"""
from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .jobs import JobOutcome, JobProcess, JobSpec
from .workloads.progress import Progress

CRASH_LOOP_FAILURES = 3
CRASH_LOOP_WINDOW_S = 300.0
READY_FALLBACK_S = 5.0


@dataclass
class RunRecord:
    index: int
    outcome: JobOutcome
    ready_t: Optional[float]

    def training_interval(self) -> Optional[tuple[float, float]]:
        """From readiness to the last sign of training (its last step, or its end)."""
        if self.ready_t is None:
            return None
        end = self.outcome.progress.last_t if self.outcome.progress.steps else self.outcome.end_t
        return (self.ready_t, max(self.ready_t, end or self.outcome.end_t))


class ReadinessWatch:
    """Decides when a run is really training: the protocol's ready event, else the workload's
    ``ready_pattern`` in its log, else (documented fallback) the job has printed output and
    stayed alive for ``READY_FALLBACK_S``."""

    def __init__(self, job: JobProcess):
        self.job = job
        self.ready_t: Optional[float] = None
        self._pattern = re.compile(job.spec.ready_pattern) if job.spec.ready_pattern else None

    def check(self) -> Optional[float]:
        if self.ready_t is None:
            self.ready_t = self._detect()
        return self.ready_t

    def _detect(self) -> Optional[float]:
        progress = Progress.read(self.job.progress_path)
        if progress.ready_t is not None:
            return progress.ready_t
        if progress.steps or Path(self.job.progress_path).exists():
            return None  # speaks the protocol: wait for its ready event
        log = self._log_body()
        if self._pattern is not None:
            return time.time() if self._pattern.search(log) else None
        alive_for = time.time() - self.job.start_t
        return time.time() if log.strip() and alive_for >= READY_FALLBACK_S and self.job.poll() is None else None

    def _log_body(self) -> str:
        try:
            text = Path(self.job.log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(line for line in text.splitlines() if not line.startswith("# gpu-pairs:"))


class BackgroundLoop:
    def __init__(self, spec: JobSpec, out_dir: str | Path, restart_delay_s: float,
                 crash_loop_failures: int = CRASH_LOOP_FAILURES, crash_loop_window_s: float = CRASH_LOOP_WINDOW_S,
                 on_start: Callable[[JobProcess], None] = lambda job: None):
        self.spec, self.out_dir, self.on_start = spec, Path(out_dir), on_start
        self.restart_delay_s = restart_delay_s
        self.crash_loop_failures, self.crash_loop_window_s = crash_loop_failures, crash_loop_window_s
        self.runs: list[RunRecord] = []
        self.failure: Optional[str] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._current: Optional[JobProcess] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()

    def start(self) -> "BackgroundLoop":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name=f"gpu-pairs-bg-{self.spec.model}", daemon=True)
        self._thread.start()
        return self

    def wait_ready(self, timeout_s: float) -> bool:
        """True once a run is training; False if the loop failed or ``timeout_s`` passed."""
        deadline = time.time() + timeout_s
        while time.time() < deadline and not self._ready.is_set() and self.failure is None:
            self._ready.wait(0.05)
        return self._ready.is_set()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            current = self._current
        if current is not None:
            current.stop()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
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
                                f"failed runs, last: {record.outcome.reason()}")
                return
            self._stop.wait(self.restart_delay_s)

    def _one_run(self, index: int) -> Optional[RunRecord]:
        stem = self.out_dir / f"bg-run-{index:03d}"
        job = JobProcess(self.spec, f"{stem}.log", f"{stem}.progress.jsonl")
        watch = ReadinessWatch(job)
        with self._lock:
            if self._stop.is_set():
                return None
            job.start()
            self._current = job
        self.on_start(job)
        job.wait(on_tick=lambda: self._note_ready(watch))
        self._note_ready(watch)
        with self._lock:
            self._current = None
        return RunRecord(index, job.outcome(), watch.ready_t)

    def _note_ready(self, watch: ReadinessWatch) -> None:
        if watch.check() is not None:
            self._ready.set()

    def _crash_looping(self) -> bool:
        recent = self.runs[-self.crash_loop_failures:]
        if len(recent) < self.crash_loop_failures or not all(r.outcome.failed for r in recent):
            return False
        return recent[-1].outcome.end_t - recent[0].outcome.start_t <= self.crash_loop_window_s

    def _log_run(self, record: RunRecord) -> None:
        o = record.outcome
        line = {"run": record.index, "start_t": o.start_t, "end_t": o.end_t, "ready_t": record.ready_t,
                "exit_code": o.returncode, "timed_out": o.timed_out, "stopped_by_harness": o.stopped_by_harness,
                "oom": o.oom, "steps": o.progress.total_steps, "log": o.log_path}
        with open(self.out_dir / "bg-runs.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    # --- what the loop did during a window ---------------------------------------------

    def steps_between(self, start: float, end: float) -> float:
        return sum(r.outcome.progress.steps_between(start, end) for r in self.runs)

    def training_intervals(self) -> list[tuple[float, float]]:
        return [iv for iv in (r.training_interval() for r in self.runs) if iv is not None]

    @property
    def failures(self) -> list[RunRecord]:
        return [r for r in self.runs if r.outcome.failed]

    @property
    def ooms(self) -> list[RunRecord]:
        return [r for r in self.runs if r.outcome.oom]
