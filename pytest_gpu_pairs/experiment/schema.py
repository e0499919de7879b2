"""The settings file's schema: every key, its type and its default, declared here and nowhere else."""
from __future__ import annotations

import math
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    AfterValidator,
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

from pytest_gpu_pairs.experiment.logformats import check_progress_pattern, preset_pattern
from pytest_gpu_pairs.experiment.vocabulary import SHARING_MODES
from pytest_gpu_pairs.inputs import describe_number, is_finite_number
from pytest_gpu_pairs.patterns import compile_pattern, group_count

NAME_MAX = 64  # a workload, hyperparameter or group name; a case id joins several into one folder name
ID_MAX = 200  # a case id is a folder name: file systems allow 255 bytes
ENV_NAME_MAX = 255


def name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot stand as one folder name of its own (a case folder joins names), or
    None. ``x/../../escaped`` would put a case folder outside the output folder."""
    if not name:
        return "expected a non-empty name"
    if len(name) > NAME_MAX:
        return f"expected a name of at most {NAME_MAX} characters (this one has {len(name)})"
    if name in (".", "..") or any(c in "/\\" or unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name):
        return "expected a name that is one folder name (no '/', '\\', control characters, '.' or '..')"
    return None


def _safe_name(name: str) -> str:
    problem = name_problem(name)
    if problem:
        raise ValueError(problem)
    return name


def _no_nul(text: str) -> str:
    """Values end up in argv, environments and paths, where a NUL byte cannot go."""
    if "\x00" in text:
        raise ValueError("expected text without NUL characters")
    return text


def _env_name(name: str) -> str:
    if not name or "=" in name or "\x00" in name or len(name) > ENV_NAME_MAX:
        raise ValueError(f"expected an environment variable name (non-empty, no '=' or NUL, at most "
                         f"{ENV_NAME_MAX} characters)")
    return name


Name = Annotated[str, AfterValidator(_safe_name)]
Text = Annotated[str, AfterValidator(_no_nul)]
EnvName = Annotated[str, AfterValidator(_env_name)]


def _hyper_value(value: Any) -> Any:
    """A hyperparameter value: a boolean, a whole number, a finite number or text without NUL."""
    if isinstance(value, str):
        return _no_nul(value)
    if not isinstance(value, (bool, int, float)):
        raise ValueError("expected a number, a string or a boolean")
    if not isinstance(value, bool) and not is_finite_number(value):
        raise ValueError(f"expected a finite number (no NaN or Infinity, no integer beyond a float's range), "
                         f"got {describe_number(value)}")
    return value


HyperValue = Annotated[Union[StrictBool, StrictInt, float, str], BeforeValidator(_hyper_value)]


Factors = tuple[float, float]


DEFAULT_VARY: dict[str, Factors] = {"learning_rate": (0.2, 5.0), "epochs": (0.5, 1.5)}


class _Strict(BaseModel):
    """Unknown keys are refused, and so are NaN and Infinity (Python's JSON reader accepts them)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _compile_regex(pattern: str, groups: int | None = None) -> str:
    compiled = compile_pattern(pattern)
    if groups is not None and group_count(compiled) < groups:
        raise ValueError("expected a regular expression with one capturing group for the value")
    return pattern


def value_type_problem(kind: str, value: Any) -> Optional[str]:
    """Why ``value`` is not of the hyperparameter type ``kind`` (an int is not a float-looking 3.0)."""
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool),
          "str": isinstance(value, str),
          "bool": isinstance(value, bool)}[kind]
    return None if ok else f"expected a value of type {kind}, got {value!r}"


def range_problem(value: Any, bounds: Optional[tuple[float, float]], zero_allowed: bool = False) -> Optional[str]:
    """A value on the wrong side of zero for its ``range``. The range is where mutation samples,
    so a value beyond it is fine (``epochs`` 1 for a quick run of a workload sampled from [5, 15]);
    but a range of positive values says the hyperparameter is positive, and ``epochs`` 0 or -1
    would train nothing and pass. ``zero_allowed``: its ``zero_probability`` says 0 is a value it
    takes (the predecessor's weight decay), so mutation draws it and the settings may write it."""
    if bounds is None or isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
        return None
    if zero_allowed and value == 0:
        return None
    low, high = bounds
    if low > 0 and value <= 0:
        return f"expected a value above 0, as its range [{low:g}, {high:g}] says, got {value!r}"
    if low >= 0 and value < 0:
        return f"expected a value of 0 or more, as its range [{low:g}, {high:g}] says, got {value!r}"
    return None


class HyperparameterSpec(_Strict):
    flag: Optional[Text] = None
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
            if not math.isfinite(high - low):
                raise ValueError(f"expected a range whose width is a finite number, got {list(self.range)}")
        if self.range is not None and self.type not in ("int", "float"):
            raise ValueError(f"expected a range only for an int or float hyperparameter, this one is {self.type}")
        return self

    @model_validator(mode="after")
    def _default_fits(self):
        if self.default is not None:
            problem = value_type_problem(self.type, self.default)  # it may lie outside the sampling range
            if problem:
                raise ValueError(f"default: {problem}")
        return self


class CommandWorkload(_Strict):
    """A user's own training command (a repository's train script), run as an argv list."""

    command: list[Text] = Field(min_length=1)
    cwd: Optional[Text] = None
    env: dict[EnvName, Text] = Field(default_factory=dict)
    hyperparameters: dict[Name, HyperparameterSpec] = Field(default_factory=dict)
    log_patterns: dict[Name, str] = Field(default_factory=dict)
    ready_pattern: Optional[str] = None
    progress_pattern: Optional[str] = None
    progress_preset: Optional[str] = None

    @field_validator("command")
    @classmethod
    def _program_named(cls, command: list[str]) -> list[str]:
        if not command[0]:
            raise ValueError("expected the program to run as the command's first entry")
        return command

    @field_validator("log_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: dict[str, str]) -> dict[str, str]:
        return {name: _compile_regex(p, groups=1) for name, p in patterns.items()}

    @field_validator("ready_pattern")
    @classmethod
    def _ready_compiles(cls, pattern: Optional[str]) -> Optional[str]:
        return None if pattern is None else _compile_regex(pattern)

    @field_validator("progress_pattern")
    @classmethod
    def _progress_groups(cls, pattern: Optional[str]) -> Optional[str]:
        return None if pattern is None else check_progress_pattern(pattern)

    @field_validator("progress_preset")
    @classmethod
    def _known_preset(cls, name: Optional[str]) -> Optional[str]:
        if name is not None:
            preset_pattern(name)
        return name

    @model_validator(mode="after")
    def _one_progress_source(self):
        if self.progress_pattern is not None and self.progress_preset is not None:
            raise ValueError("expected progress_pattern or progress_preset, not both")
        return self

    @property
    def progress_regex(self) -> Optional[str]:
        """The pattern its log's progress lines are read with (its own, or its preset's), if any."""
        return preset_pattern(self.progress_preset) if self.progress_preset else self.progress_pattern

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
    model: Name
    hyperparameters: dict[Name, HyperValue] = Field(default_factory=dict)
    mps: Optional[MpsJobSettings] = None


_GROUP = r"^[A-Za-z0-9_.]+$"


def _positive_factors(vary: Optional[dict[str, Factors]]) -> Optional[dict[str, Factors]]:
    for name, factors in (vary or {}).items():
        if min(factors) <= 0 or max(factors) > 1000 or not all(math.isfinite(f) for f in factors):
            raise ValueError(f"expected positive [min, max] factors of the default (at most 1000) for {name}, "
                             f"got {list(factors)}")
    return vary


MAX_RUNS = 1000  # rounds of one case; more is a typo, not a plan
MAX_MUTATIONS = 10_000
MAX_EFFICIENCY = 100.0
MAX_VRAM_MB = 1e7  # 10 TB: no card has that
MAX_STARTS = 16  # independent starts of one pair in a case; more is a typo, not a plan
MAX_JOBS = 8  # jobs of one group sharing a GPU; each needs a core of its own, and more is a typo
MAX_SEEDS = 100  # replicates of a study's every run; more is a typo, not a plan
DAY_S = 86400.0


GROUP_JOB_KEYS = ("foreground", "background", "backgrounds", "jobs")  # a group names its jobs with some of these
MAX_EXPECTATIONS = 16


def _ordered_range(bounds: Optional[tuple[float, float]]) -> Optional[tuple[float, float]]:
    if bounds is not None and bounds[0] > bounds[1]:
        raise ValueError(f"expected [low, high] with low <= high, got {list(bounds)}")
    return bounds


Range = Annotated[tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)]], AfterValidator(_ordered_range)]


class Expectation(_Strict):
    """What someone predicted for a group before it was measured, kept beside the group so that a
    study can hold the prediction against the measurement (``gpu-pairs study collect``). Each figure
    is optional; one that is given is judged, one that is not is left out of the verdict."""

    name: Text = Field(min_length=1, max_length=NAME_MAX)
    source: Text = Field(min_length=1)
    said: Optional[Text] = None  # the prediction in its author's words
    efficiency: Optional[Range] = None  # the predicted range of the group's efficiency
    time_saved: Optional[tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]]] = None
    vram_mb: Optional[float] = Field(None, gt=0, le=MAX_VRAM_MB)  # the memory the author expected the group to need
    fits: Optional[StrictBool] = None  # the author's verdict on the group's memory budget

    @field_validator("time_saved")
    @classmethod
    def _time_saved_is_ordered(cls, bounds):
        return _ordered_range(bounds)


class PairSpec(_Strict):
    """A group of jobs that share one GPU: a foreground with one ``background`` (a pair) or a list of
    ``backgrounds``, or ``jobs`` where no job is the foreground (all measured alike; the first is
    recorded under the ``fg_`` keys)."""

    group: str = Field(pattern=_GROUP, max_length=NAME_MAX)
    foreground: Optional[JobRef] = None
    background: Optional[JobRef] = None
    backgrounds: Optional[list[JobRef]] = Field(None, min_length=1, max_length=MAX_JOBS - 1)
    jobs: Optional[list[JobRef]] = Field(None, min_length=2, max_length=MAX_JOBS)
    min_efficiency: Optional[float] = Field(None, ge=0, le=MAX_EFFICIENCY)
    vram_budget_mb: Optional[float] = Field(None, gt=0, le=MAX_VRAM_MB)
    runs_per_config: Optional[StrictInt] = Field(None, ge=1, le=MAX_RUNS)
    sharing: Optional[Sharing] = None
    note: Optional[str] = None
    expect: Optional[list[Expectation]] = Field(None, min_length=1, max_length=MAX_EXPECTATIONS)
    vary: Optional[dict[Name, Factors]] = Field(None, min_length=1)
    mutate: Optional[list[Name]] = Field(None, min_length=1)
    mutations: Optional[StrictInt] = Field(None, ge=1, le=MAX_MUTATIONS)
    split_by_factor: Optional[StrictBool] = None
    """hp_study: each seed's replicate measured as one block per varied factor (A alone; B at the
    default and the factor's bounds, alone and shared), so that a block, not the whole replicate,
    must fit one machine's session"""

    @field_validator("vary")
    @classmethod
    def _factors_are_positive(cls, vary):
        return _positive_factors(vary)

    @model_validator(mode="after")
    def _one_way_to_name_its_jobs(self):
        named = [key for key in GROUP_JOB_KEYS if getattr(self, key) is not None]
        if named in (["foreground", "background"], ["foreground", "backgrounds"], ["jobs"]):
            return self
        raise ValueError(f"expected 'foreground' with 'background' (a pair) or with 'backgrounds' (a list), or "
                         f"'jobs' alone (a list of at least 2), got {', '.join(map(repr, named)) or 'none of them'}")

    def job_refs(self) -> list[tuple[str, JobRef]]:
        """Every job of the group, the foreground first, each with its path under the pair's entry."""
        if self.jobs is not None:
            return [(f"jobs[{i}]", ref) for i, ref in enumerate(self.jobs)]
        if self.foreground is None:
            raise ValueError("a validated group names its foreground")  # the validator above refuses it
        if self.backgrounds is not None:
            return [("foreground", self.foreground)] + [(f"backgrounds[{i}]", r) for i, r in enumerate(self.backgrounds)]
        return [("foreground", self.foreground)] + ([("background", self.background)] if self.background else [])

    @property
    def fg_ref(self) -> JobRef:
        """The foreground: the job that is varied in the hyperparameter and mutation designs."""
        return self.job_refs()[0][1]

    @property
    def bg_refs(self) -> list[JobRef]:
        return [ref for _, ref in self.job_refs()[1:]]


class Defaults(_Strict):
    vram_budget_mb: float = Field(7500, gt=0, le=MAX_VRAM_MB)
    min_efficiency: float = Field(1.0, ge=0, le=MAX_EFFICIENCY)
    runs_per_config: StrictInt = Field(1, ge=1, le=MAX_RUNS)
    restart_delay_s: float = Field(2.0, ge=0, le=3600)
    timeout_s: float = Field(3600.0, gt=0, le=30 * DAY_S)
    cool_down_s: float = Field(0.0, ge=0, le=3600)
    sharing: Sharing = ("timeslice",)
    ready_timeout_s: float = Field(600.0, gt=0, le=DAY_S)
    crash_loop_failures: StrictInt = Field(3, ge=1, le=MAX_RUNS)
    crash_loop_window_s: float = Field(300.0, gt=0, le=DAY_S)
    method: Optional[Literal["interleaved", "epoch"]] = None  # None: the design's own (DESIGN_METHODS)
    phase_s: float = Field(0.5, gt=0, le=3600)
    settle_s: float = Field(0.1, ge=0, le=600)
    warmup_s: float = Field(5.0, ge=0, le=3600)
    starts: Optional[StrictInt] = Field(None, ge=1, le=MAX_STARTS)  # None: STARTS_ON_GPU on a GPU, 1 on the CPU
    card_mb: Optional[float] = Field(None, gt=0, le=MAX_VRAM_MB)  # the card the memory verdict is about
    min_coverage: Optional[float] = Field(None, ge=0, le=1)  # None: the design's own (DESIGN_MIN_COVERAGE)
    keep_background: bool = False  # a built-in background trains its run again in its own process: no restart gap
    background_alone_s: float = Field(20.0, ge=0, le=3600)  # a kept-running background alone, before and after the run


DEFAULTS = Defaults()  # what every case gets where its settings are silent

# How a design's concurrent cases are measured where neither the settings nor the command line say:
# the pairs design asks how well two jobs share, which interleaved rounds measure reproducibly; the
# hyperparameter study and mutation runs ask what a finished run scores and spends, which only a
# run to completion (one foreground epoch run beside the background loop) can answer.
DESIGN_METHODS = {"pairs": "interleaved", "hp_study": "epoch", "mutation": "epoch"}

# The least share of the foreground's run a background must cover for a run to count, where neither
# the settings nor the pair say: a run's outcome (its energy, its accuracy) describes sharing only if
# the background shared the run, not a restart loop that left most of it alone.
DESIGN_MIN_COVERAGE: dict[str, Optional[float]] = {"pairs": None, "hp_study": 0.95, "mutation": 0.95}

MAX_GPUS = 1024  # data-parallel processes of one scaling case; more is a typo
MAX_SCALING_STEPS = 20_000  # per stretch: every timed step travels in one protocol line of at most 1 MiB


def _gpu_counts(counts: list[int]) -> list[int]:
    if len(set(counts)) != len(counts):
        raise ValueError(f"expected each GPU count once, got {counts}")
    return sorted(counts)


class ScalingSpec(_Strict):
    """One training job measured data-parallel on each of ``gpus`` GPU counts (one case per count):
    ``warmup_steps`` left out, then ``steps`` timed, then a validation of ``val_samples`` held-out
    samples shared among the ranks (a workload that can validate a given number: the dense-prediction
    stand-in), then ``comm_probe_steps`` without gradient synchronisation, which separate the
    all-reduce's share of a step."""

    group: str = Field(pattern=_GROUP, max_length=NAME_MAX)
    workload: JobRef
    gpus: list[Annotated[StrictInt, Field(ge=1, le=MAX_GPUS)]] = Field([1, 2], min_length=1)
    warmup_steps: StrictInt = Field(10, ge=0, le=MAX_SCALING_STEPS)
    steps: StrictInt = Field(100, ge=2, le=MAX_SCALING_STEPS)
    comm_probe_steps: StrictInt = Field(20, ge=0, le=MAX_SCALING_STEPS)
    val_samples: StrictInt = Field(0, ge=0, le=MAX_SCALING_STEPS)
    vram_budget_mb: Optional[float] = Field(None, gt=0, le=MAX_VRAM_MB)
    note: Optional[str] = None

    @field_validator("gpus")
    @classmethod
    def _each_count_once(cls, counts: list[int]) -> list[int]:
        return _gpu_counts(counts)


class MutationSettings(_Strict):
    """How the mutation design samples: seeded (stable case ids), deduplicated against history."""

    seed: StrictInt = Field(0, ge=0, lt=2**64)
    dedup: bool = True
    historical_csvs: list[Text] = Field(default_factory=list)
    max_attempts: StrictInt = Field(1000, ge=1, le=1_000_000)


class Experiment(_Strict):
    name: Text = Field(min_length=1, max_length=ID_MAX)
    description: str = ""
    design: Literal["pairs", "hp_study", "mutation", "scaling"] = "pairs"
    defaults: Defaults = Field(default_factory=Defaults)
    workloads: dict[Name, CommandWorkload] = Field(default_factory=dict)
    vary: dict[Name, Factors] = Field(default_factory=lambda: dict(DEFAULT_VARY), min_length=1)
    mutation: MutationSettings = Field(default_factory=MutationSettings)
    workloads_file: list[Text] = Field(default_factory=list)
    pairs: list[PairSpec] = Field(default_factory=list)
    scaling: list[ScalingSpec] = Field(default_factory=list)
    seeds: Optional[list[Annotated[StrictInt, Field(ge=0, lt=2**31)]]] = Field(None, min_length=1, max_length=MAX_SEEDS)
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

    @model_validator(mode="after")
    def _entries_of_its_design(self):
        """A scaling file lists ``scaling`` entries and no pairs; every other design the reverse."""
        wanted, other = ("scaling", "pairs") if self.design == "scaling" else ("pairs", "scaling")
        if getattr(self, other):
            raise ValueError(f"expected no '{other}' with design {self.design!r} (it reads '{wanted}')")
        if not getattr(self, wanted):
            raise ValueError(f"expected a non-empty '{wanted}' list for design {self.design!r}")
        return self

    @field_validator("seeds")
    @classmethod
    def _each_seed_once(cls, seeds):
        if seeds is not None and len(set(seeds)) != len(seeds):
            raise ValueError(f"expected each seed once, got {seeds}")
        return seeds

    @model_validator(mode="after")
    def _seeds_replicate_a_study(self):
        """Seeds replicate the hp_study design's runs; the other designs have their own repeats."""
        if self.seeds is not None and self.design != "hp_study":
            raise ValueError(f"expected no 'seeds' with design {self.design!r}: seeds replicate the hp_study "
                             f"design's runs (runs_per_config repeats a case)")
        return self

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
