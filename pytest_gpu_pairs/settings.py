"""Experiment files: the native format of DESIGN.md and the seed tool's formats.

Structure and types are checked by pydantic; the cross-references (does a model exist, does it
take that hyperparameter) by ``_check_references``. Either way a problem surfaces as one
``SettingsError`` line naming the file, the JSON path and what was expected, so a typo in a
three-day matrix is caught at collection, not at hour two.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, StrictBool, StrictInt, ValidationError, field_validator, model_validator

from .workloads.catalog import BUILTINS, FRACTIONAL, seed_name

HyperValue = Union[StrictBool, StrictInt, float, str]
Factors = tuple[float, float]
DEFAULT_VARY: dict[str, Factors] = {"learning_rate": (0.2, 5.0), "epochs": (0.5, 1.5)}


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


def _positive_factors(vary: Optional[dict[str, Factors]]) -> Optional[dict[str, Factors]]:
    for name, factors in (vary or {}).items():
        if min(factors) <= 0:
            raise ValueError(f"expected positive [min, max] factors of the default for {name}, got {list(factors)}")
    return vary


class PairSpec(_Strict):
    group: str = Field(pattern=_GROUP)
    foreground: JobRef
    background: JobRef
    min_efficiency: Optional[float] = Field(None, ge=0)
    vram_budget_mb: Optional[float] = Field(None, gt=0)
    runs_per_config: Optional[int] = Field(None, ge=1)
    sharing: Optional[Sharing] = None
    note: Optional[str] = None
    vary: Optional[dict[str, Factors]] = Field(None, min_length=1)
    mutate: Optional[list[str]] = Field(None, min_length=1)
    mutations: Optional[int] = Field(None, ge=1)

    @field_validator("vary")
    @classmethod
    def _factors_are_positive(cls, vary):
        return _positive_factors(vary)


class Defaults(_Strict):
    vram_budget_mb: float = Field(7500, gt=0)
    min_efficiency: float = Field(1.0, ge=0)
    runs_per_config: int = Field(1, ge=1)
    restart_delay_s: float = Field(2.0, ge=0)
    timeout_s: float = Field(3600.0, gt=0)
    cool_down_s: float = Field(0.0, ge=0)
    sharing: Sharing = ("timeslice",)
    ready_timeout_s: float = Field(600.0, gt=0)
    crash_loop_failures: int = Field(3, ge=1)
    crash_loop_window_s: float = Field(300.0, gt=0)


class MutationSettings(_Strict):
    """How the mutation design samples: seeded (stable case ids), deduplicated against history."""

    seed: int = 0
    dedup: bool = True
    historical_csvs: list[str] = Field(default_factory=list)
    max_attempts: int = Field(1000, ge=1)


class Experiment(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    design: Literal["pairs", "hp_study", "mutation"] = "pairs"
    defaults: Defaults = Field(default_factory=Defaults)
    workloads: dict[str, CommandWorkload] = Field(default_factory=dict)
    vary: dict[str, Factors] = Field(default_factory=lambda: dict(DEFAULT_VARY), min_length=1)
    mutation: MutationSettings = Field(default_factory=MutationSettings)
    workloads_file: list[str] = Field(default_factory=list)
    pairs: list[PairSpec] = Field(min_length=1)
    source: str = Field("", exclude=True)
    _pair_paths: list[str] = PrivateAttr(default_factory=list)
    _mutate_paths: list[str] = PrivateAttr(default_factory=list)

    @field_validator("vary")
    @classmethod
    def _factors_are_positive(cls, vary):
        return _positive_factors(vary)

    @field_validator("workloads_file", mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return [value] if isinstance(value, str) else value

    def pair_path(self, index: int) -> str:
        """Where pair ``index`` stands in the file the user wrote (a seed file numbers differently)."""
        return self._pair_paths[index] if index < len(self._pair_paths) else f"$.pairs[{index}]"

    def mutate_path(self, index: int) -> str:
        """Where pair ``index``'s list of mutated hyperparameters stands (a seed file: under foreground)."""
        return self._mutate_paths[index] if index < len(self._mutate_paths) else f"{self.pair_path(index)}.mutate"

    def pair_vary(self, pair: PairSpec) -> dict[str, Factors]:
        """The hyperparameters the study varies for a pair, and their [min, max] factors of the default."""
        return pair.vary if pair.vary is not None else self.vary

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


def _seed_pair(seed: _SeedFile, entry: _SeedEntry, index: int, where: str, source: str) -> dict[str, Any]:
    """One parallel entry. In a mutated entry the seed's ``runs_per_config`` counts distinct samples
    (its comments: "batch_size: 3->5, need 2, set 3"), so it becomes ``mutations``, each run once."""
    pair = {"group": _seed_group(entry, index),
            "foreground": _seed_job(entry.foreground, f"{where}.foreground", source),
            "background": _seed_job(entry.background, f"{where}.background", source)}
    if entry.foreground.mutate:
        pair["mutate"] = list(entry.foreground.mutate)
        pair["mutations"] = entry.runs_per_config or seed.runs_per_config
    elif entry.runs_per_config is not None:
        pair["runs_per_config"] = entry.runs_per_config
    if entry.note:
        pair["note"] = entry.note
    return pair


def _seed_to_native(seed: _SeedFile, source: str) -> tuple[dict[str, Any], list[str], list[str]]:
    pairs, paths, mutate_paths = [], [], []
    for index, entry in enumerate(seed.experiments):
        if entry.foreground is None and entry.background is None:
            continue  # the seed's files carry comment-only entries
        where = f"$.experiments[{index}]"
        if entry.foreground is None or entry.background is None:
            raise SettingsError(source, where, "expected both 'foreground' and 'background' for a parallel experiment")
        pairs.append(_seed_pair(seed, entry, index, where, source))
        paths.append(where)
        mutate_paths.append(f"{where}.foreground.mutate")
    mutated = any("mutate" in pair for pair in pairs)
    native = {"name": seed.experiment_name, "description": seed.description,
              "design": "mutation" if mutated else "pairs",
              "defaults": {"runs_per_config": 1 if mutated else seed.runs_per_config}, "pairs": pairs}
    if mutated:
        native["mutation"] = {"dedup": seed.use_deduplication, "historical_csvs": seed.historical_csvs}
    return native, paths, mutate_paths


# --- workloads files: the seed's models_config.json, or a native {"workloads": {...}} ------

class _SeedMetrics(BaseModel):
    model_config = ConfigDict(extra="allow")
    log_patterns: dict[str, str] = Field(default_factory=dict)


class _SeedRepo(_Strict):
    path: str = Field(min_length=1)
    train_script: str = Field(min_length=1)
    models: list[str] = Field(min_length=1)
    supported_hyperparams: dict[str, HyperparameterSpec] = Field(default_factory=dict)
    model_flag: Optional[str] = None
    required_args: dict[str, str] = Field(default_factory=dict)
    performance_metrics: _SeedMetrics = Field(default_factory=_SeedMetrics)


class _SeedModelsConfig(_Strict):
    models: dict[str, _SeedRepo] = Field(min_length=1)


class _NativeWorkloads(_Strict):
    workloads: dict[str, CommandWorkload] = Field(min_length=1)


def seed_workload_name(repo: str, model: str) -> str:
    """The seed's own key for a repository's model (``examples_mnist``, ``MRT-OAST_default``):
    no slash, so it can name a case and its results folder."""
    return f"{repo}_{model}"


def _seed_command(repo: _SeedRepo, model: str, folder: Path) -> dict[str, Any]:
    argv = [repo.train_script]
    if repo.model_flag:
        argv += [repo.model_flag, model]
    for value in repo.required_args.values():
        argv += shlex.split(value)
    return {"command": argv, "cwd": str((folder / repo.path).resolve()),
            "hyperparameters": {n: h.model_dump(exclude_defaults=True) for n, h in repo.supported_hyperparams.items()},
            "log_patterns": dict(repo.performance_metrics.log_patterns)}


def parse_workloads_file(data: Any, source: str) -> dict[str, CommandWorkload]:
    """Command workloads from a workloads file: the seed's ``models_config.json`` (top-level
    ``models``: one workload per repository and model, named ``<repo>_<model>``, argv
    ``[train_script, model_flag, model, *required_args, flags...]``, cwd the repository's path,
    log patterns from ``performance_metrics``) or a native ``{"workloads": {...}}``. Relative
    paths are read from the file's folder."""
    if not isinstance(data, dict) or not ({"models", "workloads"} & set(data)):
        raise SettingsError(source, "$", "expected a workloads file: an object with 'models' (the seed's "
                                         "models_config.json) or 'workloads'")
    folder = Path(source).resolve().parent
    try:
        if "workloads" in data:
            native = _NativeWorkloads.model_validate(data).workloads
            return {name: w.model_copy(update={"cwd": str((folder / (w.cwd or ".")).resolve())})
                    for name, w in native.items()}
        seed = _SeedModelsConfig.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    workloads = {}
    for repo_name, repo in seed.models.items():
        for model in repo.models:
            where = f"$.models.{repo_name}"
            try:
                workloads[seed_workload_name(repo_name, model)] = CommandWorkload.model_validate(
                    _seed_command(repo, model, folder))
            except ValidationError as exc:
                error = _first_error(exc, source)
                raise SettingsError(source, where, error.reason) from None
            except ValueError as exc:
                raise SettingsError(source, f"{where}.required_args", f"expected shell-like arguments ({exc})") from None
    return workloads


def load_workloads_file(path: str | Path) -> dict[str, CommandWorkload]:
    path = Path(path)
    return parse_workloads_file(_read_json(path), str(path))


def _merge_workloads_files(experiment: Experiment) -> None:
    """Add the workloads of ``workloads_file`` entries (relative to the settings file); a name
    defined twice is refused rather than silently shadowed."""
    for index, name in enumerate(experiment.workloads_file):
        path = Path(name)
        if not path.is_absolute():
            path = experiment.workload_dir() / path
        where = f"$.workloads_file[{index}]"
        if not path.is_file():
            raise SettingsError(experiment.source, where, f"expected an existing workloads file, got {name!r}")
        for key, workload in load_workloads_file(path).items():
            if key in experiment.workloads:
                raise SettingsError(experiment.source, where, f"workload {key!r} is also defined elsewhere; rename one")
            experiment.workloads[key] = workload


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


def hyperparameter_specs(experiment: Experiment, model: str) -> dict[str, Any]:
    """A model's hyperparameters (catalog entries or a command workload's specs), by name."""
    return _known_hyperparameters(experiment, model) or {}


def value_kind(experiment: Experiment, model: str, name: str, spec: Any) -> str:
    """The type a value must have; a built-in's epochs may be fractional (see catalog.FRACTIONAL)."""
    return "float" if model in BUILTINS and model not in experiment.workloads and name in FRACTIONAL else spec.type


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
        kind = value_kind(experiment, job.model, name, known[name])
        _check_value_type(experiment.source, f"{where}.hyperparameters.{name}", kind, value)


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
        _check_design_keys(experiment, index, pair)


_DESIGN_KEYS = {"vary": "hp_study", "mutate": "mutation", "mutations": "mutation"}


def _check_design_keys(experiment: Experiment, index: int, pair: PairSpec) -> None:
    """Each design's pair keys only where that design reads them, and naming what exists."""
    where = experiment.pair_path(index)
    for key, design in _DESIGN_KEYS.items():
        if getattr(pair, key) is not None and experiment.design != design:
            raise SettingsError(experiment.source, f"{where}.{key}",
                                f"expected only with design {design!r} (this file's design is {experiment.design!r})")
    if experiment.design == "hp_study":
        _check_vary(experiment, index, pair)
    if pair.mutate is not None:
        _check_mutate(experiment, index, pair)


def _effective_default(experiment: Experiment, job: JobRef, name: str) -> Any:
    known = _known_hyperparameters(experiment, job.model)
    return job.hyperparameters.get(name, known[name].default)


def _check_vary(experiment: Experiment, index: int, pair: PairSpec) -> None:
    where = f"{experiment.pair_path(index)}.vary" if pair.vary is not None else "$.vary"
    known = _known_hyperparameters(experiment, pair.foreground.model)
    for name in experiment.pair_vary(pair):
        if name not in known:
            raise SettingsError(experiment.source, f"{where}.{name}",
                                f"expected one of {pair.foreground.model}'s hyperparameters to vary "
                                f"({', '.join(sorted(known))}); give the pair its own 'vary'")
        default = _effective_default(experiment, pair.foreground, name)
        if isinstance(default, bool) or not isinstance(default, (int, float)) or default <= 0:
            raise SettingsError(experiment.source, f"{where}.{name}",
                                f"expected a hyperparameter with a positive numeric default to scale, "
                                f"{pair.foreground.model}'s {name} is {default!r}")


def _check_mutate(experiment: Experiment, index: int, pair: PairSpec) -> None:
    where = experiment.mutate_path(index)
    known = _known_hyperparameters(experiment, pair.foreground.model)
    for position, name in enumerate(pair.mutate):
        if name == "all":
            continue
        if name not in known:
            raise SettingsError(experiment.source, f"{where}[{position}]",
                                f"expected one of {pair.foreground.model}'s hyperparameters or 'all' "
                                f"({', '.join(sorted(known))}), got {name!r}")
        spec = known[name]
        if spec.range is None or spec.type not in ("int", "float"):
            raise SettingsError(experiment.source, f"{where}[{position}]",
                                f"expected a numeric hyperparameter with a range to sample from; "
                                f"{pair.foreground.model}'s {name} has none")
        if spec.type == "int" and math.ceil(spec.range[0]) > math.floor(spec.range[1]):
            raise SettingsError(experiment.source, f"{where}[{position}]",
                                f"expected an int range holding at least one integer, got {list(spec.range)}")


def is_seed_experiment(data: Any) -> bool:
    return isinstance(data, dict) and "experiments" in data and "pairs" not in data


def parse_experiment(data: Any, source: str) -> Experiment:
    """Validate already-parsed JSON in either format; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise SettingsError(source, "$", f"expected a JSON object, got {type(data).__name__}")
    pair_paths: list[str] = []
    mutate_paths: list[str] = []
    if is_seed_experiment(data):
        try:
            seed = _SeedFile.model_validate(data)
        except ValidationError as exc:
            raise _first_error(exc, source) from None
        data, pair_paths, mutate_paths = _seed_to_native(seed, source)
    try:
        experiment = Experiment.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    experiment._pair_paths = pair_paths
    experiment._mutate_paths = mutate_paths
    _merge_workloads_files(experiment)
    _check_references(experiment)
    return experiment


def load_experiment(path: str | Path) -> Experiment:
    path = Path(path)
    return parse_experiment(_read_json(path), str(path))
