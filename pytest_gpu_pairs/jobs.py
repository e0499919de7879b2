"""Training jobs as supervised processes.

Every job runs from an argv list (no shell ever interprets a settings value) in a session of its
own, so that the harness can always take down the whole tree: a train.sh, the python it starts
and that python's data-loader workers. Every live job is in a registry that the plugin empties
on any exit path (teardown, Ctrl-C, SIGTERM).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import psutil

from .cases import JobConfig
from .workloads.progress import ENV_VAR, Progress

OOM_PATTERN = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation|CUDA error: out of memory|RESOURCE_EXHAUSTED: Out of memory"
    r"|DefaultCPUAllocator: can't allocate memory")
LOG_TAIL_BYTES = 256 * 1024
KILL_GRACE_S = 5.0


@dataclass
class JobSpec:
    role: str
    model: str
    argv: list[str]
    env: dict[str, str]
    cwd: Optional[str]
    timeout_s: float
    ready_pattern: Optional[str] = None
    log_patterns: dict[str, str] = field(default_factory=dict)


def _flag_arguments(command_hparams: dict[str, Any], values: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for name, value in values.items():
        flag = command_hparams[name].flag if name in command_hparams else None
        if flag is None:
            continue
        if isinstance(value, bool):
            args += [flag] if value else []
        else:
            args += [flag, str(value)]
    return args


def build_spec(job: JobConfig, role: str, device: str, scale: float, timeout_s: float,
               extra_env: Optional[dict[str, str]] = None) -> JobSpec:
    """Command line and environment of one job; the environment is the harness's plus job keys."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    if job.is_builtin:
        argv = [sys.executable, "-m", "pytest_gpu_pairs.workloads", job.model,
                "--device", device, "--scale", repr(float(scale))]
        for name, value in job.hparams:
            argv += [f"--{name}", str(value)]
        return JobSpec(role, job.model, argv, env, None, timeout_s)
    command = job.command
    env.update(command.env)
    cwd = str(Path(job.base_dir, command.cwd)) if command.cwd else job.base_dir or None
    argv = list(command.command) + _flag_arguments(command.hyperparameters, job.hyperparameters)
    return JobSpec(role, job.model, argv, env, cwd, timeout_s, command.ready_pattern, dict(command.log_patterns))


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
    log_metrics: dict[str, float] = field(default_factory=dict)

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
    def failed(self) -> bool:
        return not self.stopped_by_harness and (self.timed_out or self.oom or self.returncode != 0)

    def reason(self) -> str:
        if self.oom:
            return f"out of memory ({self.oom_message}); log: {self.log_path}"
        if self.timed_out:
            return f"timed out and was killed; log: {self.log_path}"
        if self.returncode not in (0, None) and not self.stopped_by_harness:
            return f"exited with code {self.returncode}; log: {self.log_path}"
        return "ok"


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def detect_oom(log_path: str, progress: Progress) -> Optional[str]:
    """The out-of-memory message of a job, from its progress error event or its log."""
    if progress.error and progress.error.get("oom"):
        return progress.error.get("message", "out of memory").strip().splitlines()[-1][:300]
    found = OOM_PATTERN.search(_log_tail(log_path))
    return found.group(0) if found else None


def metrics_from_log(log_path: str, patterns: dict[str, str]) -> dict[str, float]:
    """A command workload's metrics: for each ``log_patterns`` entry, the last match's first
    group in the job's log (a final report comes last), as a number; unmatched names are absent."""
    if not patterns:
        return {}
    text = _log_tail(log_path)
    found: dict[str, float] = {}
    for name, pattern in patterns.items():
        for match in re.finditer(pattern, text):
            try:
                found[name] = float(match.group(1))
            except (TypeError, ValueError):
                continue
    return found


_LIVE: set["JobProcess"] = set()
_LIVE_LOCK = threading.Lock()


def live_jobs() -> list["JobProcess"]:
    with _LIVE_LOCK:
        return list(_LIVE)


def kill_all_jobs() -> int:
    """Kill every job tree still running; the last line of defence on any way out of pytest."""
    jobs = live_jobs()
    for job in jobs:
        job.kill_tree(grace_s=2.0)
    return len(jobs)


class JobProcess:
    """One job process tree: started in its own session, logged, timed out, killed as a whole."""

    def __init__(self, spec: JobSpec, log_path: str | Path, progress_path: str | Path):
        self.spec = spec
        self.log_path, self.progress_path = str(log_path), str(progress_path)
        self.popen: Optional[subprocess.Popen] = None
        self.start_t = self.end_t = 0.0
        self.timed_out = self.stopped_by_harness = False

    @property
    def pid(self) -> Optional[int]:
        return self.popen.pid if self.popen else None

    def start(self) -> "JobProcess":
        Path(self.progress_path).unlink(missing_ok=True)
        env = {**self.spec.env, ENV_VAR: self.progress_path}
        with open(self.log_path, "ab") as log:
            log.write(f"# gpu-pairs: start {time.strftime('%Y-%m-%dT%H:%M:%S%z')} "
                      f"cwd={self.spec.cwd or os.getcwd()} argv={self.spec.argv}\n".encode())
            log.flush()
            with _LIVE_LOCK:
                self.start_t = time.time()
                self.popen = subprocess.Popen(self.spec.argv, cwd=self.spec.cwd, env=env, stdin=subprocess.DEVNULL,
                                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                _LIVE.add(self)
        return self

    def poll(self) -> Optional[int]:
        return self.popen.poll() if self.popen else None

    def wait(self, timeout: Optional[float] = None, on_tick: Optional[Callable[[], None]] = None,
             tick_s: float = 0.1) -> Optional[int]:
        """Wait for the job; past ``timeout`` (or the spec's) the tree is killed and marked timed out.

        ``on_tick`` runs every ``tick_s`` while waiting, for watchers that must see the job live
        (readiness from a log pattern has no timestamp of its own).
        """
        limit = self.spec.timeout_s if timeout is None else timeout
        deadline = self.start_t + limit
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                self.timed_out = True
                self.kill_tree()
                break
            try:
                self.popen.wait(timeout=min(remaining, tick_s) if on_tick else remaining)
                break
            except subprocess.TimeoutExpired:
                if on_tick:
                    on_tick()
        self._finish()
        return self.popen.returncode

    def stop(self) -> None:
        """End a job the harness no longer needs (a background run at the end of a case)."""
        if self.popen and self.popen.poll() is None:
            self.stopped_by_harness = True
        self.kill_tree()

    def kill_tree(self, grace_s: float = KILL_GRACE_S) -> None:
        if self.popen is None:
            return
        descendants = self._descendants()
        self._signal_all(signal.SIGTERM, descendants)
        deadline = time.monotonic() + grace_s
        try:
            self.popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        _, alive = psutil.wait_procs(descendants, timeout=max(0.0, deadline - time.monotonic()))
        if self.popen.poll() is None or alive or self._group_alive():
            self._signal_all(signal.SIGKILL, alive)
            self.popen.wait()
            psutil.wait_procs(alive, timeout=grace_s)
        self._finish()

    def _descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.popen.pid).children(recursive=True)
        except psutil.Error:
            return []

    def _signal_all(self, sig: int, processes: list[psutil.Process]) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for process in processes:
            try:
                process.send_signal(sig)
            except psutil.Error:
                pass

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.popen.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _finish(self) -> None:
        with _LIVE_LOCK:
            if self in _LIVE:
                _LIVE.discard(self)
                self.end_t = time.time()
                self._log_footer()

    def _log_footer(self) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"\n# gpu-pairs: end {time.strftime('%Y-%m-%dT%H:%M:%S%z')} "
                      f"exit={self.popen.returncode} timed_out={self.timed_out} "
                      f"stopped_by_harness={self.stopped_by_harness}\n".encode())

    def outcome(self) -> JobOutcome:
        progress = Progress.read(self.progress_path)
        oom = detect_oom(self.log_path, progress)
        return JobOutcome(self.spec.role, self.spec.model, self.spec.argv, self.log_path, self.progress_path,
                          self.start_t, self.end_t or time.time(), self.popen.returncode if self.popen else None,
                          self.timed_out, self.stopped_by_harness, oom is not None, oom, progress,
                          metrics_from_log(self.log_path, self.spec.log_patterns))

    def run(self) -> JobOutcome:
        """Start, wait (bounded by the spec's timeout), and report."""
        self.start().wait()
        return self.outcome()
