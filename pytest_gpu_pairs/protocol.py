"""The progress protocol: JSON lines a job appends to ``$GPU_PAIRS_PROGRESS``.

Both sides live here and neither imports torch: the writer runs inside the job, the reader in
the harness. Readiness ("the background is really training") and background progress during
the foreground window are read from these lines, not guessed from sleeps.
"""
from __future__ import annotations

import bisect
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ENV_VAR = "GPU_PAIRS_PROGRESS"
GATE_VAR = "GPU_PAIRS_START_GATE"
STEP_INTERVAL_S = 0.25


def wait_for_start_gate(poll_s: float = 0.01) -> None:
    """Hold the first training step until the harness creates the gate file.

    The harness starts the foreground while the background is still starting up and opens the
    gate once the background trains: the foreground's seconds of imports and CUDA setup then
    overlap the background's, and its first step meets a background that is really training.
    """
    path = os.environ.get(GATE_VAR)
    while path and not os.path.exists(path):
        time.sleep(poll_s)


class ProgressWriter:
    """Appends events; step events are throttled to one per ``STEP_INTERVAL_S``.

    ``sync`` is called before each written step so that a step counted is a step the device
    has finished (CUDA queues run ahead of Python by up to hundreds of kernels).
    """

    def __init__(self, path: Optional[str], sync: Callable[[], None] = lambda: None, clock=time.time):
        self._file = open(path, "a", buffering=1, encoding="utf-8") if path else None  # noqa: SIM115 - the job's lifetime
        self._sync, self._clock = sync, clock
        self._last_step_t = 0.0

    @classmethod
    def from_env(cls, sync: Callable[[], None] = lambda: None) -> ProgressWriter:
        return cls(os.environ.get(ENV_VAR), sync)

    def _emit(self, event: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps({**event, "t": self._clock()}) + "\n")
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
        if force or self._clock() - self._last_step_t >= STEP_INTERVAL_S:
            self._sync()
            self._emit({"event": "step", "step": step, "epoch": round(epoch, 4)})
            self._last_step_t = self._clock()

    def result(self, metrics: dict[str, Any], steps: int, peak_mem_reserved_mb: Optional[float], **extra) -> None:
        self._sync()
        self._emit({"event": "result", "metrics": metrics, "steps": steps,
                    "peak_mem_reserved_mb": peak_mem_reserved_mb, **extra})

    def error(self, message: str, oom: bool) -> None:
        self._emit({"event": "error", "oom": oom, "message": message[-2000:]})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class Progress:
    """What a job reported, parsed tolerantly (a killed job leaves a half-written last line)."""

    ready_t: Optional[float] = None
    setup_t: Optional[float] = None
    steps: list[tuple[float, int]] = field(default_factory=list)
    result: Optional[dict[str, Any]] = None
    error: Optional[dict[str, Any]] = None
    source: str = "protocol"  # or "log": read from the job's log with its progress_pattern

    @classmethod
    def read(cls, path: str | Path) -> Progress:
        progress = cls()
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return progress
        for line in lines:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            progress._add(event)
        return progress

    def _add(self, event: dict[str, Any]) -> None:
        kind, t = event.get("event"), event.get("t")
        if kind == "setup":
            self.setup_t = t
        elif kind == "ready" and self.ready_t is None:
            self.ready_t = t
            self.steps.append((t, 1))
        elif kind == "step":
            self.steps.append((t, int(event["step"])))
        elif kind == "result":
            self.result = event
        elif kind == "error":
            self.error = event

    @property
    def last_t(self) -> Optional[float]:
        return self.steps[-1][0] if self.steps else None

    @property
    def total_steps(self) -> int:
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
