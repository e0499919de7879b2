"""A live status line while a case runs: case i of N, what runs (a solo baseline or the pair) and
its elapsed time, the foreground's epoch and step, power, VRAM, and the estimated time left for the
running job and the session.

Full-scale cases run for minutes to hours with nothing on screen; this says they are alive. It
is drawn only when pytest's own output is a terminal, so CI logs and redirected output never see
it. It writes to the controlling terminal (``/dev/tty``), not to stdout, because pytest captures
stdout while a test runs; it draws to the right of pytest's current line between an ANSI
save-cursor and restore-cursor, so pytest's own output continues where it left off. A daemon
thread draws about once a second from cheap reads (the tail of the progress file, the sampler's
newest sample): the measured jobs never wait on it.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO

from pytest_gpu_pairs.inputs import open_regular
from pytest_gpu_pairs.planning.estimate import clock
from pytest_gpu_pairs.protocol import event_problem

SAVE_CURSOR, RESTORE_CURSOR, ERASE_TO_END = "\0337", "\0338", "\033[K"
TAIL_BYTES = 4096


@dataclass
class Snapshot:
    label: str
    elapsed_s: float
    epoch: Optional[float] = None
    step: Optional[int] = None
    power_w: Optional[float] = None
    vram_mb: Optional[float] = None
    waiting: bool = False
    case: str = ""  # "case 2/12"
    eta: str = ""  # "job ~0:40, session ~12:30"


@dataclass
class CaseContext:
    """Where the session stands: the running case's place and estimate, and the estimates of the
    cases after it."""

    index: int
    total: int
    remaining_estimate_s: float = 0.0
    started: float = 0.0
    estimate_s: float = 0.0


def job_eta_s(epoch: Optional[float], epochs: Optional[float], elapsed_s: float) -> Optional[float]:
    """The running job's time left from its own progress: elapsed x (epochs left / epochs done)."""
    if not epoch or not epochs or epoch <= 0 or epochs <= epoch:
        return None
    return elapsed_s * (epochs - epoch) / epoch


@dataclass(frozen=True)
class Pace:
    """How the session's cases have compared with their estimates: seconds actually taken against
    seconds estimated, over the finished cases, with one typical case of prior belief that the
    estimates are right (``prior_s``), so one odd case moves the ratio only part of the way."""

    actual_s: float = 0.0
    estimate_s: float = 0.0
    prior_s: float = 0.0

    def ratio(self, running_s: float = 0.0, running_estimate_s: float = 0.0) -> float:
        """Actual over estimated, the running case counted for what it has shown: seconds it ran,
        against the part of its estimate they cover (an overrun counts as it grows, an early
        finish only once the case has ended)."""
        shown = min(running_s, running_estimate_s) if running_estimate_s > 0 else 0.0
        counted = running_s if running_estimate_s > 0 else 0.0
        actual, estimate = self.actual_s + counted + self.prior_s, self.estimate_s + shown + self.prior_s
        return actual / estimate if estimate > 0 and actual > 0 else 1.0

    def finished(self, actual_s: float, estimate_s: float) -> Pace:
        return Pace(self.actual_s + actual_s, self.estimate_s + estimate_s, self.prior_s)


def session_eta_s(case: CaseContext, now: float, pace: Pace) -> float:
    """The running case's estimate less what it has run, and the cases after it at their estimates,
    both at the session's pace so far. Only finished time and the running case's own overrun move
    the pace, and an overrun moves it continuously, so the figure falls as time passes and does not
    jump by factors when a round, a solo baseline or a job's epoch begins; the job's own ETA is shown
    beside it, not added to it."""
    running = max(0.0, now - case.started)
    ratio = pace.ratio(running, case.estimate_s)
    return max(0.0, case.estimate_s * ratio - running) + case.remaining_estimate_s * ratio


def last_progress(path: Path) -> Optional[dict[str, Any]]:
    """The newest step (or ready) event of a progress file, reading only its tail."""
    try:
        with open_regular(path) as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            lines = handle.read(TAIL_BYTES).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or an integer of thousands of digits
            continue
        if event_problem(event) is None and event.get("event") in ("step", "ready"):
            return event  # a malformed line (a job's output is untrusted) is passed over
    return None


def snapshot(round_, started: float, now: float) -> Snapshot:
    """What the line shows for a running round of the epoch method (``run.round.Round``), or for an
    interleaved case (``run.interleaved.InterleavedPair``: its ``live_status`` says which phase runs)."""
    fg, bg = _models(round_)
    status = getattr(round_, "live_status", None)
    label = f"{fg}+{bg} {status()}" if status else (f"{fg}+{bg} pair" if bg else f"{fg} solo")
    event = last_progress(Path(getattr(round_, "fg_progress_path", None) or Path(round_.out_dir) / "fg.progress.jsonl"))
    shot = Snapshot(label, now - started, waiting=event is None)
    if event is not None:
        shot.epoch = event.get("epoch")
        shot.step = event.get("step", 1 if event.get("event") == "ready" else None)
    if shot.waiting and bg and not status:
        shot.label = f"{label}: {bg} starting"
    sampler = round_.sampler
    sample = sampler.samples[-1] if sampler is not None and sampler.samples else None
    if sample is not None:
        shot.power_w = sample.power_w
        shot.vram_mb = sample.role_memory_mb(("fg", "bg")) or sample.mem_used_mb
    return shot


def _models(round_) -> tuple[str, Optional[str]]:
    case = getattr(round_, "case", None)
    if case is not None and case.more_bgs:  # a group: every background, bg+bg2
        return case.fg.model, "+".join(case.models[1:])
    fg, bg = (case.fg, case.bg) if case is not None else (round_.fg_job, round_.bg_job)
    return fg.model, bg.model if bg is not None else None


def render(shot: Snapshot, room: int) -> str:
    """The longest form of the line that fits in ``room`` columns ('' when none does)."""
    fg = "foreground starting" if shot.waiting else " ".join(
        part for part in (f"epoch {shot.epoch:.2f}" if shot.epoch is not None else "",
                          f"step {shot.step}" if shot.step is not None else "") if part)
    power = f"{shot.power_w:.0f} W" if shot.power_w is not None else ""
    vram = f"{shot.vram_mb:.0f} MB" if shot.vram_mb is not None else ""
    eta = f"ETA {shot.eta}" if shot.eta else ""
    elapsed = clock(shot.elapsed_s)

    def line(*parts: str) -> str:
        return " | ".join(p for p in parts if p)

    def bracket(*parts: str) -> str:
        return "[" + " ".join(p for p in (*parts, elapsed) if p) + "]"
    candidates = [line(bracket(shot.case, shot.label), f"fg {fg}", eta, power, vram),
                  line(bracket(shot.case, shot.label), f"fg {fg}", eta),
                  line(bracket(shot.case), fg, eta, power, vram),
                  line(bracket(shot.case), fg, eta),
                  bracket()]
    return next((c for c in candidates if len(c) <= room), "")


class LiveLine:
    """Redraws one status line for the round that is running, until that round ends."""

    def __init__(self, stream: TextIO, room: Callable[[], int], interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream, self.room, self.interval_s, self.clock = stream, room, interval_s, clock
        self._round = None
        self._started = 0.0
        self._drawn = False
        self._case: Optional[CaseContext] = None
        self._pace = Pace()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> LiveLine:
        self._thread = threading.Thread(target=self._run, name="gpu-pairs-live", daemon=True)
        self._thread.start()
        return self

    def case_started(self, index: int, total: int, remaining_estimate_s: float, estimate_s: float = 0.0) -> None:
        """Case ``index`` of ``total`` begins, estimated at ``estimate_s``; ``remaining_estimate_s``:
        the estimates of the cases after it. The first case sets the pace's prior: one case of the
        session's mean estimate."""
        with self._lock:
            if not self._pace.prior_s and total:
                self._pace = Pace(prior_s=(estimate_s + remaining_estimate_s) / max(1, total - index + 1))
            self._case = CaseContext(index, total, remaining_estimate_s, self.clock(), estimate_s)

    def case_ended(self, estimate_s: Optional[float]) -> None:
        with self._lock:
            if self._case is not None and estimate_s:
                self._pace = self._pace.finished(self.clock() - self._case.started, estimate_s)
            self._case = None

    def _decorate(self, shot: Snapshot, now: float) -> Snapshot:
        case = self._case
        if case is None:
            return shot
        shot.case = f"case {case.index}/{case.total}"
        # an interleaved case's jobs train until the harness ends them: no epoch count to finish
        fg_job = getattr(self._round, "fg_job", None)
        epochs = fg_job.hyperparameters.get("epochs") if fg_job is not None else None
        job_eta = job_eta_s(shot.epoch, epochs if isinstance(epochs, (int, float)) else None, shot.elapsed_s)
        session = self.session_eta(now)
        parts = ([f"job ~{clock(job_eta)}"] if job_eta is not None else []) + (
            [f"session ~{clock(session)}"] if session > 0 else [])
        shot.eta = ", ".join(parts)
        return shot

    def session_eta(self, now: float) -> float:
        """Seconds the session has left as the line shows them (0 between cases)."""
        return session_eta_s(self._case, now, self._pace) if self._case is not None else 0.0

    def round_started(self, round_) -> None:
        with self._lock:
            self._round, self._started = round_, self.clock()

    def round_ended(self, round_) -> None:
        """Erase the line before pytest writes its result for the test (called in the main thread)."""
        with self._lock:
            if self._round is round_:
                self._round = None
                self._erase()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.draw()

    def draw(self) -> None:
        with self._lock:
            if self._round is None:
                return
            try:
                now = self.clock()
                shot = self._decorate(snapshot(self._round, self._started, now), now)
                text = render(shot, self.room() - 1)
                if text:
                    self._write(f"{SAVE_CURSOR} {text}{ERASE_TO_END}{RESTORE_CURSOR}")
                    self._drawn = True
            except (OSError, ValueError):
                self._round = None

    def _erase(self) -> None:
        if self._drawn:
            self._write(ERASE_TO_END)
            self._drawn = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._round = None
            try:
                self._erase()
            except (OSError, ValueError):
                pass


def _room(reporter) -> Callable[[], int]:
    writer: Any = getattr(reporter, "_tw", None)

    def room() -> int:
        try:
            return int(writer.fullwidth) - int(writer.width_of_current_line)
        except (AttributeError, TypeError, ValueError):
            return 0
    return room


def attach(config, env, session=None) -> Optional[LiveLine]:
    """Start the live line for this session when pytest writes to a terminal; None otherwise."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not reporter.isatty() or getattr(env, "live", None) is not None:
        return None
    try:
        tty = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115 - held open by the live line until it stops
    except OSError:
        return None
    line = LiveLine(tty, _room(reporter)).start()
    env.live = line

    def close() -> None:
        line.close()
        tty.close()
    config.add_cleanup(close)
    return line
