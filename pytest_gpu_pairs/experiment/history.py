"""Every earlier run the mutation design must not repeat: result records in the out directory and
the seed tool's CSVs (``historical_csvs``).

Each run becomes a key (model, mode, every effective hyperparameter) with the case ids that ran
it; a seed CSV row has no case id. A run recorded under the very id a case would get is that
case's own earlier result (a rerun or a resume), not a different run, so it does not push the
case to another sample: ids stay stable across runs of one file.
"""
from __future__ import annotations

import csv
import json
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from pytest_gpu_pairs.experiment.mutation import RunKey, run_key
from pytest_gpu_pairs.catalog import BUILTINS, seed_name

SEED_PARALLEL_SUFFIX = "_parallel"


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
        return bool(ids) and case_id not in ids

    def __len__(self) -> int:
        return len(self.runs)


def result_files(out_dir: Path) -> Iterable[Path]:
    """Case records and solo baselines; a repeat's round records are covered by their case's."""
    yield from out_dir.glob("*/result.json")
    yield from out_dir.glob("_solo/*/result.json")


def design_id(record: dict[str, Any]) -> str:
    """The id the design gave the case: without the ``-mps`` a sharing mechanism appends to it."""
    case_id, sharing = record.get("case_id") or "", record.get("sharing") or "timeslice"
    suffix = f"-{sharing}"
    return case_id[:-len(suffix)] if sharing != "timeslice" and case_id.endswith(suffix) else case_id


def add_results(history: History, out_dir: Optional[Path]) -> None:
    if out_dir is None or not out_dir.is_dir():
        return
    for path in result_files(out_dir):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(record, dict) or not record.get("complete") or not record.get("fg_model"):
            continue
        hparams = record.get("fg_hparams") or {}
        history.add(run_key(record["fg_model"], hparams, record.get("mode") or "concurrent"), design_id(record))
    history.sources.append(str(out_dir))


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def seed_row_run(row: Mapping[str, str]) -> Optional[tuple[str, dict[str, Any], str]]:
    """(built-in model, effective hyperparameters, mode) of one seed CSV row, or None.

    Parallel rows keep the foreground in ``fg_*`` columns, except older ones that used the plain
    columns; values the seed did not pass were the workload's defaults, so defaults fill them.
    """
    parallel = row.get("mode") == "parallel" or (row.get("experiment_id") or "").endswith(SEED_PARALLEL_SUFFIX)
    prefix = "fg_" if parallel and row.get("fg_model") else ""
    model = seed_name(row.get(f"{prefix}repository") or "", row.get(f"{prefix}model") or "")
    if model is None:
        return None
    hparams = BUILTINS[model].defaults()
    for name in hparams:
        value = _number(row.get(f"{prefix}hyperparam_{name}"))
        if value is not None:
            hparams[name] = value
    return model, hparams, "concurrent" if parallel else "solo"


def add_seed_csv(history: History, path: Path) -> None:
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            run = seed_row_run(row)
            if run is not None:
                history.add(run_key(*run))
    history.sources.append(str(path))


def resolve_csv(entry: str, settings_dir: Path) -> list[Path]:
    """Where a ``historical_csvs`` entry may be: beside the settings file, from the current folder,
    or (the seed tool's ``data/raw_data.csv`` in a flattened copy of its data) by name beside the
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


def load_history(out_dir: Optional[Path], csvs: list[str], settings_dir: Path, source: str) -> History:
    history = History()
    add_results(history, out_dir)
    add_csvs(history, csvs, settings_dir, source)
    return history
