"""The predecessor tool's experiment files, translated into the native settings format."""
from __future__ import annotations

import re
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from pytest_gpu_pairs.catalog import seed_name
from pytest_gpu_pairs.inputs import SettingsError, first_error

PREDECESSOR_CARD_MB = 10240.0  # the predecessor's RTX 3080 (10 GB): its experiment files' verdicts are about this card

HyperValue = Union[StrictBool, StrictInt, float, str]


class _SeedJob(BaseModel):
    model_config = ConfigDict(extra="allow")
    repo: str
    model: str
    mode: Optional[str] = None
    hyperparameters: dict[str, HyperValue] = Field(default_factory=dict)
    mutate: Optional[list[str]] = None


class _SeedEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: Optional[str] = None
    foreground: Optional[_SeedJob] = None
    background: Optional[_SeedJob] = None
    runs_per_config: Optional[int] = Field(None, ge=1)
    note: Optional[str] = None


class _SeedFile(BaseModel):
    model_config = ConfigDict(extra="allow")
    experiment_name: str
    description: str = ""
    mode: Optional[str] = None
    runs_per_config: int = Field(1, ge=1)
    use_deduplication: bool = False
    historical_csvs: list[str] = Field(default_factory=list)
    experiments: list[_SeedEntry] = Field(min_length=1)


_GROUP_NOTE = re.compile(r"Group\s+(\d+)", re.IGNORECASE)


def _seed_group(entry: _SeedEntry, index: int) -> str:
    found = _GROUP_NOTE.search(entry.note or "")
    return f"g{int(found.group(1)) if found else index + 1:02d}"


def _seed_job(job: _SeedJob, where: str, source: str) -> dict[str, Any]:
    name = seed_name(job.repo, job.model)
    if name is None:
        raise SettingsError(source, where, f"expected a known seed repo/model pair, got {job.repo!r}/{job.model!r}")
    return {"model": name, "hyperparameters": dict(job.hyperparameters)}


def _seed_pair(seed: _SeedFile, entry: _SeedEntry, jobs: tuple[_SeedJob, _SeedJob], index: int, where: str,
               source: str) -> dict[str, Any]:
    """One parallel entry. In a mutated entry the predecessor's ``runs_per_config`` counts distinct samples
    (its comments: "batch_size: 3->5, need 2, set 3"), so it becomes ``mutations``, each run once."""
    foreground, background = jobs
    pair: dict[str, Any] = {"group": _seed_group(entry, index),
                            "foreground": _seed_job(foreground, f"{where}.foreground", source),
                            "background": _seed_job(background, f"{where}.background", source)}
    if foreground.mutate:
        pair["mutate"] = list(foreground.mutate)
        pair["mutations"] = entry.runs_per_config or seed.runs_per_config
    elif entry.runs_per_config is not None:
        pair["runs_per_config"] = entry.runs_per_config
    if entry.note:
        pair["note"] = entry.note
    return pair


def _to_native(seed: _SeedFile, source: str) -> tuple[dict[str, Any], list[str], list[str]]:
    pairs, paths, mutate_paths = [], [], []
    for index, entry in enumerate(seed.experiments):
        if entry.foreground is None and entry.background is None:
            continue  # the predecessor's files carry comment-only entries
        where = f"$.experiments[{index}]"
        if entry.foreground is None or entry.background is None:
            raise SettingsError(source, where, "expected both 'foreground' and 'background' for a parallel experiment")
        pairs.append(_seed_pair(seed, entry, (entry.foreground, entry.background), index, where, source))
        paths.append(where)
        mutate_paths.append(f"{where}.foreground.mutate")
    mutated = any("mutate" in pair for pair in pairs)
    native: dict[str, Any] = {"name": seed.experiment_name, "description": seed.description,
              "design": "mutation" if mutated else "pairs",
              "defaults": {"runs_per_config": 1 if mutated else seed.runs_per_config,
                           "card_mb": PREDECESSOR_CARD_MB}, "pairs": pairs}
    if mutated:
        native["mutation"] = {"dedup": seed.use_deduplication, "historical_csvs": seed.historical_csvs}
    return native, paths, mutate_paths


def is_seed_experiment(data: Any) -> bool:
    return isinstance(data, dict) and "experiments" in data and "pairs" not in data


def to_native(data: dict[str, Any], source: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """The native settings of a predecessor experiment file, with the JSON path in the original
    file of every pair and of every pair's list of mutated hyperparameters (errors name those)."""
    try:
        seed = _SeedFile.model_validate(data)
    except ValidationError as exc:
        raise first_error(exc, source) from None
    return _to_native(seed, source)
