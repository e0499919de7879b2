"""Experiment designs -> Cases, one per pytest parameter, with ids that stay stable across runs.

An id is ``<group>-<fg>+<bg>-<variant>-<mode>`` (a group of more jobs names each,
``<group>-<fg>+<bg>+<bg2>-...``): the model names are in it so ``-k densenet`` selects by model, and nothing run-dependent is in it so ``--benchmark-compare`` can match
cases of two runs by name. A case measured under MPS carries ``-mps`` at the end (``-k mps``);
a time-sliced case, the driver's default, keeps the plain id. A scaling case, one job on N GPUs,
is ``<group>-<model>-gpus<N>`` (``-k gpus2``).

The project's own suite (the settings its ini names in ``gpu_pairs_settings``) owns its ids: a
case of another experiment whose id would be one of them carries its experiment's name in front,
``<name>.<id>``, so that it never takes the suite's folder in a shared results folder, while the
suite's ids (its reference results, the baselines compared with them, ``-k g01``) stay as they are.
"""
from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment import mutation
from pytest_gpu_pairs.experiment.history import EarlierRun, GpuPairsWarning, History, load_history
from pytest_gpu_pairs.experiment.load import hyperparameter_problem, hyperparameter_specs, value_kind
from pytest_gpu_pairs.experiment.schema import (
    DEFAULTS,
    DESIGN_METHODS,
    DESIGN_MIN_COVERAGE,
    ID_MAX,
    CommandWorkload,
    Experiment,
    JobRef,
    PairSpec,
    ScalingSpec,
)
from pytest_gpu_pairs.experiment.vocabulary import job_roles
from pytest_gpu_pairs.inputs import SettingsError


@dataclass(frozen=True)
class MpsLimits:
    """What one job may use as an MPS client: a share of the SMs and a cap on device memory."""

    active_thread_percentage: Optional[int] = None
    pinned_mem_limit_mb: Optional[int] = None

    def env(self, device_index: int = 0) -> dict[str, str]:
        """The client-side variables; a client may set both in its own environment."""
        env = {}
        if self.active_thread_percentage is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(int(self.active_thread_percentage))
        if self.pinned_mem_limit_mb is not None:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"{device_index}={int(self.pinned_mem_limit_mb)}M"
        return env

    def merged_over(self, other: Optional[MpsLimits]) -> MpsLimits:
        """These limits where set, ``other``'s elsewhere (command line over settings)."""
        if other is None:
            return self
        return MpsLimits(_first_set(self.active_thread_percentage, other.active_thread_percentage),
                         _first_set(self.pinned_mem_limit_mb, other.pinned_mem_limit_mb))

    def as_record(self) -> dict[str, Optional[int]]:
        return {"active_thread_percentage": self.active_thread_percentage,
                "pinned_mem_limit_mb": self.pinned_mem_limit_mb}


def _first_set(*values):
    return next((v for v in values if v is not None), None)


@dataclass(frozen=True)
class JobConfig:
    """One training job: which workload, with which effective hyperparameters."""

    model: str
    hparams: tuple[tuple[str, Any], ...]
    command: Optional[CommandWorkload] = field(default=None, compare=False, hash=False)
    command_key: str = ""
    base_dir: str = ""
    mps: Optional[MpsLimits] = field(default=None, compare=False, hash=False)
    runs: int = 1  # a built-in trained this many times back to back in its process (a kept-running background alone)
    # a block of a replicate measured split_by_factor: its jobs are measured alone in the block, even where
    # another block of the session ran the same job (minutes apart the host's pace moved 10-15 %)
    scope: str = ""

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return dict(self.hparams)

    @property
    def is_builtin(self) -> bool:
        return self.command is None

    def with_hyperparameters(self, **changes: Any) -> JobConfig:
        return replace(self, hparams=tuple(sorted({**self.hyperparameters, **changes}.items())))


@dataclass(frozen=True)
class Overrides:
    """Command-line values; each one that is set beats every settings file."""

    vram_budget_mb: Optional[float] = None
    min_efficiency: Optional[float] = None
    sharing: Optional[tuple[str, ...]] = None
    method: Optional[str] = None
    precision: Optional[float] = None
    max_rounds: Optional[int] = None
    max_case_s: Optional[float] = None
    # earlier complete results: history the mutation design avoids (read only when a design needs it)
    earlier_runs: Callable[[], Iterable[EarlierRun]] = field(default=tuple, compare=False)


MIN_SCALED_STEPS = 4  # measured steps a scaled-down scaling case keeps: an interval needs several
MIN_SCALED_PROBE = 2


@dataclass(frozen=True)
class ScalingPlan:
    """What a scaling case runs: its data-parallel processes and its bounded steps."""

    gpus: int
    warmup_steps: int
    steps: int
    comm_probe_steps: int
    val_samples: int = 0

    def scaled(self, scale: float) -> ScalingPlan:
        """The steps at ``--gpu-pairs-scale``, rounded up: a quick run keeps a warm-up step and
        enough measured and probe steps for their intervals, never more than the settings give."""
        def part(count: int, floor: int) -> int:
            return 0 if count == 0 else min(count, max(floor, math.ceil(count * scale)))
        return replace(self, warmup_steps=part(self.warmup_steps, 1), steps=part(self.steps, MIN_SCALED_STEPS),
                       comm_probe_steps=part(self.comm_probe_steps, MIN_SCALED_PROBE),
                       val_samples=part(self.val_samples, self.gpus))


@dataclass(frozen=True)
class Case:
    id: str
    experiment: str
    design: str
    group: str
    variant: str
    mode: str
    fg: JobConfig
    bg: Optional[JobConfig]
    vram_budget_mb: float
    min_efficiency: float
    runs_per_config: int
    restart_delay_s: float
    timeout_s: float
    cool_down_s: float = DEFAULTS.cool_down_s
    ready_timeout_s: float = DEFAULTS.ready_timeout_s
    crash_loop_failures: int = DEFAULTS.crash_loop_failures
    crash_loop_window_s: float = DEFAULTS.crash_loop_window_s
    sharing: str = "timeslice"
    method: str = "epoch"
    phase_s: float = DEFAULTS.phase_s
    settle_s: float = DEFAULTS.settle_s
    warmup_s: float = DEFAULTS.warmup_s
    starts: Optional[int] = DEFAULTS.starts
    card_mb: Optional[float] = DEFAULTS.card_mb
    min_coverage: Optional[float] = None  # the least bg_coverage a round of a concurrent run needs to count
    keep_background: bool = False  # a built-in background runs again in its process instead of being restarted
    background_alone_s: float = DEFAULTS.background_alone_s  # each window a kept-running background trains alone
    # the stopping rule of interleaved rounds as asked: precision None is the device's default and 0
    # none, max_case_s None the device's cap (``run.methods`` makes the rule for the device)
    precision: Optional[float] = None
    max_rounds: Optional[int] = None
    max_case_s: Optional[float] = None
    source: str = ""
    note: str = ""
    scaling: Optional[ScalingPlan] = None
    more_bgs: tuple[JobConfig, ...] = ()  # a group's backgrounds after the first (roles bg2, bg3, ...)
    block: str = ""  # hp_study with split_by_factor: the varied factor whose block of its replicate this case is

    @property
    def jobs(self) -> tuple[JobConfig, ...]:
        """Every job of the case, the foreground first."""
        return (self.fg,) if self.bg is None else (self.fg, self.bg, *self.more_bgs)

    @property
    def roles(self) -> tuple[str, ...]:
        """Each job's role, in the order of ``jobs``: fg, bg, bg2, bg3, ..."""
        return job_roles(len(self.jobs))

    def job_of(self, role: str) -> Optional[JobConfig]:
        return dict(zip(self.roles, self.jobs)).get(role)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(job.model for job in self.jobs)


REPLICATE_SUFFIX = re.compile(r"_s(\d+)$")


def dependency_group(case: Case) -> Optional[str]:
    """The cases that must run in one process, in their order: an hp_study pair's replicate (its
    solo runs are the baselines its concurrent runs are compared with, measured once per session).
    None for a case that needs no other."""
    if case.design != "hp_study":
        return None
    seed = REPLICATE_SUFFIX.search(case.variant)
    replicate = f"{case.group}-s{seed.group(1)}" if seed else case.group
    return f"{replicate}-{case.block}" if case.block else replicate


def case_id(group: str, fg: str, bg: Optional[str], variant: str, mode: str, more: Sequence[str] = ()) -> str:
    return f"{group}-{'+'.join([fg, bg or 'none', *more])}-{variant}-{mode}"


def sharing_case_id(base_id: str, sharing: str) -> str:
    return base_id if sharing == "timeslice" else f"{base_id}-{sharing}"


def job_config(experiment: Experiment, ref: JobRef) -> JobConfig:
    command = experiment.workloads.get(ref.model)
    defaults = command.defaults() if command is not None else BUILTINS[ref.model].defaults()
    hparams = tuple(sorted({**defaults, **ref.hyperparameters}.items()))
    mps = MpsLimits(**ref.mps.model_dump()) if ref.mps is not None else None
    if command is None:
        return JobConfig(ref.model, hparams, mps=mps)
    return JobConfig(ref.model, hparams, command=command, command_key=f"{experiment.source}#{ref.model}",
                     base_dir=str(experiment.workload_dir()), mps=mps)


def min_coverage(experiment: Experiment, mode: str, method: str) -> Optional[float]:
    """A concurrent case run to completion (the epoch method) counts a round only where its background
    shared at least this much of the run; interleaved rounds pause and resume jobs themselves."""
    if mode != "concurrent" or method != "epoch":
        return None
    return _first_set(experiment.defaults.min_coverage, DESIGN_MIN_COVERAGE[experiment.design])


def _case(experiment: Experiment, pair: PairSpec, overrides: Overrides, fg: JobConfig, bg: Optional[JobConfig],
          variant: str, mode: str, more_bgs: tuple[JobConfig, ...] = (), block: str = "") -> Case:
    d = experiment.defaults
    method = _first(overrides.method, d.method, DESIGN_METHODS[experiment.design]) if mode == "concurrent" else "epoch"
    if bg is not None and method == "epoch" and d.keep_background:
        bg, more_bgs = kept_running(bg), tuple(kept_running(job) for job in more_bgs)
    return Case(
        id=case_id(pair.group, fg.model, bg.model if bg else None, variant, mode, [j.model for j in more_bgs]),
        experiment=experiment.name, design=experiment.design, group=pair.group, variant=variant,
        mode=mode, fg=fg, bg=bg, more_bgs=more_bgs,
        vram_budget_mb=vram_budget(overrides, pair.vram_budget_mb, d.vram_budget_mb),
        min_efficiency=_first(overrides.min_efficiency, pair.min_efficiency, d.min_efficiency),
        runs_per_config=_first(pair.runs_per_config, d.runs_per_config),
        restart_delay_s=d.restart_delay_s, timeout_s=d.timeout_s, cool_down_s=d.cool_down_s,
        ready_timeout_s=d.ready_timeout_s, crash_loop_failures=d.crash_loop_failures,
        crash_loop_window_s=d.crash_loop_window_s,
        method=method, min_coverage=min_coverage(experiment, mode, method), keep_background=d.keep_background,
        background_alone_s=d.background_alone_s, phase_s=d.phase_s, settle_s=d.settle_s, warmup_s=d.warmup_s,
        starts=d.starts, card_mb=d.card_mb,
        precision=overrides.precision, max_rounds=overrides.max_rounds, max_case_s=overrides.max_case_s,
        source=experiment.source, note=pair.note or "", block=block)


KEPT_SOLO_RUNS = 5
"""A kept-running built-in background's solo reference trains its run this many times in one
process: its pace, read over the runs after the first (``Progress.warm_rate``), is then its pace
beside a foreground, warm and with its evaluations and restarts, not one cold run's."""


def kept_running(job: JobConfig) -> JobConfig:
    """A background the epoch method keeps running: a built-in's solo reference is several runs."""
    return replace(job, runs=KEPT_SOLO_RUNS) if job.is_builtin else job


def _pair_case(experiment: Experiment, pair: PairSpec, overrides: Overrides) -> Case:
    fg, bg, *more = (job_config(experiment, ref) for _, ref in pair.job_refs())
    return _case(experiment, pair, overrides, fg, bg, "default", "concurrent", tuple(more))


def _first(*values):
    return next(v for v in values if v is not None)


def vram_budget(overrides: Overrides, *declared: Optional[float]) -> float:
    """The VRAM budget a case is checked against, decided here and nowhere else: the option, else
    what the settings declare (a pair's own before the file's defaults), else the schema's default
    (a solo baseline that no settings file describes)."""
    return _first(overrides.vram_budget_mb, *declared, DEFAULTS.vram_budget_mb)


# --- hp_study: does sharing change how hyperparameters act? -------------------------------

VARIANT_NAMES = {"learning_rate": "lr"}


def scaled_value(experiment: Experiment, model: str, name: str, default: Any, factor: float) -> Any:
    """``default * factor``: exact for floats and for a built-in's (fractional) epochs, else the
    nearest integer, at least 1. A product beyond a float's range is Infinity, which the
    validation of every variant (``study_variants``) refuses."""
    spec = hyperparameter_specs(experiment, model)[name]
    value = default * factor
    if not math.isfinite(value):
        return value
    if value_kind(experiment, model, name, spec) == "float":
        value = float(f"{value:.10g}")
        return int(value) if value.is_integer() and isinstance(default, int) else value
    return max(1, math.floor(value + 0.5))


def study_variants(experiment: Experiment, pair: PairSpec, varied: JobConfig,
                   index: int = 0) -> list[tuple[str, JobConfig]]:
    """default, then ``<hp>_min`` and ``<hp>_max`` for each varied hyperparameter (lr = learning_rate).
    A scaled value the settings could not have written (a dropout of 1.0, a learning rate past what
    a built-in trains with, Infinity) is refused in one line naming the factors that made it."""
    variants = [("default", varied)]
    where = f"{experiment.pair_path(index)}.vary" if pair.vary is not None else "$.vary"
    for name, factors in experiment.pair_vary(pair).items():
        default = varied.hyperparameters[name]
        for bound, factor in zip(("min", "max"), factors):
            value = scaled_value(experiment, varied.model, name, default, factor)
            problem = hyperparameter_problem(experiment, varied.model, name, value)
            if problem:
                raise SettingsError(experiment.source, f"{where}.{name}",
                                    f"{name} {default!r} x {factor:g} = {value!r} for pair {pair.group}: {problem}; "
                                    "choose factors that keep the value valid")
            variants.append((f"{VARIANT_NAMES.get(name, name)}_{bound}", varied.with_hyperparameters(**{name: value})))
    return variants


def seeded(experiment: Experiment, index: int, job: JobConfig, seed: Optional[int]) -> JobConfig:
    """The job with its ``seed`` hyperparameter set for one replicate; a workload without one cannot
    be replicated by seed, which is refused in one line."""
    if seed is None:
        return job
    if "seed" not in hyperparameter_specs(experiment, job.model):
        raise SettingsError(experiment.source, "$.seeds", f"expected every job of the study to take a 'seed' "
                            f"hyperparameter; {job.model} (pair {experiment.pairs[index].group}) has none")
    return job.with_hyperparameters(seed=seed)


def _replicate(variant: str, seed: Optional[int]) -> str:
    return variant if seed is None else f"{variant}_s{seed}"


def _hp_study_cases(experiment: Experiment, overrides: Overrides) -> list[Case]:
    """Per seed (the replicate: every job of it, A and B, trains from that seed) and pair: the
    background A alone, then each variant of the varied foreground B alone and beside A at default,
    its solo run first, so each concurrent case finds its baselines measured minutes before it.
    Each pair's replicate holds its own solo cases (a dependency group: one process runs it, on any
    worker, with nothing measured elsewhere); a solo job two pairs share is measured once
    per process and reported by the second pair's case. A whole replicate comes before the next, so a
    study stopped part way holds complete replicates. A pair with ``split_by_factor`` measures each
    replicate as one block per factor, each block a dependency group with its own solo runs."""
    cases: list[Case] = []
    replicates: list[Optional[int]] = list(experiment.seeds) if experiment.seeds else [None]
    for seed in replicates:
        for index, pair in enumerate(experiment.pairs):
            varied = seeded(experiment, index, job_config(experiment, pair.fg_ref), seed)
            load = seeded(experiment, index, job_config(experiment, pair.bg_refs[0]), seed)
            variants = study_variants(experiment, pair, varied, index)
            for block, members in _blocks(experiment, pair, variants):
                cases += _replicate_cases(experiment, pair, overrides, varied, load, members, seed, block)
    return cases


def _blocks(experiment: Experiment, pair: PairSpec,
            variants: list[tuple[str, JobConfig]]) -> list[tuple[str, list[tuple[str, JobConfig]]]]:
    """The whole replicate as one block; or, with ``split_by_factor``, one block per varied factor,
    each with its own default (``default_<factor>``, the factor named as in its variants)."""
    if not pair.split_by_factor:
        return [("", variants)]
    default = variants[0][1]
    blocks = []
    for name in experiment.pair_vary(pair):
        short = VARIANT_NAMES.get(name, name)
        bounds = [(v, job) for v, job in variants if v in (f"{short}_min", f"{short}_max")]
        blocks.append((short, [(f"default_{short}", default)] + bounds))
    return blocks


def _replicate_cases(experiment: Experiment, pair: PairSpec, overrides: Overrides, varied: JobConfig,
                     load: JobConfig, variants: list[tuple[str, JobConfig]], seed: Optional[int],
                     block: str) -> list[Case]:
    """One block of a replicate: A alone, then for each variant B alone and, next to it, B beside A,
    so that a shared run is compared with a solo run minutes from it, not the block's length."""
    if block:
        scope = f"{pair.group}-s{seed}-{block}" if seed is not None else f"{pair.group}-{block}"  # its dependency group
        load, variants = replace(load, scope=scope), [(v, replace(job, scope=scope)) for v, job in variants]
    named = [(_replicate(v, seed), job) for v, job in variants]
    shared = [_case(experiment, pair, overrides, job, load, variant, "concurrent", block=block) for variant, job in named]
    reference = shared[0].bg or load  # A alone as its shared runs are compared with it
    load_variant = "bg_default" if load.model == varied.model else "default"  # A and B one model: two ids
    load_variant += f"_{block}" if block else ""
    cases, solo_jobs = [], set()
    for (variant, job), pair_case in zip([(_replicate(load_variant, seed), reference)] + named, [None, *shared]):
        if job not in solo_jobs:
            solo_jobs.add(job)
            cases.append(_case(experiment, pair, overrides, job, None, variant, "solo", block=block))
        if pair_case is not None:
            cases.append(pair_case)
    return cases


# --- mutation: random hyperparameters, never a configuration run before --------------------

def _mutation_history(experiment: Experiment, overrides: Overrides) -> History:
    if not experiment.mutation.dedup:
        return History()
    return load_history(overrides.earlier_runs(), experiment.mutation.historical_csvs, experiment.workload_dir(),
                        experiment.source)


def _mutated_cases(experiment: Experiment, index: int, pair: PairSpec, overrides: Overrides,
                   history: History, seen: set) -> list[Case]:
    fg, bg = job_config(experiment, pair.fg_ref), job_config(experiment, pair.bg_refs[0])
    specs = hyperparameter_specs(experiment, fg.model)
    names = mutation.mutated_names(pair.mutate or (), specs)  # only a pair with mutate is mutated
    label = "_".join(names) if len(names) <= 2 else "mut"

    def variant(key) -> str:
        return f"{label}_{mutation.key_digest(key)}"

    def taken(key) -> bool:
        return key in seen or history.ran_elsewhere(key, case_id(pair.group, fg.model, bg.model, variant(key), "concurrent"))

    wanted = pair.mutations or 1
    rng = mutation.pair_rng(experiment.mutation.seed, pair.group, fg.model, bg.model, *names)
    stream = mutation.candidates(specs, names, fg.hyperparameters, rng)
    drawn, attempts = mutation.draw_unique(stream, wanted, experiment.mutation.max_attempts, fg.model,
                                           "concurrent", taken)
    if len(drawn) < wanted:
        warnings.warn(f"{experiment.source}: {experiment.mutate_path(index)}: only {len(drawn)} of {wanted} "
                      f"configurations of {', '.join(names)} were never run before ({attempts} draws); "
                      f"widen the ranges or ask for fewer", GpuPairsWarning, stacklevel=2)
    for drawn_one in drawn:
        _check_drawn(experiment, index, fg.model, names, drawn_one.hyperparameters)
    seen.update(d.key for d in drawn)
    return [_case(experiment, pair, overrides, fg.with_hyperparameters(**d.hyperparameters), bg, variant(d.key),
                  "concurrent") for d in drawn]


def _check_drawn(experiment: Experiment, index: int, model: str, names: list[str], values: dict[str, Any]) -> None:
    """Every drawn value as the settings' own are judged: a range that holds values the workload
    refuses (or none that fit a float) is named with the value it gave, before any job sees it."""
    for name in names:
        problem = hyperparameter_problem(experiment, model, name, values[name])
        if problem:
            raise SettingsError(experiment.source, experiment.mutate_path(index),
                                f"{name} drawn from its range as {values[name]!r}: {problem}; narrow its range")


def _mutation_cases(experiment: Experiment, overrides: Overrides) -> list[Case]:
    """A pair with ``mutate`` gets ``mutations`` sampled variants; one without, its default case."""
    history = _mutation_history(experiment, overrides)
    seen: set = set()
    cases: list[Case] = []
    for index, pair in enumerate(experiment.pairs):
        if pair.mutate:
            cases += _mutated_cases(experiment, index, pair, overrides, history, seen)
            continue
        case = _pair_case(experiment, pair, overrides)
        seen.add(mutation.run_key(case.fg.model, case.fg.hyperparameters, case.mode))
        cases.append(case)
    return cases


# --- scaling: one job data-parallel on each GPU count ---------------------------------------

def scaling_case_id(group: str, model: str, gpus: int) -> str:
    return f"{group}-{model}-gpus{gpus}"


def _scaling_count_case(experiment: Experiment, spec: ScalingSpec, overrides: Overrides, gpus: int) -> Case:
    d = experiment.defaults
    return Case(id=scaling_case_id(spec.group, spec.workload.model, gpus), experiment=experiment.name,
                design=experiment.design, group=spec.group, variant=f"gpus{gpus}", mode="scaling",
                fg=job_config(experiment, spec.workload), bg=None,
                vram_budget_mb=vram_budget(overrides, spec.vram_budget_mb, d.vram_budget_mb),
                min_efficiency=0.0, runs_per_config=1, restart_delay_s=0.0, timeout_s=d.timeout_s,
                cool_down_s=d.cool_down_s, ready_timeout_s=d.ready_timeout_s, method="steps",
                source=experiment.source, note=spec.note or "",
                scaling=ScalingPlan(gpus, spec.warmup_steps, spec.steps, spec.comm_probe_steps, spec.val_samples))


def _scaling_cases(experiment: Experiment, overrides: Overrides) -> list[Case]:
    """Each scaling entry once per GPU count, fewest GPUs first: the one-GPU case is the baseline
    the others' scaling efficiency is taken against."""
    return [_scaling_count_case(experiment, spec, overrides, gpus) for spec in experiment.scaling for gpus in spec.gpus]


_DESIGNS = {"pairs": lambda experiment, overrides: [_pair_case(experiment, p, overrides) for p in experiment.pairs],
            "hp_study": _hp_study_cases, "mutation": _mutation_cases, "scaling": _scaling_cases}


def expand(experiment: Experiment, overrides: Overrides = Overrides()) -> list[Case]:
    """All cases of one experiment, in file order."""
    return _DESIGNS[experiment.design](experiment, overrides)


def sharing_modes(experiment: Experiment, overrides: Overrides = Overrides()) -> Callable[[Case], tuple[str, ...]]:
    """The mechanisms each case of ``experiment`` is measured under: command line, pair, defaults."""
    per_group = {pair.group: pair.sharing for pair in experiment.pairs if pair.sharing is not None}
    return lambda case: overrides.sharing or per_group.get(case.group) or tuple(experiment.defaults.sharing)


def with_sharing(cases: Iterable[Case], modes_of: Callable[[Case], tuple[str, ...]]) -> list[Case]:
    """Each case once per sharing mechanism, side by side, so a pair is compared under both; a solo
    or scaling case once and plain: nothing shares its cards, and every baseline is measured without MPS."""
    return [replace(case, sharing=mode, id=sharing_case_id(case.id, mode)) for case in cases
            for mode in (("timeslice",) if case.mode in ("solo", "scaling") else modes_of(case))]


class DuplicateCaseError(ValueError):
    pass


def suite_owned(case: Case, experiment: Experiment, owned: Mapping[str, str]) -> Case:
    """The case, named after its experiment as well where the project's suite owns its id
    (``owned``: id -> the suite's experiment name) and it comes from another experiment."""
    if owned.get(case.id, experiment.name) == experiment.name:
        return case
    return replace(case, id=f"{experiment.name}.{case.id}")


def expand_all(experiments: Iterable[Experiment], overrides: Overrides = Overrides(),
               owned: Mapping[str, str] = MappingProxyType({})) -> list[Case]:
    """Cases of several files; two cases with one id would make results ambiguous, so refuse.
    ``owned``: the ids of the project's suite, with its experiment's name (``suite_owned``)."""
    seen: dict[str, str] = {}
    cases = []
    for experiment in experiments:
        for case in with_sharing(expand(experiment, overrides), sharing_modes(experiment, overrides)):
            case = suite_owned(case, experiment, owned)
            _check_id_length(experiment, case)
            if case.id in seen and seen[case.id] != case.source:
                raise DuplicateCaseError(
                    f"{case.source}: case id {case.id!r} also comes from {seen[case.id]}; rename one group")
            if case.id in seen:
                raise DuplicateCaseError(f"{case.source}: case id {case.id!r} appears twice; give each pair its own group")
            seen[case.id] = case.source
            cases.append(case)
    return cases


def _check_id_length(experiment: Experiment, case: Case) -> None:
    """A case id names the case's folder, and a folder name has at most 255 bytes."""
    size = len(case.id.encode("utf-8"))
    if size > ID_MAX:
        index = next((i for i, p in enumerate(experiment.pairs) if p.group == case.group), 0)
        raise SettingsError(experiment.source, experiment.pair_path(index),
                            f"expected group, workload and hyperparameter names short enough for a case id of at "
                            f"most {ID_MAX} bytes (it names the case's folder), got {size} bytes: {case.id[:80]!r}...")


def baseline_case(job: JobConfig, case_id_: str, timeout_s: float, vram_budget_mb: float) -> Case:
    """The case a solo baseline is recorded as when no solo case of the suite measured it."""
    return Case(id=case_id_, experiment="", design="baseline", group="_solo", variant="baseline", mode="solo",
                fg=job, bg=None, vram_budget_mb=vram_budget_mb, min_efficiency=0.0, runs_per_config=1,
                restart_delay_s=0.0, timeout_s=timeout_s)


def unavailable_reason(case: Case) -> Optional[str]:
    """Why a case cannot run with this installation (a built-in not implemented), else None."""
    for job in case.jobs:
        if job.is_builtin and not BUILTINS[job.model].implemented:
            return f"built-in workload {job.model!r} is not implemented in this version"
    if len(case.jobs) > 2 and case.method != "interleaved":
        return (f"a group of {len(case.jobs)} jobs is measured with interleaved rounds only (each job alone, all "
                f"together), not with method {case.method!r}")
    return None


def describe(case: Case) -> Mapping[str, Any]:
    return {"case_id": case.id, "design": case.design, "variant": case.variant, "mode": case.mode,
            "fg_model": case.fg.model, "bg_model": case.bg.model if case.bg else None,
            "fg_hparams": case.fg.hyperparameters, "bg_hparams": case.bg.hyperparameters if case.bg else None,
            "sharing": case.sharing, "method": case.method, **({"fg_runs": case.fg.runs} if case.fg.runs > 1 else {})}

