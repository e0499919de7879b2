"""`gpu-pairs merge DIR... -o OUT`: the results folders of shards (or of xdist workers) joined into
one, as if one session had run every case, so `report`, `compare` and `dead-time` read it as usual.

Records are read and written only through ``record.store`` (each one typed on the way in and out);
a case's other files (logs, samples) are copied beside its record. Refused in one line, with
nothing written: a folder that is not a results folder or holds an unreadable record, two folders
holding the same case id with different records, and folders measured at different scales or on
different devices. The same record in two folders (a folder given twice) is kept once. Solo
baselines are per session: where two folders measured the same one, the first folder's is kept.
The merged folder is built beside ``OUT`` and renamed into place, so it appears whole or not at all.

Only what lies in the folders is merged, and nothing else is touched: a symbolic link (a case folder,
a record, a log) is never followed, only skipped with a note (its target may be any file on the
machine, ``/dev/zero`` among them); a FIFO, device or socket in a case folder refuses the merge in
one line; and ``OUT`` may lie neither inside a folder being merged nor contain one.
"""
from __future__ import annotations

import argparse
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.analysis.compare import MACHINE_KEYS
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import (
    RESULT,
    SESSION,
    SOLO_FOLDER,
    StoreError,
    machine_from_session,
    read_record,
    read_session,
    write_record,
    write_session,
)

SAME_RUN_KEYS = ("device", "scale", "gpu_memory_mb")


class MergeError(ValueError):
    """Folders that cannot be merged; the message is one line naming them and why."""


@dataclass
class Merged:
    cases: dict[str, tuple[Path, Record]] = field(default_factory=dict)
    solos: dict[str, tuple[Path, Record]] = field(default_factory=dict)
    sessions: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _session(folder: Path) -> dict[str, Any]:
    if not folder.is_dir():
        raise MergeError(f"{folder}: expected a gpu-pairs results folder (--gpu-pairs-out), and there is no such folder")
    if (folder / SESSION).is_symlink():
        raise MergeError(f"{folder / SESSION}: expected the session's own file, got a symbolic link")
    session = read_session(folder)
    if session is None:
        raise MergeError(f"{folder}: expected a gpu-pairs results folder with a session.json")
    return session


def _check_same_run(sessions: Sequence[tuple[Path, dict[str, Any]]]) -> None:
    first_path, first = sessions[0]
    for path, session in sessions[1:]:
        for key in SAME_RUN_KEYS:
            if session.get(key) != first.get(key):
                raise MergeError(f"{path}: {key} {session.get(key)!r} differs from {first_path}'s {first.get(key)!r}; "
                                 "only results of one device and scale can be merged")
        _check_same_machine(first_path, first, path, session)


def _check_same_machine(first_path: Path, first: dict[str, Any], path: Path, session: dict[str, Any]) -> None:
    """The GPU model, driver and CUDA version ``compare`` refuses a baseline over must be one: the
    merged folder carries one machine, and a second shard's would otherwise be hidden behind the
    first's (a comparison that refuses that shard alone would pass the merged one)."""
    mine, theirs = machine_from_session(first), machine_from_session(session)
    for key, label in MACHINE_KEYS:
        if first.get("device") != "cpu" and mine.get(key) != theirs.get(key):
            where = "$.gpu." + ("name" if key == "gpu_name" else key) if key != "gpu_memory_mb" else f"$.{key}"
            raise MergeError(f"{path / SESSION}: {where}: {label} {theirs.get(key)!r} differs from {first_path}'s "
                             f"{mine.get(key)!r}; only results of one GPU model, driver and CUDA version can be "
                             "merged (compare each folder on its own)")


def _link_on_the_way(folder: Path, path: Path) -> Path | None:
    """The first symbolic link from ``folder`` down to ``path`` (the case folder, the record), if any."""
    parts = path.relative_to(folder).parts
    return next((p for p in (folder.joinpath(*parts[:i + 1]) for i in range(len(parts))) if p.is_symlink()), None)


def _records(folder: Path, pattern: str, merged: Merged) -> list[tuple[Path, Record]]:
    """The records ``pattern`` finds in ``folder``; one reached through a link is skipped with a note:
    merge reads no file through a link."""
    found = []
    for path in sorted(folder.glob(pattern)):
        if path.parent.name.startswith("_") and not pattern.startswith(SOLO_FOLDER):
            continue
        link = _link_on_the_way(folder, path)
        if link is None:
            found.append((path.parent, read_record(path)))
        elif _skipped_link(link) not in merged.notes:
            merged.notes.append(_skipped_link(link))
    return found


def _skipped_link(path: Path | str) -> str:
    return f"skipped {path}: a symbolic link (merge copies no link and nothing it points to)"


def gather(folders: Sequence[Path]) -> Merged:
    merged = Merged()
    merged.sessions = [(f, _session(f)) for f in folders]
    _check_same_run(merged.sessions)
    for folder in folders:
        for case_dir, record in _records(folder, f"*/{RESULT}", merged):
            _add_case(merged, case_dir, record)
        for solo_dir, record in _records(folder, f"{SOLO_FOLDER}/*/{RESULT}", merged):
            kept = merged.solos.setdefault(solo_dir.name, (solo_dir, record))
            if kept[0] != solo_dir:
                merged.notes.append(f"solo baseline {solo_dir.name} measured in {kept[0].parent.parent} and "
                                    f"{folder}; kept the first")
    if not merged.cases:
        raise MergeError(f"{', '.join(map(str, folders))}: expected <case-id>/result.json files, found none")
    return merged


def _add_case(merged: Merged, case_dir: Path, record: Record) -> None:
    case_id = record.case_id or case_dir.name
    if case_id != case_dir.name:
        raise MergeError(f"{case_dir / RESULT}: $.case_id: expected the folder's name {case_dir.name!r}, got {case_id!r}")
    kept = merged.cases.get(case_id)
    if kept is None:
        merged.cases[case_id] = (case_dir, record)
    elif kept[1].to_dict() != record.to_dict():
        raise MergeError(f"case {case_id} has different records in {kept[0].parent} and {case_dir.parent}; "
                         "merge results of disjoint shards, or remove one of them")


def _special_files(folder: Path) -> list[Path]:
    """FIFOs, devices and sockets below ``folder`` (links not followed): a merge that met one would
    hang opening it or copy a device's endless content."""
    found = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            mode = os.lstat(Path(root, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                found.append(Path(root, name))
    return found


def _check_no_special_files(merged: Merged) -> None:
    for folder, _ in [*merged.cases.values(), *merged.solos.values()]:
        special = _special_files(folder)
        if special:
            raise MergeError(f"{special[0]}: expected regular files and folders in a case folder, got a FIFO, "
                             "device or socket; remove it and merge again")


def _copy_folder(source: Path, target: Path, record: Optional[Record], notes: list[str]) -> None:
    """The case's folder without its record (written again, typed) and without hidden files; a link
    in it is skipped with a note, never followed."""
    target.mkdir(parents=True)
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        if entry.name == RESULT or entry.name.startswith("."):
            continue
        if entry.is_symlink():
            notes.append(_skipped_link(entry.path))
        elif entry.is_dir(follow_symlinks=False):
            _copy_folder(Path(entry.path), target / entry.name, None, notes)
        elif entry.is_file(follow_symlinks=False):
            shutil.copy2(entry.path, target / entry.name, follow_symlinks=False)
    if record is not None:
        write_record(target, record)


def write(merged: Merged, out: Path) -> None:
    _check_no_special_files(merged)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=out.parent))
    try:
        for case_id, (case_dir, record) in sorted(merged.cases.items()):
            _copy_folder(case_dir, staging / case_id, record, merged.notes)
        for name, (solo_dir, record) in sorted(merged.solos.items()):
            _copy_folder(solo_dir, staging / SOLO_FOLDER / name, record, merged.notes)
        first = dict(merged.sessions[0][1])
        write_session(staging, {**first, "merged_from": [str(p) for p, _ in merged.sessions],
                                "sessions": [s for _, s in merged.sessions]})
        if out.exists():
            out.rmdir()  # only an empty folder may be there: checked before
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _overlaps(out: Path, folder: Path) -> bool:
    """Whether ``out`` is ``folder``, lies inside it or contains it, compared resolved (a link or
    ``..`` in either path cannot hide it) and component by component."""
    out, folder = out.resolve(), folder.resolve()
    return out == folder or out.is_relative_to(folder) or folder.is_relative_to(out)


def merge(folders: Sequence[str | Path], out: str | Path) -> Merged:
    out = Path(out).absolute()
    if out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        raise MergeError(f"-o {out}: expected a new or empty folder")
    paths = [Path(f).absolute() for f in folders]
    inside = next((f for f in paths if _overlaps(out, f)), None)
    if inside is not None:
        raise MergeError(f"-o {out}: expected a folder outside the folders being merged, and it overlaps {inside}")
    merged = gather(paths)
    write(merged, out)
    return merged


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folders", nargs="+", metavar="DIR", help="results folders (--gpu-pairs-out) of shards or workers")
    parser.add_argument("-o", "--out", required=True, metavar="OUT", help="the merged results folder (new or empty)")


def run(args: argparse.Namespace) -> int:
    try:
        merged = merge(args.folders, args.out)
    except (MergeError, StoreError) as exc:
        print(f"error: {exc}")
        return 2
    except OSError as exc:
        print(f"error: could not write {args.out}: {exc.strerror or exc}")
        return 2
    for note in merged.notes:
        print(f"note: {note}")
    print(f"merged {len(merged.cases)} case(s) from {len(merged.sessions)} folder(s) into {Path(args.out).absolute()}")
    return 0
