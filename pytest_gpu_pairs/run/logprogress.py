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
import math
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.inputs import open_regular
from pytest_gpu_pairs.patterns import compile_pattern
from pytest_gpu_pairs.protocol import MAX_COUNT, MAX_STEPS, STEADY_STEP_INTERVAL_S, Progress, now
from pytest_gpu_pairs.run.joblog import HARNESS_LINE

POLL_S = 0.01  # a line is stamped when it is read: within 10 ms of being written
READ_CHUNK = 64 * 1024  # thousands of lines: tens of milliseconds of matching, the lock held meanwhile
CHUNKS_PER_POLL = 16  # a poll reads at most this many chunks, the lock taken for one at a time
MAX_BACKLOG_BYTES = 32 * READ_CHUNK  # a log further ahead than this is skipped to its newest chunk
MAX_LINE_BYTES = 64 * 1024  # a longer line is matched on its start; the rest up to its end is skipped
MAX_NUMBER_CHARS = 32  # a step, batch or epoch written with more characters is no count of a training
QUOTED_CHARS = 160  # of the line quoted where the pattern matched none
MAX_SHAPES = 256  # kinds of unmatched line counted; a log of ever new shapes costs no more
_DIGITS = re.compile(r"\d+")


def _number(text: Optional[str]) -> Optional[float]:
    """A captured count as a number, or None: not a number, or one no training reaches (hundreds of
    digits would overflow every rate computed from it; ``1e400`` reads as Infinity)."""
    if text is None or len(text) > MAX_NUMBER_CHARS:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) <= MAX_COUNT else None


def _plain(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


class LogProgress:
    """Lines in arrival order -> ``Progress``; no I/O. The groups' meaning is in
    ``experiment.logformats.GROUPS``. Steps only grow: a line that would count backwards (another
    progress bar, a restarted counter) is not counted. Points are kept ``STEADY_STEP_INTERVAL_S`` apart (the
    newest one always), so a job printing every millisecond costs what the protocol costs."""

    def __init__(self, pattern: str, ready_pattern: Optional[str] = None):
        self._text = pattern
        self._pattern = compile_pattern(pattern)
        self._ready = compile_pattern(ready_pattern) if ready_pattern else None
        self.lines = 0  # of the job's own, not blank
        self._unmatched: dict[str, list] = {}  # shape (digits as #) -> [count, first line of that shape]
        self._groups = set(self._pattern.groupindex)
        self.ready_t: Optional[float] = None
        self.steps: list[tuple[float, float | int]] = []
        self._total: Optional[float] = None
        self._first_epoch: Optional[float] = None
        self._last_batch: Optional[float] = None
        self._rollovers = 0
        self.skipped_bytes = 0  # of a log that ran ahead of the reader (see ``LogFollower``)

    def feed(self, line: str, t: float) -> None:
        if line.startswith(HARNESS_LINE):
            return
        if self._ready is not None and self.ready_t is None and self._ready.search(line):
            self.ready_t = t
        match = self._pattern.search(line)
        if line.strip():
            self.lines += 1
            if match is None and not self.steps:  # once a step is read the pattern works: no cost on later lines
                self._keep_unmatched(line.strip())
        step = self._step_of(match.groupdict()) if match else None
        if step is not None and math.isfinite(step) and 0 <= step <= MAX_COUNT \
                and (not self.steps or step >= self.steps[-1][1]):
            self._add(t, _plain(step))

    def _keep_unmatched(self, line: str) -> None:
        """Lines the pattern missed, counted by shape (their digits as ``#``): the line quoted is the
        first of the most frequent shape, which is what a job prints at every step, not its banner."""
        shape = _DIGITS.sub("#", line)[:QUOTED_CHARS]
        if shape in self._unmatched:
            self._unmatched[shape][0] += 1
        elif len(self._unmatched) < MAX_SHAPES:
            self._unmatched[shape] = [1, line[:QUOTED_CHARS]]

    def no_match(self) -> Optional[str]:
        """Where the log had lines and the pattern found no step in any: that, and a line it missed."""
        if self.steps or not self.lines:
            return None
        counted = max(self._unmatched.values(), key=lambda entry: entry[0], default=None)
        quoted = f"; one of them: {counted[1]!r}" if counted is not None else ""
        return f"its progress_pattern {self._text!r} matched no step in the {self.lines} line(s) of its log{quoted}"

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
        """The newest point always stands last; it stays once it is ``STEADY_STEP_INTERVAL_S`` after the one
        before it, else the next line replaces it (as a line read at the same moment does)."""
        pending_too_close = len(self.steps) >= 2 and self.steps[-1][0] - self.steps[-2][0] < STEADY_STEP_INTERVAL_S
        if self.steps and (t == self.steps[-1][0] or pending_too_close):
            self.steps[-1] = (t, step)
        else:
            self.steps.append((t, step))
        if len(self.steps) > MAX_STEPS:  # as the protocol's reader: every other point, the newest kept
            self.steps = self.steps[:-1:2] + [self.steps[-1]]

    def progress(self) -> Progress:
        """What the log said so far. Readiness is the ready_pattern's first match when the
        workload has one, else the first progress line."""
        ready_t = self.ready_t if self._ready is not None else (self.steps[0][0] if self.steps else None)
        return Progress(ready_t=ready_t, steps=list(self.steps), source="log", skipped_bytes=self.skipped_bytes,
                        no_match=self.no_match())


class LogFollower:
    """Follows a growing log in a thread of its own until ``stop``; ``poll`` is what the thread
    calls, public so that a test can drive it with its own clock.

    Every poll is bounded: at most ``CHUNKS_PER_POLL`` chunks, the lock held for one chunk at a time,
    so ``progress`` (phase switching, timeouts, teardown) never waits for more than one chunk's
    lines. A job that prints faster than that (tens of thousands of lines a second) leaves the
    reader behind; once the log is ``MAX_BACKLOG_BYTES`` ahead, the reader skips to its newest chunk
    (the bytes skipped are counted and noted in the record), so the lines it reads are the newest,
    stamped when they arrived, and memory and time stay bounded however fast the log grows.
    """

    def __init__(self, log_path: str | Path, parser: LogProgress, poll_s: float = POLL_S,
                 clock: Callable[[], float] = now):
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
        """Stop following after a last read up to the log's size now (a leftover still writing
        cannot keep it reading); lines found then arrived no later than ``until`` (the job's
        exit), when that is known."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        t = None if until is None else min(until, self.clock())
        end = self._size()
        while self._offset < end and self._read_chunk(t):
            pass

    def poll(self, t: Optional[float] = None) -> None:
        """Reads what the log gained, at most ``CHUNKS_PER_POLL`` chunks; every complete line is
        stamped with the time of its chunk's read."""
        for _ in range(CHUNKS_PER_POLL):
            if not self._read_chunk(t):
                return

    def _size(self) -> int:
        try:
            return os.stat(self.log_path).st_size
        except OSError:
            return 0

    def _read_chunk(self, t: Optional[float]) -> bool:
        """One chunk read and fed under the lock; False when there was nothing (more) to read."""
        with self._lock:
            try:
                with open_regular(self.log_path) as handle:
                    self._skip_backlog(os.fstat(handle.fileno()).st_size)
                    handle.seek(self._offset)
                    chunk = handle.read(READ_CHUNK)
            except OSError:
                return False
            if not chunk:
                return False
            self._offset += len(chunk)
            self._feed(chunk, self.clock() if t is None else t)
            return True

    def _skip_backlog(self, size: int) -> None:
        if size - self._offset <= MAX_BACKLOG_BYTES:
            return
        target = size - READ_CHUNK
        self.parser.skipped_bytes += target - self._offset + len(self._partial)
        self._offset, self._partial, self._skipping = target, b"", True

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
    with open_regular(path) as handle:
        text = handle.read().decode("utf-8")
    for line in text.splitlines():
        event: dict[str, Any] = json.loads(line)
        if event["event"] == "ready":
            progress.ready_t = event["t"]
        else:
            progress.steps.append((event["t"], event["step"]))
    return progress
