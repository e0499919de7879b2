"""Every earlier run the mutation design must not repeat: earlier result records (handed in by the
run layer, which reads the results folder) and the predecessor tool's CSVs (``historical_csvs``).

Each run becomes a key (model, mode, every effective hyperparameter) with the case ids that ran
it; a predecessor CSV row has no case id. A run recorded under the very id a case would get is that
case's own earlier result (a rerun or a resume), not a different run, so it does not push the
case to another sample: ids stay stable across runs of one file.
"""
from __future__ import annotations

import csv
import io
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pytest_gpu_pairs.compat.raw_data import seed_row_run
from pytest_gpu_pairs.experiment.mutation import RunKey, run_key
from pytest_gpu_pairs.inputs import open_regular


class GpuPairsWarning(UserWarning):
    pass


@dataclass
class History:
    runs: dict[RunKey, set[str]] = field(default_factory=lambda: defaultdict(set))
    sources: list[str] = field(default_factory=list)

    def add(self, key: RunKey, case_id: str = "") -> None:
        self.runs[key].add(case_id)

    def ran_elsewhere(self, key: RunKey, case_id: str) -> bool:
        """Was this configuration run before, by anything but this very case?"""
        ids = self.runs.get(key)
        return ids is not None and len(ids) > 0 and case_id not in ids

    def __len__(self) -> int:
        return len(self.runs)


class EarlierRun(Protocol):
    """An earlier result as the run layer read it: the typed record, or a plain mapping of its keys."""

    def get(self, name: str, /) -> Any: ...

    def __getitem__(self, name: str, /) -> Any: ...


def design_id(record: EarlierRun) -> str:
    """The id the design gave the case: without the ``-mps`` a sharing mechanism appends to it."""
    case_id, sharing = record.get("case_id") or "", record.get("sharing") or "timeslice"
    suffix = f"-{sharing}"
    return case_id[:-len(suffix)] if sharing != "timeslice" and case_id.endswith(suffix) else case_id


def add_results(history: History, records: Iterable[EarlierRun]) -> None:
    """Earlier complete results (case records and solo baselines), as the run layer read them."""
    for record in records:
        if not record.get("complete") or not record.get("fg_model"):
            continue
        hparams = record.get("fg_hparams") or {}
        history.add(run_key(record["fg_model"], hparams, record.get("mode") or "concurrent"), design_id(record))


def add_seed_csv(history: History, path: Path) -> None:
    """The runs of a predecessor CSV; a FIFO or device in its place is refused unopened (OSError)."""
    with open_regular(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            run = seed_row_run(row)
            if run is not None:
                history.add(run_key(*run))
    history.sources.append(str(path))


def resolve_csv(entry: str, settings_dir: Path) -> list[Path]:
    """Where a ``historical_csvs`` entry may be: beside the settings file, from the current folder,
    or (the predecessor tool's ``data/raw_data.csv`` in a flattened copy of its data) by name beside the
    settings file."""
    given = Path(entry)
    if given.is_absolute():
        return [given]
    return [settings_dir / given, Path.cwd() / given, settings_dir / given.name]


def add_csvs(history: History, entries: list[str], settings_dir: Path, source: str) -> None:
    """A missing or unreadable CSV is a warning: dedup goes on with the history that exists."""
    for index, entry in enumerate(entries):
        where = f"{source}: $.historical_csvs[{index}]"
        found = next((p for p in resolve_csv(entry, settings_dir) if p.is_file()), None)
        if found is None:
            looked = ", ".join(str(p) for p in dict.fromkeys(resolve_csv(entry, settings_dir)))
            warnings.warn(f"{where}: {entry} not found (looked at {looked}); deduplicating without it",
                          GpuPairsWarning, stacklevel=2)
            continue
        try:
            add_seed_csv(history, found)
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            warnings.warn(f"{where}: {found} is not a readable CSV ({exc}); deduplicating without it",
                          GpuPairsWarning, stacklevel=2)


def load_history(earlier: Iterable[EarlierRun], csvs: list[str], settings_dir: Path, source: str) -> History:
    history = History()
    add_results(history, earlier)
    add_csvs(history, csvs, settings_dir, source)
    return history
