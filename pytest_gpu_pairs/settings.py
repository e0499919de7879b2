"""Experiment files: the native format of DESIGN.md and the seed tool's formats.

Structure and types are checked by pydantic; the cross-references (does a model exist, does it
take that hyperparameter) by ``_check_references``. Either way a problem surfaces as one
``SettingsError`` line naming the file, the JSON path and what was expected, so a typo in a
three-day matrix is caught at collection, not at hour two.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, StrictBool, StrictInt, ValidationError, field_validator, model_validator

from .workloads.catalog import BUILTINS, seed_name

HyperValue = Union[StrictBool, StrictInt, float, str]


class SettingsError(ValueError):
    """A settings file is unusable; the message is one line: file, JSON path, what was expected."""

    def __init__(self, source: Path | str, path: str, message: str):
        self.source, self.json_path, self.reason = str(source), path, message
        super().__init__(f"{source}: {path}: {message}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _compile_regex(pattern: str, groups: int | None = None) -> str:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"expected a valid regular expression ({exc})") from None
    if groups is not None and compiled.groups < groups:
        raise ValueError("expected a regular expression with one capturing group for the value")
    return pattern


class HyperparameterSpec(_Strict):
    flag: Optional[str] = None
    type: Literal["int", "float", "str", "bool"] = "float"
    default: Optional[HyperValue] = None
    range: Optional[tuple[float, float]] = None
    distribution: Optional[Literal["uniform", "log_uniform"]] = None
    zero_probability: float = Field(0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _range_is_ordered(self):
        if self.range is not None:
            low, high = self.range
            if low > high:
                raise ValueError(f"expected range [low, high] with low <= high, got {list(self.range)}")
            if self.distribution == "log_uniform" and low <= 0:
                raise ValueError("expected a positive range for a log_uniform distribution")
        return self


class CommandWorkload(_Strict):
    """A user's own training command (a repository's train script), run as an argv list."""

    command: list[str] = Field(min_length=1)
    cwd: Optional[str] = None
    env: dict[str, str] = Field(default_factory=dict)
    hyperparameters: dict[str, HyperparameterSpec] = Field(default_factory=dict)
    log_patterns: dict[str, str] = Field(default_factory=dict)
    ready_pattern: Optional[str] = None

    @field_validator("log_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: dict[str, str]) -> dict[str, str]:
        return {name: _compile_regex(p, groups=1) for name, p in patterns.items()}

    @field_validator("ready_pattern")
    @classmethod
    def _ready_compiles(cls, pattern: Optional[str]) -> Optional[str]:
        return None if pattern is None else _compile_regex(pattern)

    def defaults(self) -> dict[str, Any]:
        return {n: s.default for n, s in self.hyperparameters.items() if s.default is not None}


SHARING_MODES = ("timeslice", "mps")


def _sharing_modes(value: Any) -> tuple[str, ...]:
    """One mechanism or a list of them; every case is measured once under each."""
    modes = [value] if isinstance(value, str) else value
    if not isinstance(modes, list) or not modes or not all(isinstance(m, str) and m in SHARING_MODES for m in modes):
        raise ValueError("expected 'timeslice', 'mps' or a non-empty list of them")
    return tuple(dict.fromkeys(modes))


Sharing = Annotated[Any, BeforeValidator(_sharing_modes)]


class MpsJobSettings(_Strict):
    """Limits one job gets as an MPS client (ignored when the case is time-sliced)."""

    active_thread_percentage: Optional[StrictInt] = Field(None, ge=1, le=100)
    pinned_mem_limit_mb: Optional[StrictInt] = Field(None, gt=0)


class JobRef(_Strict):
    model: str = Field(min_length=1)
    hyperparameters: dict[str, HyperValue] = Field(default_factory=dict)
    mps: Optional[MpsJobSettings] = None


_GROUP = r"^[A-Za-z0-9_.]+$"


class PairSpec(_Strict):
    group: str = Field(pattern=_GROUP)
    foreground: JobRef
    background: JobRef
    min_efficiency: Optional[float] = Field(None, ge=0)
    vram_budget_mb: Optional[float] = Field(None, gt=0)
    runs_per_config: Optional[int] = Field(None, ge=1)
    sharing: Optional[Sharing] = None
    note: Optional[str] = None


class Defaults(_Strict):
    vram_budget_mb: float = Field(7500, gt=0)
    min_efficiency: float = Field(1.0, ge=0)
    runs_per_config: int = Field(1, ge=1)
    restart_delay_s: float = Field(2.0, ge=0)
    timeout_s: float = Field(3600.0, gt=0)
    cool_down_s: float = Field(0.0, ge=0)
    sharing: Sharing = ("timeslice",)


class Experiment(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    design: Literal["pairs", "hp_study", "mutation"] = "pairs"
    defaults: Defaults = Field(default_factory=Defaults)
    workloads: dict[str, CommandWorkload] = Field(default_factory=dict)
    pairs: list[PairSpec] = Field(min_length=1)
    source: str = Field("", exclude=True)
    _pair_paths: list[str] = PrivateAttr(default_factory=list)

    def pair_path(self, index: int) -> str:
        """Where pair ``index`` stands in the file the user wrote (a seed file numbers differently)."""
        return self._pair_paths[index] if index < len(self._pair_paths) else f"$.pairs[{index}]"

    def workload_dir(self) -> Path:
        """Command workloads' relative ``cwd`` is read from the settings file's folder."""
        return Path(self.source).resolve().parent if self.source else Path.cwd()


# --- the seed tool's experiment format ---------------------------------------------------

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


def _seed_to_native(seed: _SeedFile, source: str) -> tuple[dict[str, Any], list[str]]:
    pairs, paths = [], []
    for index, entry in enumerate(seed.experiments):
        if entry.foreground is None and entry.background is None:
            continue  # the seed's files carry comment-only entries
        where = f"$.experiments[{index}]"
        if entry.foreground is None or entry.background is None:
            raise SettingsError(source, where, "expected both 'foreground' and 'background' for a parallel experiment")
        if entry.foreground.mutate:
            raise SettingsError(source, f"{where}.foreground.mutate",
                                "mutation experiments are not supported by this loader yet")
        pair = {"group": _seed_group(entry, index),
                "foreground": _seed_job(entry.foreground, f"{where}.foreground", source),
                "background": _seed_job(entry.background, f"{where}.background", source)}
        if entry.runs_per_config is not None:
            pair["runs_per_config"] = entry.runs_per_config
        if entry.note:
            pair["note"] = entry.note
        pairs.append(pair)
        paths.append(where)
    native = {"name": seed.experiment_name, "description": seed.description, "design": "pairs",
              "defaults": {"runs_per_config": seed.runs_per_config}, "pairs": pairs}
    return native, paths


# --- loading ----------------------------------------------------------------------------

def _json_path(loc: tuple) -> str:
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _first_error(exc: ValidationError, source: str) -> SettingsError:
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
    kind, message = err["type"], err["msg"]
    if kind == "missing":
        text = "required key is missing"
    elif kind == "extra_forbidden":
        text = "unexpected key (check its spelling against DESIGN.md's settings format)"
    else:
        text = message.removeprefix("Value error, ")
        text = f"{text[0].lower()}{text[1:]}, got {err.get('input')!r}" if text else repr(err.get("input"))
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return SettingsError(source, _json_path(loc), text + more)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(path, "$", f"expected a readable JSON file ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(path, "$", f"expected valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _known_hyperparameters(experiment: Experiment, model: str) -> dict[str, Any] | None:
    if model in experiment.workloads:
        return dict(experiment.workloads[model].hyperparameters)
    if model in BUILTINS:
        return dict(BUILTINS[model].hyperparameters)
    return None


def _check_job(experiment: Experiment, job: JobRef, where: str) -> None:
    known = _known_hyperparameters(experiment, job.model)
    if known is None:
        choices = ", ".join(sorted(set(BUILTINS) | set(experiment.workloads)))
        raise SettingsError(experiment.source, f"{where}.model",
                            f"expected a built-in workload or a key of $.workloads ({choices}), got {job.model!r}")
    for name, value in job.hyperparameters.items():
        if name not in known:
            raise SettingsError(experiment.source, f"{where}.hyperparameters.{name}",
                                f"expected one of {job.model}'s hyperparameters ({', '.join(sorted(known))})")
        _check_value_type(experiment.source, f"{where}.hyperparameters.{name}", known[name].type, value)


def _check_value_type(source: str, where: str, kind: str, value: Any) -> None:
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool),
          "str": isinstance(value, str),
          "bool": isinstance(value, bool)}[kind]
    if kind == "int" and isinstance(value, float) and value.is_integer():
        ok = False
    if not ok:
        raise SettingsError(source, where, f"expected a value of type {kind}, got {value!r}")


def _check_references(experiment: Experiment) -> None:
    for index, pair in enumerate(experiment.pairs):
        where = experiment.pair_path(index)
        _check_job(experiment, pair.foreground, f"{where}.foreground")
        _check_job(experiment, pair.background, f"{where}.background")


def is_seed_experiment(data: Any) -> bool:
    return isinstance(data, dict) and "experiments" in data and "pairs" not in data


def parse_experiment(data: Any, source: str) -> Experiment:
    """Validate already-parsed JSON in either format; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise SettingsError(source, "$", f"expected a JSON object, got {type(data).__name__}")
    pair_paths: list[str] = []
    if is_seed_experiment(data):
        try:
            seed = _SeedFile.model_validate(data)
        except ValidationError as exc:
            raise _first_error(exc, source) from None
        data, pair_paths = _seed_to_native(seed, source)
    try:
        experiment = Experiment.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    experiment._pair_paths = pair_paths
    _check_references(experiment)
    return experiment


def load_experiment(path: str | Path) -> Experiment:
    path = Path(path)
    return parse_experiment(_read_json(path), str(path))
