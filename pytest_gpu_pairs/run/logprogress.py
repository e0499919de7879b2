"""Progress from a job's own log: its ``progress_pattern`` matched line by line, each line stamped with
the time it arrived, into the same ``Progress`` the protocol gives (ready time, (t, step) pairs).

Every consumer of progress (readiness, the training window, steps in a window, interleaved phases)
then works unchanged for a script that only prints. A thread follows the growing log, so a line's
time is when it was written give or take one poll, however seldom the harness asks; lines are
split at ``\\n`` and at ``\\r`` (progress bars redraw themselves with ``\\r``).
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.patterns import compile_pattern
from pytest_gpu_pairs.protocol import STEP_INTERVAL_S, Progress
from pytest_gpu_pairs.run.joblog import HARNESS_LINE

POLL_S = 0.05
READ_CHUNK = 1 << 20
MAX_LINE_BYTES = 64 * 1024  # a longer line is matched on its start; the rest up to its end is skipped


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text.replace(",", "")) if text is not None else None
    except ValueError:
        return None


def _plain(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


class LogProgress:
    """Lines in arrival order -> ``Progress``; no I/O. The groups' meaning is in
    ``experiment.logformats.GROUPS``. Steps only grow: a line that would count backwards (another
    progress bar, a restarted counter) is not counted. Points are kept ``STEP_INTERVAL_S`` apart (the
    newest one always), so a job printing every millisecond costs what the protocol costs."""

    def __init__(self, pattern: str, ready_pattern: Optional[str] = None):
        self._pattern = compile_pattern(pattern)
        self._ready = compile_pattern(ready_pattern) if ready_pattern else None
        self._groups = set(self._pattern.groupindex)
        self.ready_t: Optional[float] = None
        self.steps: list[tuple[float, float | int]] = []
        self._total: Optional[float] = None
        self._first_epoch: Optional[float] = None
        self._last_batch: Optional[float] = None
        self._rollovers = 0

    def feed(self, line: str, t: float) -> None:
        if line.startswith(HARNESS_LINE):
            return
        if self._ready is not None and self.ready_t is None and self._ready.search(line):
            self.ready_t = t
        match = self._pattern.search(line)
        step = self._step_of(match.groupdict()) if match else None
        if step is not None and (not self.steps or step >= self.steps[-1][1]):
            self._add(t, _plain(step))

    def _step_of(self, values: dict[str, Optional[str]]) -> Optional[float]:
        numbers = {name: _number(text) for name, text in values.items()}
        if "step" in self._groups:
            return self._counted_step(numbers["step"], numbers.get("total"))
        if "batch" in self._groups:
            return self._position(numbers["batch"], numbers["batches"], numbers.get("epoch"))
        return numbers["epoch"]

    def _counted_step(self, step: Optional[float], total: Optional[float]) -> Optional[float]:
        if "total" in self._groups:
            if total is None:
                return None
            if self._total is None:
                self._total = total
            if total != self._total:
                return None  # another progress bar (evaluation) than the first one seen
        return step

    def _position(self, batch: Optional[float], batches: Optional[float], epoch: Optional[float]) -> Optional[float]:
        """Steps since the first line: whole epochs since the first one seen, plus the position in this one.
        Without an epoch group, a position lower than the last one starts the next epoch."""
        if batch is None or not batches:
            return None
        if "epoch" in self._groups:
            if epoch is None:
                return None
            self._first_epoch = epoch if self._first_epoch is None else self._first_epoch
            return (epoch - self._first_epoch) * batches + batch
        if self._last_batch is not None and batch < self._last_batch:
            self._rollovers += 1
        self._last_batch = batch
        return self._rollovers * batches + batch

    def _add(self, t: float, step: float | int) -> None:
        """The newest point always stands last; it stays once it is ``STEP_INTERVAL_S`` after the one
        before it, else the next line replaces it (as a line read at the same moment does)."""
        pending_too_close = len(self.steps) >= 2 and self.steps[-1][0] - self.steps[-2][0] < STEP_INTERVAL_S
        if self.steps and (t == self.steps[-1][0] or pending_too_close):
            self.steps[-1] = (t, step)
        else:
            self.steps.append((t, step))

    def progress(self) -> Progress:
        """What the log said so far. Readiness is the ready_pattern's first match when the
        workload has one, else the first progress line."""
        ready_t = self.ready_t if self._ready is not None else (self.steps[0][0] if self.steps else None)
        return Progress(ready_t=ready_t, steps=list(self.steps), source="log")


class LogFollower:
    """Follows a growing log in a thread of its own until ``stop``; ``poll`` is what the thread
    calls, public so that a test can drive it with its own clock."""

    def __init__(self, log_path: str | Path, parser: LogProgress, poll_s: float = POLL_S,
                 clock: Callable[[], float] = time.time):
        self.log_path, self.parser, self.poll_s, self.clock = Path(log_path), parser, poll_s, clock
        self._offset = 0
        self._partial = b""
        self._skipping = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> LogFollower:
        self._thread = threading.Thread(target=self._follow, name=f"gpu-pairs-log-{self.log_path.name}", daemon=True)
        self._thread.start()
        return self

    def _follow(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def stop(self, until: Optional[float] = None) -> None:
        """Stop following after one last read; lines found then arrived no later than ``until``
        (the job's exit), when that is known."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.poll(None if until is None else min(until, self.clock()))

    def poll(self, t: Optional[float] = None) -> None:
        """Reads what the log gained; every complete line is stamped with the time of this read."""
        with self._lock:
            while True:
                try:
                    with open(self.log_path, "rb") as handle:
                        handle.seek(self._offset)
                        chunk = handle.read(READ_CHUNK)
                except OSError:
                    return
                if not chunk:
                    return
                self._offset += len(chunk)
                self._feed(chunk, self.clock() if t is None else t)

    def _feed(self, chunk: bytes, t: float) -> None:
        lines = (self._partial + chunk).replace(b"\r", b"\n").split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            if not self._skipping:
                self.parser.feed(raw[:MAX_LINE_BYTES].decode("utf-8", "replace"), t)
            self._skipping = False
        if len(self._partial) > MAX_LINE_BYTES:
            if not self._skipping:
                self.parser.feed(self._partial[:MAX_LINE_BYTES].decode("utf-8", "replace"), t)
            self._partial, self._skipping = b"", True

    def progress(self) -> Progress:
        with self._lock:
            return self.parser.progress()


def save(progress: Progress, path: str | Path) -> None:
    """What was read from the log, beside it, as protocol-style lines (what the figures used)."""
    lines = [{"event": "ready", "t": progress.ready_t}] if progress.ready_t is not None else []
    lines += [{"event": "step", "step": step, "t": t} for t, step in progress.steps]
    with contextlib.suppress(OSError):
        Path(path).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def load(path: str | Path) -> Progress:
    """``save``'s file read back exactly (``Progress.read`` would count its ready line as a step)."""
    progress = Progress(source="log")
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        event: dict[str, Any] = json.loads(line)
        if event["event"] == "ready":
            progress.ready_t = event["t"]
        else:
            progress.steps.append((event["t"], event["step"]))
    return progress
