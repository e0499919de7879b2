"""`gpu-pairs merge DIR... -o OUT`: the results folders of shards (or of xdist workers) joined into
one, as if one session had run every case, so `report`, `compare` and `dead-time` read it as usual.

Records are read and written only through ``record.store`` (each one typed on the way in and out);
a case's other files (logs, samples) are copied beside its record. Refused in one line, with
nothing written: a folder that is not a results folder or holds an unreadable record, two folders
holding the same case id with different records, and folders measured at different scales or on
different devices. The same record in two folders (a folder given twice) is kept once. Solo
baselines are per session: where two folders measured the same one, the first folder's is kept.
The merged folder is built beside ``OUT`` and renamed into place, so it appears whole or not at all.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import (
    RESULT,
    SOLO_FOLDER,
    StoreError,
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


def _records(folder: Path, pattern: str) -> list[tuple[Path, Record]]:
    found = []
    for path in sorted(folder.glob(pattern)):
        if not path.parent.name.startswith("_") or pattern.startswith(SOLO_FOLDER):
            found.append((path.parent, read_record(path)))
    return found


def gather(folders: Sequence[Path]) -> Merged:
    merged = Merged()
    merged.sessions = [(f, _session(f)) for f in folders]
    _check_same_run(merged.sessions)
    for folder in folders:
        for case_dir, record in _records(folder, f"*/{RESULT}"):
            _add_case(merged, case_dir, record)
        for solo_dir, record in _records(folder, f"{SOLO_FOLDER}/*/{RESULT}"):
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


def _copy_folder(source: Path, target: Path, record: Record) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(RESULT, ".*"))
    write_record(target, record)


def write(merged: Merged, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=out.parent))
    try:
        for case_id, (case_dir, record) in sorted(merged.cases.items()):
            _copy_folder(case_dir, staging / case_id, record)
        for name, (solo_dir, record) in sorted(merged.solos.items()):
            _copy_folder(solo_dir, staging / SOLO_FOLDER / name, record)
        first = dict(merged.sessions[0][1])
        write_session(staging, {**first, "merged_from": [str(p) for p, _ in merged.sessions],
                                "sessions": [s for _, s in merged.sessions]})
        if out.exists():
            out.rmdir()  # only an empty folder may be there: checked before
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def merge(folders: Sequence[str | Path], out: str | Path) -> Merged:
    out = Path(out).absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(f"-o {out}: expected a new or empty folder")
    folders = [Path(f).absolute() for f in folders]
    if any(out == f or out in f.parents for f in folders):
        raise MergeError(f"-o {out}: expected a folder outside the folders being merged")
    merged = gather(folders)
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
