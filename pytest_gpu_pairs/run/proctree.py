"""Processes of a job tree: finding them (psutil tree and environment tag), killing them in two
phases, and holding Ctrl-C/SIGTERM while a kill is in progress.

A process can leave its job's session (``setsid``) and be orphaned when its parent exits; it still
carries the job's tag in its environment (``GPU_PAIRS_JOB``, inherited by every descendant), so
the kill finds it. A descendant that also scrubs its environment (a deliberate daemon) carries
no tag; on Linux the harness is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so such an orphan
becomes a child of pytest instead of init, and the kill finds it there (``adopted_orphans``).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import psutil

from pytest_gpu_pairs.protocol import ENV_VAR

JOB_TAG_VAR = "GPU_PAIRS_JOB"
KILL_GRACE_S = 5.0
PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER = threading.Event()


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux; no privilege needed): an
    orphan anywhere below it is re-parented to it, not to init, so no job process escapes the
    kill by ``setsid`` and a scrubbed environment. Elsewhere a no-op; False when not in effect."""
    if _SUBREAPER.is_set():
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    _SUBREAPER.set()
    return True


def adopted_orphans(spared: Callable[[], set[int]], since_t: float) -> list[psutil.Process]:
    """Children of this process that it did not start and that were born after ``since_t``:
    orphans re-parented to it as subreaper. ``spared`` gives the children it started (job leaders,
    the MPS daemon's tree), which are never counted; nothing is adopted without the subreaper.
    The children are listed before ``spared`` is asked: a job another thread starts meanwhile is
    then already among the spared, never taken for an orphan and killed."""
    if not _SUBREAPER.is_set():
        return []
    children: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        children = psutil.Process().children()
    started = spared()
    found = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.pid not in started and child.create_time() >= since_t - 1.0:
                found.append(child)
    return found


def reap_zombies(processes: list[psutil.Process]) -> None:
    """Collect the exit status of adopted orphans that have ended: an adopted child that is never
    waited for stays a zombie for the rest of the session."""
    for process in processes:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(process.pid, os.WNOHANG)


class _Deferral(threading.local):
    depth = 0  # nested deferrals in this thread


_DEFER = _Deferral()


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while job trees are being killed, then deliver them.

    A second Ctrl-C (or SIGTERM) during teardown would otherwise raise KeyboardInterrupt in the
    middle of a kill and leave the rest of the tree running. The wait is bounded by the kill
    grace. Outside the main thread signals are never delivered, so this is a no-op there.
    """
    if threading.current_thread() is not threading.main_thread() or _DEFER.depth:
        _DEFER.depth += 1
        try:
            yield
        finally:
            _DEFER.depth -= 1
        return
    held: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: held.append(signum))
    _DEFER.depth = 1
    try:
        yield
    finally:
        _DEFER.depth = 0
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in held[:1]:
            handler = previous[signal.Signals(signum)]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def is_gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def tagged_processes(match: Callable[[dict[str, str]], bool]) -> list[psutil.Process]:
    """Live processes of this user whose environment ``match`` accepts."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and match(process.environ()) and not is_gone(process):
                found.append(process)
        except psutil.Error:
            continue
    return found


def owner_pid(tag: str) -> Optional[int]:
    """The pid of the pytest process that started a job, from the job's tag."""
    head = tag.split(":", 1)[0]
    return int(head) if head.isdigit() else None


def writes_into(progress_path: str, folder: Path) -> bool:
    """Whether a job's progress file lies in ``folder`` (resolved), compared component by component:
    ``out/kill2`` is not inside ``out/kill``, and ``main/../w/out`` is ``w/out``."""
    if not progress_path or "\x00" in progress_path:
        return False
    try:
        return Path(progress_path).resolve().is_relative_to(folder)
    except (OSError, RuntimeError, ValueError):
        return False


def reap_orphans(out_dir: str | Path, grace_s: float = KILL_GRACE_S) -> list[int]:
    """Kill jobs of an earlier pytest that died without cleaning up (SIGKILL, power loss of the
    login node) and that still write into ``out_dir``: they would share the device with this run.
    Jobs of a pytest that is still alive are left alone."""
    folder = Path(out_dir).resolve()

    def orphaned(environ: dict[str, str]) -> bool:
        owner = owner_pid(environ.get(JOB_TAG_VAR, ""))
        return (owner is not None and writes_into(environ.get(ENV_VAR, ""), folder)
                and (owner == os.getpid() or not psutil.pid_exists(owner)))

    victims = tagged_processes(orphaned)
    terminate(victims, grace_s)
    return [p.pid for p in victims]


def terminate(processes: list[psutil.Process], grace_s: float) -> list[psutil.Process]:
    """SIGTERM, wait up to ``grace_s``, SIGKILL the rest; returns those that needed SIGKILL."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    alive = [p for p in alive if not is_gone(p)]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return alive


def terminate_with_leader(leader: subprocess.Popen, members: list[psutil.Process], grace_s: float,
                           lookup: Callable[[], list[psutil.Process]], signal_group: Callable[[int], None]) -> None:
    """The two-phase kill: the leader is waited on through ``Popen`` (so its exit code is kept),
    the others through psutil; whatever still lives after the grace gets SIGKILL, repeatedly,
    until nothing of the job is left."""
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(timeout=grace_s)
    psutil.wait_procs(members, timeout=max(0.0, deadline - time.monotonic()))
    for _ in range(10):
        remaining = lookup()
        if leader.poll() is None:
            signal_group(signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                leader.kill()
        elif not remaining:
            return
        for process in remaining:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(remaining, timeout=1.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=1.0)
