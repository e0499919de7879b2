"""Training jobs as supervised processes.

Every job runs from an argv list (no shell ever interprets a settings value) in a session of its
own, so that the harness can always take down the whole tree: a train.sh, the python it starts
and that python's data-loader workers, and (through the environment tag of ``proctree``) a
descendant that left the session. Every live job is in a registry that the session empties on
any exit path (teardown, Ctrl-C, SIGTERM).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import psutil

from pytest_gpu_pairs.devices.cpus import pin_process
from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.protocol import ENV_VAR, GATE_VAR, RUNS_VAR, STEADY_STATE_VAR, Progress, ProgressReader, now
from pytest_gpu_pairs.record.measurement import JobOutcome
from pytest_gpu_pairs.run import logprogress
from pytest_gpu_pairs.run.joblog import HARNESS_LINE, detect_oom, has_output, parse_log_metrics
from pytest_gpu_pairs.run.logprogress import LogFollower, LogProgress
from pytest_gpu_pairs.run.mps import live_daemons
from pytest_gpu_pairs.run.proctree import (
    JOB_TAG_VAR,
    KILL_GRACE_S,
    adopted_orphans,
    deferred_signals,
    is_gone,
    owner_pid,
    reap_zombies,
    tagged_processes,
    terminate,
    terminate_with_leader,
)

UNKILLABLE_WAIT_S = 30.0
TREE_LOOKUPS = 5  # lookups of a tree being signalled: a new process turns up in the next one


def _continue(processes: list[psutil.Process]) -> None:
    """SIGCONT to processes that a pause may have stopped outside the job's process group: a stopped
    process acts on SIGTERM only once it runs again."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.resume()


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
    protocol: bool = False  # always speaks the progress protocol: ready only on its ready event
    progress_pattern: Optional[str] = None  # progress read from the log (a command workload's)
    cpus: Optional[frozenset[int]] = None  # the CPUs the whole job is pinned to; None: wherever the kernel puts it
    overruled_env: tuple[str, ...] = ()  # variables of the workload's env the harness's own replaced


# Variables the harness decides for every job, set or not: which GPU it sees, whether it measures a
# steady state, its start gate, its MPS daemon, its progress file and its tag
HARNESS_VARS = frozenset(("CUDA_VISIBLE_DEVICES", STEADY_STATE_VAR, GATE_VAR, "CUDA_MPS_PIPE_DIRECTORY",
                          "CUDA_MPS_LOG_DIRECTORY", ENV_VAR, JOB_TAG_VAR))


def flag_arguments(command_hparams: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """Each hyperparameter as the script takes it: ``--flag value`` (``--name`` without a flag), a
    bare ``--flag`` for a true bool and nothing for a false one; a flag that ends in ``=`` joins its
    value into one argument (``--epochs=3``, Hydra's ``trainer.max_epochs=3``; a bool as true or
    false). No shell ever sees them."""
    args: list[str] = []
    for name, value in values.items():
        spec = command_hparams.get(name)
        flag = (spec.flag if spec is not None else None) or f"--{name}"
        if flag.endswith("="):
            args.append(flag + (str(value).lower() if isinstance(value, bool) else str(value)))
        elif isinstance(value, bool):
            args += [flag] if value else []
        else:
            args += [flag, str(value)]
    return args


def build_spec(job: JobConfig, role: str, device: str, scale: float, timeout_s: float,
               extra_env: Optional[dict[str, str]] = None, cpus: Optional[frozenset[int]] = None) -> JobSpec:
    """Command line and environment of one job: pytest's environment, then a command workload's
    ``env`` from its settings, then the harness's own variables (``extra_env``: the GPU, the steady-state
    switch, the MPS pipe and log folders, a rank's place; on the CPU no visible GPU), which a
    setting cannot replace: the job would train on another GPU than the one measured, outside its
    MPS daemon, or leave out what the method needs. A setting of one of ``HARNESS_VARS`` the harness
    leaves unset is dropped too (the job inherits pytest's). What the settings set and the job does
    not see is named in its log (``overruled_env``)."""
    harness = dict(extra_env or {})
    if device == "cpu":
        harness["CUDA_VISIBLE_DEVICES"] = ""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **harness}
    if job.is_builtin:
        env.pop(RUNS_VAR, None)
        if job.runs > 1:
            env[RUNS_VAR] = str(job.runs)
        argv = [sys.executable, "-m", "pytest_gpu_pairs.workloads", job.model,
                "--device", device, "--scale", repr(float(scale))]
        for name, value in job.hparams:
            argv += [f"--{name}", str(value)]
        return JobSpec(role, job.model, argv, env, None, timeout_s, protocol=True, cpus=cpus)
    command = job.command
    if command is None:
        raise ValueError(f"{job.model}: neither a built-in workload nor a command workload")
    owned = [name for name in command.env if name in HARNESS_VARS or name in harness]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **{k: v for k, v in command.env.items() if k not in owned}, **harness}
    overruled = tuple(sorted(name for name in owned if env.get(name) != command.env[name]))
    cwd = str(Path(job.base_dir, command.cwd)) if command.cwd else job.base_dir or None
    argv = list(command.command) + flag_arguments(command.hyperparameters, job.hyperparameters)
    return JobSpec(role, job.model, argv, env, cwd, timeout_s, command.ready_pattern, dict(command.log_patterns),
                   progress_pattern=command.progress_regex, cpus=cpus, overruled_env=overruled)


_LIVE: set[JobProcess] = set()
_LIVE_LOCK = threading.Lock()


def live_jobs() -> list[JobProcess]:
    with _LIVE_LOCK:
        return list(_LIVE)


def kill_all_jobs(grace_s: float = 2.0) -> int:
    """Kill every job tree still running; the last line of defence on any way out of pytest. Then
    every process carrying a job tag of this process that is still alive (one a signal cut off from
    its registration while it started), so none outlives pytest."""
    jobs = live_jobs()
    with deferred_signals():
        for job in jobs:
            job.kill_tree(grace_s=grace_s)
        stragglers = tagged_processes(lambda environ: owner_pid(environ.get(JOB_TAG_VAR, "")) == os.getpid())
        terminate(stragglers, grace_s)
    return len(jobs) + len(stragglers)


def _started_by_harness() -> set[int]:
    """The children of pytest that the harness started and keeps: job leaders (their exit codes
    are read through ``Popen``) and the MPS daemons' trees. Any other child is an adopted orphan."""
    pids = {job.pid for job in live_jobs() if job.pid is not None}
    for daemon in live_daemons():
        pids |= daemon.tree_pids()
    return pids


class JobProcess:
    """One job process tree: started in its own session, logged, timed out, killed as a whole."""

    def __init__(self, spec: JobSpec, log_path: str | Path, progress_path: str | Path):
        self.spec = spec
        self.log_path, self.progress_path = str(log_path), str(progress_path)
        self._reader = ProgressReader(self.progress_path)
        self.tag = f"{os.getpid()}:{uuid.uuid4().hex}"
        self.popen: Optional[subprocess.Popen] = None
        self.start_t = self.end_t = 0.0
        self.exit_t: Optional[float] = None
        self.limit_s = spec.timeout_s
        self.timed_out = self.stopped_by_harness = False
        self.start_error: Optional[str] = None
        self.leftovers_killed = 0
        self._follower = (LogFollower(self.log_path, LogProgress(spec.progress_pattern, spec.ready_pattern))
                          if spec.progress_pattern and not spec.protocol else None)
        self._finished = False
        self._kill_lock = threading.Lock()

    @property
    def pid(self) -> Optional[int]:
        return self.popen.pid if self.popen else None

    def start(self) -> JobProcess:
        """Start the job; a job that cannot start (missing program or cwd) ends at once with the
        reason in ``start_error`` instead of raising, so a bad command fails its case, not pytest."""
        Path(self.progress_path).unlink(missing_ok=True)
        env = {**self.spec.env, ENV_VAR: self.progress_path, JOB_TAG_VAR: self.tag}
        with open(self.log_path, "ab") as log:
            log.write(f"{HARNESS_LINE} start {time.strftime('%Y-%m-%dT%H:%M:%S%z')} "
                      f"cwd={self.spec.cwd or os.getcwd()} argv={self.spec.argv}\n".encode())
            if self.spec.overruled_env:
                log.write(f"{HARNESS_LINE} the workload's env sets {', '.join(self.spec.overruled_env)}, which the "
                          "harness sets for the job: the harness's values were used\n".encode())
            log.flush()
            with deferred_signals(), _LIVE_LOCK:  # a Ctrl-C or SIGTERM lands once the job is known, never between
                self.start_t = now()
                try:
                    self.popen = subprocess.Popen(self.spec.argv, cwd=self.spec.cwd, env=env, stdin=subprocess.DEVNULL,
                                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as exc:
                    self.start_error = f"{exc.strerror or exc} ({exc.filename or self.spec.argv[0]})"
                else:
                    _LIVE.add(self)
                    if self.spec.cpus:  # before the job starts threads or children, which inherit it
                        pin_process(self.popen.pid, self.spec.cpus)
                    if self._follower is not None:
                        self._follower.start()
        if self.start_error:
            self.end_t = self.start_t
            self._finished = True
            self._write_log(f"\n{HARNESS_LINE} could not start: {self.start_error}\n")
        return self

    def poll(self) -> Optional[int]:
        return self.popen.poll() if self.popen else None

    def wait(self, timeout: Optional[float] = None, on_tick: Optional[Callable[[], None]] = None,
             tick_s: float = 0.1) -> Optional[int]:
        """Wait for the job; past ``timeout`` (or the spec's) the tree is killed and marked timed out.

        ``on_tick`` runs every ``tick_s`` while waiting, for watchers that must see the job live
        (readiness from a log pattern has no timestamp of its own). When the job's main process
        exits, whatever it left behind in its tree is killed too.
        """
        if self.popen is None:
            return None
        self.limit_s = self.spec.timeout_s if timeout is None else timeout
        deadline = self.start_t + self.limit_s
        while True:
            remaining = deadline - now()
            if remaining <= 0:
                self.timed_out = self.popen.poll() is None
                break
            try:
                self.popen.wait(timeout=min(remaining, tick_s) if on_tick else remaining)
                self.exit_t = now()
                break
            except subprocess.TimeoutExpired:
                if on_tick:
                    on_tick()
        self.kill_tree()
        return self.popen.returncode

    def stop(self) -> None:
        """End a job the harness no longer needs (a background run at the end of a case)."""
        if self.popen and self.popen.poll() is None:
            self.stopped_by_harness = True
        self.kill_tree()

    def pause(self) -> None:
        """SIGSTOP to every process of the job: it keeps its memory and CUDA context and does no work
        until ``resume``; what it queued on the GPU finishes. Needs no cooperation from the job.
        Not only its process group: a trainer in a session of its own (as torch's elastic launcher
        starts its workers) would go on training while the job counts as paused."""
        if self.popen is not None and self.popen.poll() is None:
            self._signal_tree(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT to every process of the job, also after its main process exited: nothing of it
        may stay stopped."""
        if self.popen is not None:
            self._signal_tree(signal.SIGCONT)

    @property
    def _main(self) -> subprocess.Popen:
        """The job's main process: the tree's helpers run only for a job that started."""
        if self.popen is None:
            raise RuntimeError(f"{self.spec.model}: the job has not started")
        return self.popen

    def _signal_tree(self, sig: int) -> None:
        """``sig`` to the process group and to every process of the tree and tag; for SIGSTOP looked
        up again until no new one turns up (one may have forked before it was stopped)."""
        if self._main.poll() is None:
            self._signal_group(sig)
        signalled: set[int] = set()
        for _ in range(TREE_LOOKUPS if sig == signal.SIGSTOP else 1):
            fresh = [p for p in self._own_members() if p.pid not in signalled]
            if not fresh:
                return
            for process in fresh:
                with contextlib.suppress(psutil.Error):
                    process.send_signal(sig)
                signalled.add(process.pid)

    def pin_tree(self) -> None:
        """Every thread of every process of the job on its CPUs again: what started before the
        first pinning took hold (a fast fork of a wrapper script) is caught here."""
        if self.popen is None or not self.spec.cpus or self.popen.poll() is not None:
            return
        for pid in [self.popen.pid] + [p.pid for p in self._members()]:
            pin_process(pid, self.spec.cpus)

    def kill_tree(self, grace_s: float = KILL_GRACE_S) -> None:
        """SIGTERM to the session, the psutil tree and every tagged process; after ``grace_s``
        SIGKILL to whatever is left (looked up again: a process may have forked meanwhile).
        Also what ends leftovers after the main process exited on its own."""
        if self.popen is None:
            return
        with self._kill_lock, deferred_signals():
            leader_running = self.popen.poll() is None
            members = self._members()
            if leader_running or members:
                self._signal_group(signal.SIGTERM)
                self._signal_group(signal.SIGCONT)  # a paused job must run to act on its SIGTERM
                _continue(members)
                terminate_with_leader(self.popen, members, grace_s, self._members, self._signal_group)
            if not leader_running and members:
                self.leftovers_killed += len(members)
            try:
                self.popen.wait(timeout=UNKILLABLE_WAIT_S)
            except subprocess.TimeoutExpired:
                self._write_log(f"\n{HARNESS_LINE} pid {self.popen.pid} survived SIGKILL for {UNKILLABLE_WAIT_S:.0f} s "
                                "(uninterruptible sleep, e.g. stuck in a driver call); giving up on it\n")
                return
        self._finish()

    def _own_members(self) -> list[psutil.Process]:
        """The processes of the job that are surely its own, except its main process: its psutil
        tree and every process carrying its tag (a descendant in a session of its own among them)."""
        found: dict[int, psutil.Process] = {}
        if self._main.poll() is None:  # once reaped, the pid may be someone else's
            with contextlib.suppress(psutil.Error):
                found = {child.pid: child for child in psutil.Process(self._main.pid).children(recursive=True)}
        for process in tagged_processes(lambda environ: environ.get(JOB_TAG_VAR) == self.tag):
            found.setdefault(process.pid, process)
        found.pop(self._main.pid, None)
        return [p for p in found.values() if not is_gone(p)]

    def _members(self) -> list[psutil.Process]:
        """Every process of the job except its main process (which ``popen`` reaps): its own, and
        the orphans pytest adopted since it started (one of them may have been this job's; the
        kill takes them all, a pause does not, as they cannot be told apart between two jobs)."""
        found = {p.pid: p for p in self._own_members()}
        adopted = adopted_orphans(_started_by_harness, self.start_t)
        reap_zombies([p for p in adopted if is_gone(p)])
        for process in adopted:
            found.setdefault(process.pid, process)
        found.pop(self._main.pid, None)
        return [p for p in found.values() if not is_gone(p)]

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._main.pid, sig)

    def _finish(self) -> None:
        with _LIVE_LOCK:
            if self._finished:
                return
            self._finished = True
            _LIVE.discard(self)
            self.end_t = self.exit_t or now()
        if self._follower is not None:
            self._follower.stop(until=self.exit_t)
            logprogress.save(self._follower.progress(), self.log_progress_path)
        leftovers = f" leftovers_killed={self.leftovers_killed}" if self.leftovers_killed else ""
        self._write_log(f"\n{HARNESS_LINE} end {time.strftime('%Y-%m-%dT%H:%M:%S%z')} "
                        f"exit={self.popen.returncode if self.popen else None} timed_out={self.timed_out} "
                        f"stopped_by_harness={self.stopped_by_harness}{leftovers}\n")

    def _write_log(self, text: str) -> None:
        with contextlib.suppress(OSError), open(self.log_path, "ab") as log:
            log.write(text.encode())

    @property
    def log_progress_path(self) -> str:
        """Where the progress read from the log is saved when the job ends (beside its protocol file)."""
        return self.progress_path.removesuffix(".progress.jsonl") + ".log-progress.jsonl"

    def progress(self, until_ready: bool = False) -> Progress:
        """What the job reported so far: through the protocol when it speaks it (a built-in, or a
        script that wrote its progress file), else what its log said through its progress_pattern;
        ``until_ready`` lets a readiness watcher stop reading the protocol file at the ready event."""
        if self._follower is None or Path(self.progress_path).exists():
            return self._reader.read(until_ready)
        return self._follower.progress()

    def outcome(self) -> JobOutcome:
        progress = self.progress()
        returncode = self.popen.returncode if self.popen else None
        oom = detect_oom(self.log_path, progress, returncode, self.timed_out or self.stopped_by_harness)
        return JobOutcome(self.spec.role, self.spec.model, self.spec.argv, self.log_path, self.progress_path,
                          self.start_t, self.end_t or now(), returncode, self.timed_out,
                          self.stopped_by_harness, oom is not None, oom, progress, self.start_error,
                          self.leftovers_killed, parse_log_metrics(self.log_path, self.spec.log_patterns),
                          self.limit_s, has_output(self.log_path))

    def run(self) -> JobOutcome:
        """Start, wait (bounded by the spec's timeout), and report."""
        self.start().wait()
        return self.outcome()
