"""The settings file's schema: every key, its type and its default, declared here and nowhere else."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from pytest_gpu_pairs.experiment.vocabulary import SHARING_MODES
from pytest_gpu_pairs.patterns import compile_pattern, group_count

HyperValue = Union[StrictBool, StrictInt, float, str]


Factors = tuple[float, float]


DEFAULT_VARY: dict[str, Factors] = {"learning_rate": (0.2, 5.0), "epochs": (0.5, 1.5)}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _compile_regex(pattern: str, groups: int | None = None) -> str:
    compiled = compile_pattern(pattern)
    if groups is not None and group_count(compiled) < groups:
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
    method: Literal["interleaved", "epoch"] = "epoch"
    phase_s: float = Field(5.0, gt=0, le=3600)
    settle_s: float = Field(1.0, ge=0, le=600)
    warmup_s: float = Field(5.0, ge=0, le=3600)


DEFAULTS = Defaults()  # what every case gets where its settings are silent


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
        """Where pair ``index`` stands in the file the user wrote (a predecessor file numbers differently)."""
        return self._pair_paths[index] if index < len(self._pair_paths) else f"$.pairs[{index}]"

    def mutate_path(self, index: int) -> str:
        """Where pair ``index``'s list of mutated hyperparameters stands (a predecessor file: under foreground)."""
        return self._mutate_paths[index] if index < len(self._mutate_paths) else f"{self.pair_path(index)}.mutate"

    def pair_vary(self, pair: PairSpec) -> dict[str, Factors]:
        """The hyperparameters the study varies for a pair, and their [min, max] factors of the default."""
        return pair.vary if pair.vary is not None else self.vary

    def workload_dir(self) -> Path:
        """Command workloads' relative ``cwd`` is read from the settings file's folder."""
        return Path(self.source).resolve().parent if self.source else Path.cwd()
