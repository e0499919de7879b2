"""The output folder a session owns: its lock, its own files, and every case's folder inside it.

A case's and a solo baseline's folder must lie in it and nowhere else."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock, Timeout

from pytest_gpu_pairs.experiment.cases import Case, JobConfig
from pytest_gpu_pairs.record.store import SOLO_FOLDER
from pytest_gpu_pairs.run.proctree import become_subreaper

LOCK_FILE = ".gpu-pairs.lock"
WORKERS_FOLDER = "_workers"
OWNER_FILE = ".gpu-pairs.lock.owner"


class OutputFolderUnavailable(RuntimeError):
    """The output folder cannot be had (another session holds it, it cannot be created); one line."""


class OutsideOutputFolder(RuntimeError):
    """A folder the harness would write to or empty lies outside the output folder."""


def folder_inside(parent: Path, name: str) -> Path:
    """``parent/name``, which must be a folder of its own directly inside ``parent``: a name with a
    separator or ``..`` in it, or a planted symlink, must never make the harness write, or empty
    a folder, anywhere else, nor write one case's files into another case's folder (a link to a
    sibling resolves inside ``parent`` too). Settings validation refuses such names; this is the
    last guard."""
    folder = parent / name
    if folder.resolve().parent != parent.resolve():
        raise OutsideOutputFolder(f"refusing {folder}: it resolves to {folder.resolve()}, outside {parent}")
    if folder.is_symlink():
        raise OutsideOutputFolder(f"refusing {folder}: it is a symbolic link to {folder.resolve()}; the harness "
                                  "writes a case only into a folder of its own (remove the link)")
    return folder


def _owner(out: Path) -> str:
    try:
        return (out / OWNER_FILE).read_text(encoding="utf-8", errors="replace").strip()[:100] or "owner unknown"
    except OSError:
        return "owner unknown"


def in_use_by(out: Path) -> Optional[str]:
    """Who holds the output folder now, as its owner file says, where that process still lives; None
    otherwise. Read without touching the lock, so a session starting this instant is never refused."""
    match = re.match(r"pid (\d+) ", _owner(out))
    if match is None:
        return None
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return None
    except OSError:  # alive, but another user's
        pass
    return _owner(out)


class OutputFolder:
    """``--gpu-pairs-out`` for one session (or one pytest-xdist worker of it)."""

    def __init__(self, path: Path, worker: Optional[str] = None):
        self.path, self.worker = path, worker
        self.subreaper = False
        self._lock: Optional[FileLock] = None

    @property
    def own_dir(self) -> Path:
        """Where this session's own files go (session.json, the MPS daemon's logs): the output
        folder, or for a pytest-xdist worker ``_workers/<worker>`` in it (the case folders are
        shared: each case runs in one worker only)."""
        return self.path if self.worker is None else self.path / WORKERS_FOLDER / self.worker

    def claim(self) -> None:
        """Before any case: the output folder is this session's alone (a second session on it would
        empty the first one's live case folders and interleave their logs), and on Linux pytest
        becomes the subreaper of every job process, so none escapes the kill as a daemon. An xdist
        worker does not lock: its controller holds the lock for all its workers."""
        out = self.path
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputFolderUnavailable(f"--gpu-pairs-out {out}: cannot create it ({exc.strerror or exc})") from None
        if self.worker is not None:
            self.subreaper = become_subreaper()
            return
        lock = FileLock(str(out / LOCK_FILE), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise OutputFolderUnavailable(f"--gpu-pairs-out {out} is in use by another pytest session "
                                   f"({_owner(out)}); wait for it to end or choose another --gpu-pairs-out") from None
        except OSError as exc:  # a read-only folder or file system: the lock file cannot be made
            raise OutputFolderUnavailable(f"--gpu-pairs-out {out}: cannot write in it ({exc.strerror or exc}); "
                                          "choose a folder this user can write to") from None
        self._lock = lock
        with contextlib.suppress(OSError):  # only what the refusal of a second session quotes
            (out / OWNER_FILE).write_text(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        self.subreaper = become_subreaper()

    def release(self) -> None:
        if self._lock is not None:
            (self.path / OWNER_FILE).unlink(missing_ok=True)
            self._lock.release()
            self._lock = None

    def case_dir(self, case: Case) -> Path:
        return folder_inside(self.path, case.id)

    def round_dir(self, case: Case, round_number: int) -> Path:
        """Where a round of a case with repeats keeps its own record; a case of one round is its round."""
        base = self.case_dir(case)
        return base if case.runs_per_config == 1 else base / f"round-{round_number:02d}"

    def fresh_case_dir(self, case: Case) -> Path:
        """The case's folder, emptied: logs are appended to, so a rerun must not mix two runs."""
        folder = self.case_dir(case)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def solo_dir(self, job: JobConfig, scale: float) -> Path:
        """``_solo/<model>-<digest>``: one folder per job and scale (and xdist worker, and the block of
        a replicate measured in blocks)."""
        extra: list[Any] = [job.runs] if job.runs > 1 else []
        extra += [job.scope] if job.scope else []
        digest = hashlib.sha1(json.dumps([job.model, job.hparams, job.command_key, scale, *extra],
                                         default=str).encode()).hexdigest()[:10]
        worker = f"-{self.worker}" if self.worker is not None else ""
        return folder_inside(folder_inside(self.path, SOLO_FOLDER), f"{job.model}-{digest}{worker}")
