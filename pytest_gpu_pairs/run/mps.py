"""A private CUDA MPS control daemon for the harness's own jobs.

The system's default pipe directory (``/tmp/nvidia-mps``) would put every CUDA program on the
machine under our daemon, so each daemon gets a pipe and a log directory of its own (mode 0700)
and only the harness's jobs are told about them, through ``CUDA_MPS_PIPE_DIRECTORY`` and
``CUDA_MPS_LOG_DIRECTORY`` in their environment. The GPU's compute mode is never touched: MPS
runs in the default compute mode, and a CUDA program that does not carry those variables keeps
using the card the ordinary way.

``nvidia-cuda-mps-control -d`` forks into the background and the parent exits, so the daemon is
not our child: it is found through the ``nvidia-cuda-mps-control.pid`` file it writes into its
pipe directory, asked to ``quit`` through the control command's stdin, and killed (with the MPS
servers it started) if it does not go. Every running daemon is in a registry that the session
empties on every way out (``stop_all_daemons``), like the job registry of ``jobs``.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, Optional

import psutil

from pytest_gpu_pairs.experiment.cases import MpsLimits
from pytest_gpu_pairs.protocol import now

CONTROL_NAME = "nvidia-cuda-mps-control"
PID_FILE = "nvidia-cuda-mps-control.pid"
SYSTEM_PIPE_DIRECTORY = "/tmp/nvidia-mps"
KNOWN_LOCATIONS = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/local/cuda/bin")
START_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_CHARS = 600
SERVER_LOG = "server.log"
FATAL_MARK = "fatal GPU error"
FAULT_READ_BYTES = 256 * 1024
CLIENT_CHECK_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 30.0
READY_PAUSE_S = 0.5

CLIENT_CHECK = [sys.executable, "-m", "pytest_gpu_pairs.workloads.mps_client"]


class MpsUnavailable(RuntimeError):
    """MPS cannot be used here; the message is the skip reason an operator reads."""


def find_control(configured: Optional[str] = None) -> list[str]:
    """The control command: the configured path, else PATH, else the driver's usual folders."""
    if configured:
        if not (os.path.isfile(configured) and os.access(configured, os.X_OK)):
            raise MpsUnavailable(f"gpu_pairs_mps_control = {configured!r} is not an executable file")
        return [configured]
    found = shutil.which(CONTROL_NAME) or next(
        (str(Path(d, CONTROL_NAME)) for d in KNOWN_LOCATIONS if os.access(Path(d, CONTROL_NAME), os.X_OK)), None)
    if found is None:
        raise MpsUnavailable(f"{CONTROL_NAME} not found on PATH or in {', '.join(KNOWN_LOCATIONS)} "
                             "(set the ini value gpu_pairs_mps_control to its path)")
    return [found]


def system_daemon_pid() -> Optional[int]:
    """The pid of a control daemon on the system's default pipe directory, if one runs.

    Jobs without our variables would become its clients: a "timeslice" case would then not be
    time-sliced, which the record must say.
    """
    return _read_live_pid(Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or SYSTEM_PIPE_DIRECTORY) / PID_FILE)


def _read_live_pid(path: Path) -> Optional[int]:
    """The pid a pid file names, if that process lives and is an MPS control daemon: a stale file
    whose pid now belongs to another process (pid 1, a shell) must not pass for a daemon."""
    try:
        pid = int(_read_no_follow(path, 64).strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 1 and pid != os.getpid() and _alive(pid) and _is_control_daemon(pid) else None


def _is_control_daemon(pid: int) -> bool:
    try:
        process = psutil.Process(pid)
        words = [process.name(), *process.cmdline()[:2]]
    except psutil.Error:
        return False
    return any("mps" in os.path.basename(word).lower() for word in words)


def _open_no_follow(path: Path) -> BinaryIO:
    """``path`` for reading, refusing a symlink (O_NOFOLLOW): the MPS folders lie in the output
    folder, where a planted link could point anywhere."""
    return os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb")


def _read_no_follow(path: Path, limit: int) -> str:
    """At most ``limit`` bytes from the end of ``path``."""
    with _open_no_follow(path) as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - limit))
        return handle.read().decode("utf-8", "replace")


def _read_after_no_follow(path: Path, offset: int, limit: int) -> str:
    """At most ``limit`` bytes of ``path`` after ``offset`` (from its start where the file is now
    shorter: a new log)."""
    with _open_no_follow(path) as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(offset if offset <= size else 0)
        return handle.read(limit).decode("utf-8", "replace")


def _alive(pid: int) -> bool:
    """Running and not a zombie: a daemon that is not our child may linger unreaped."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _private_dir(path: Path) -> Path:
    """The daemon's log folder: created with mode 0700 in one step, or, if it exists, used only
    when this user made it that way (a real folder, not a symlink, owned by this user, no access
    for others, no symlink in it). The daemon runs as root and appends to ``control.log`` there;
    a folder or link planted by someone else would let it write wherever they chose."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
        return path
    except FileExistsError:
        pass
    except OSError as exc:
        raise MpsUnavailable(f"cannot create the MPS log folder {path}: {exc.strerror or exc}") from None
    problem = _foreign_dir_problem(path)
    if problem:
        raise MpsUnavailable(f"refusing the MPS log folder {path}: {problem}; remove it if it is yours")
    return path


def _foreign_dir_problem(path: Path) -> Optional[str]:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if info.st_uid != os.geteuid():
        return f"it belongs to uid {info.st_uid}, not to this user"
    if info.st_mode & 0o077:
        return f"its mode is {stat.S_IMODE(info.st_mode):04o}, not 0700: others could plant files in it"
    links = [entry.name for entry in os.scandir(path) if entry.is_symlink()]
    return f"it holds symlinks ({', '.join(sorted(links)[:3])})" if links else None


def _tail(text: str) -> str:
    text = " ".join(text.split())
    return text[-LOG_TAIL_CHARS:]


class MpsDaemon:
    """One private control daemon: ``start``, ``client_env`` for the jobs, ``probe``, ``stop``."""

    def __init__(self, control: Sequence[str], log_dir: str | Path, start_timeout_s: float = START_TIMEOUT_S,
                 stop_timeout_s: float = STOP_TIMEOUT_S, device_env: Optional[dict[str, str]] = None):
        """``device_env``: the GPU a worker owns (``CUDA_VISIBLE_DEVICES``), so the daemon and the
        client check see that GPU alone, as its jobs do."""
        self.control = list(control)
        self.log_dir = Path(log_dir)
        self.device_env = dict(device_env or {})
        self.pipe_dir: Optional[Path] = None
        self.pid: Optional[int] = None
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s

    @property
    def running(self) -> bool:
        return self.pid is not None

    def daemon_env(self) -> dict[str, str]:
        """The two variables that bind a daemon, its servers and its clients to each other."""
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}

    def client_env(self, limits: Optional[MpsLimits] = None) -> dict[str, str]:
        return {**self.daemon_env(), **(limits.env() if limits else {})}

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.device_env, **self.daemon_env()}

    def start(self) -> MpsDaemon:
        """Start the daemon and wait until its pid file names a live process; MpsUnavailable if not."""
        if self.running:
            return self
        # A short path: the pipe directory holds unix sockets, whose paths are limited to 108 bytes.
        _private_dir(self.log_dir)
        self.pipe_dir = Path(tempfile.mkdtemp(prefix="gpu-pairs-mps-"))  # mode 0700 from the start
        try:
            done = subprocess.run([*self.control, "-d"], env=self._env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=self.start_timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._discard_pipe_dir()
            raise MpsUnavailable(f"MPS control daemon did not start: {exc}") from None
        if done.returncode != 0:
            self._give_up_start(f"`{' '.join(self.control)} -d` exited with code {done.returncode}: "
                                f"{_tail(done.stderr + done.stdout) or 'no output'}")
        pid = self._wait_for_pid()
        if pid is None:
            self._give_up_start(f"no live daemon named in {self.pipe_dir / PID_FILE} within "
                                f"{self.start_timeout_s:.0f} s")
        self.pid = pid
        _register(self)
        return self

    def _wait_for_pid(self) -> Optional[int]:
        if self.pipe_dir is None:  # made by start() before the daemon is asked for
            return None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            pid = _read_live_pid(self.pipe_dir / PID_FILE)
            if pid is not None:
                return pid
            time.sleep(0.05)
        return None

    def _give_up_start(self, what: str) -> None:
        hint = self._log_hint()
        self._kill_leftovers()
        self._discard_pipe_dir()
        raise MpsUnavailable(f"MPS control daemon did not start: {what}{hint}")

    def _control_log(self) -> str:
        try:
            return _tail(_read_no_follow(self.log_dir / "control.log", 64 * 1024))
        except OSError:
            return ""

    def server_log_size(self) -> int:
        """Where the servers' log ends now, for a later ``fatal_errors_since``."""
        try:
            return os.lstat(self.log_dir / SERVER_LOG).st_size
        except OSError:
            return 0

    def fatal_errors_since(self, offset: int) -> list[str]:
        """The servers' log lines about a fatal GPU error written after ``offset``. A server tears
        down every client on its GPU when one of them faults, so a job that "ended during the
        measurement" may have been torn down for another client's fault; its own log shows only
        the CUDA error that followed."""
        try:
            text = _read_after_no_follow(self.log_dir / SERVER_LOG, offset, FAULT_READ_BYTES)
        except OSError:
            return []
        return [line.strip() for line in text.splitlines() if FATAL_MARK in line]

    def check_client(self, argv: Optional[Sequence[str]] = None) -> None:
        """Prove that a CUDA client gets an MPS server from this daemon; MpsUnavailable if not.

        A client that cannot reach the daemon silently runs without MPS, and a server that cannot
        start fails every client: either would waste every MPS round, so it is found out once, here.
        """
        argv = list(argv) if argv else CLIENT_CHECK
        client = subprocess.Popen(argv, env={**self._env(), **self.client_env()}, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            said = _read_line(client, CLIENT_CHECK_TIMEOUT_S)
            servers = self.server_pids() if said == "ok" else []
        finally:
            errors = _end_client(client)
        if said != "ok":
            raise MpsUnavailable(f"a CUDA client could not start under the MPS daemon: "
                                 f"{_tail(errors) or 'no output'}" + self._log_hint())
        if not servers:
            raise MpsUnavailable("a CUDA client ran but no MPS server appeared: the client did not connect to the "
                                 "daemon" + self._log_hint())

    def wait_ready(self, argv: Optional[Sequence[str]] = None, timeout_s: float = READY_TIMEOUT_S,
                   pause_s: float = READY_PAUSE_S) -> dict[str, Any]:
        """Wait until a CUDA client is served again; when the wait began and ended, the tries, the last refusal.

        A round ends by killing its background mid-training; the MPS server then cleans up after
        that client and refuses new ones for a moment (CUDA error 807, "server not ready"). On the
        H100 a round started in that moment lost both its jobs, so every MPS round waits here first.
        Never ready within ``timeout_s``: the round runs anyway and its jobs' failure is its record.
        """
        began, attempts, problem = now(), 0, None
        while True:
            attempts += 1
            try:
                self.check_client(argv)
                ready = {"mps_check_start_t": began, "mps_ready_t": now(), "mps_ready_attempts": attempts}
                return {**ready, "mps_refused": problem} if problem else ready
            except MpsUnavailable as exc:
                problem = str(exc)
            if now() + pause_s - began >= timeout_s:
                return {"mps_check_start_t": began, "mps_ready_t": None, "mps_ready_attempts": attempts,
                        "mps_not_ready": problem}
            time.sleep(pause_s)

    def _log_hint(self) -> str:
        log = self._control_log()
        return f"; control.log: {log}" if log else f"; logs in {self.log_dir}"

    def command(self, text: str) -> str:
        """Send one interactive command (``get_server_list``, ``quit``...) and return its answer."""
        done = subprocess.run(self.control, input=text + "\n", env=self._env(), capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        return done.stdout

    def server_pids(self) -> list[int]:
        """MPS servers of this daemon: its own answer, and its children that are servers."""
        pids: set[int] = set()
        try:
            pids.update(int(p) for p in re.findall(r"\b\d+\b", self.command("get_server_list")))
        except (OSError, subprocess.TimeoutExpired):
            pass
        for child in self._descendants():
            try:
                if "mps-server" in child.name():
                    pids.add(child.pid)
            except psutil.Error:
                continue
        return sorted(p for p in pids if _alive(p))

    def probe(self) -> dict[str, Any]:
        """What the daemon says now; an empty server list means no job became an MPS client."""
        servers = self.server_pids() if self.running else []
        clients: list[int] = []
        for server in servers:
            try:
                clients += [int(p) for p in re.findall(r"\b\d+\b", self.command(f"get_client_list {server}"))]
            except (OSError, subprocess.TimeoutExpired):
                continue
        return {"control_pid": self.pid, "server_pids": servers, "client_pids": sorted(set(clients))}

    def tree_pids(self) -> set[int]:
        """The daemon and its servers: processes of the harness that no job kill may take."""
        return {self.pid, *(p.pid for p in self._descendants())} if self.pid else set()

    def _descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pid).children(recursive=True) if self.pid else []
        except psutil.Error:
            return []

    def stop(self) -> Optional[str]:
        """Quit the daemon and make sure it and its servers are gone; returns what went wrong, if anything."""
        if not self.running:
            return None
        tree = [self.pid] + [p.pid for p in self._descendants()]
        problem = None
        try:
            self.command("quit")
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = f"`quit` failed ({exc})"
        if not _wait_gone(tree, self.stop_timeout_s):
            problem = (problem + "; " if problem else "") + \
                f"the MPS daemon {self.pid} did not quit within {self.stop_timeout_s:.0f} s and was killed"
            self._kill(tree)
        _unregister(self)
        self.pid = None
        self._discard_pipe_dir()
        return problem

    def _kill_leftovers(self) -> None:
        """A daemon that half-started (pid file written, then failed) must not outlive the attempt."""
        pid = _read_live_pid(self.pipe_dir / PID_FILE) if self.pipe_dir else None
        if pid is not None:
            try:
                tree = [pid] + [p.pid for p in psutil.Process(pid).children(recursive=True)]
            except psutil.Error:
                tree = [pid]
            self._kill(tree)

    @staticmethod
    def _kill(pids: list[int]) -> None:
        for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            if _wait_gone(pids, wait_s):
                return

    def _discard_pipe_dir(self) -> None:
        if self.pipe_dir is not None:
            shutil.rmtree(self.pipe_dir, ignore_errors=True)


def _end_client(client: subprocess.Popen) -> str:
    """Let the check client go (stdin closed), kill it if it lingers; its stderr."""
    assert client.stdin is not None and client.stdout is not None and client.stderr is not None  # opened as PIPEs
    client.stdin.close()
    try:
        client.wait(timeout=10)
    except subprocess.TimeoutExpired:
        client.kill()
        client.wait()
    errors = client.stderr.read()
    client.stdout.close()
    client.stderr.close()
    return errors


def _read_line(process: subprocess.Popen, timeout_s: float) -> Optional[str]:
    """The first line a process prints, or None if it exits or says nothing within ``timeout_s``."""
    lines: list[str] = []
    stdout = process.stdout
    assert stdout is not None  # opened as a PIPE
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return lines[0].strip() if lines and lines[0] else None


def _wait_gone(pids: list[int], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while any(_alive(p) for p in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


_LIVE: set[MpsDaemon] = set()
_LIVE_LOCK = threading.Lock()
_ATEXIT = threading.Event()


def _register(daemon: MpsDaemon) -> None:
    with _LIVE_LOCK:
        _LIVE.add(daemon)
        if not _ATEXIT.is_set():
            _ATEXIT.set()
            atexit.register(stop_all_daemons)


def _unregister(daemon: MpsDaemon) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(daemon)


def live_daemons() -> list[MpsDaemon]:
    with _LIVE_LOCK:
        return list(_LIVE)


def stop_all_daemons() -> int:
    """Stop every daemon still running; the session calls it on every way out, after the jobs."""
    daemons = live_daemons()
    for daemon in daemons:
        daemon.stop()
    return len(daemons)
