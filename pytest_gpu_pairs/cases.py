"""Experiment designs -> Cases, one per pytest parameter, with ids that stay stable across runs.

An id is ``<group>-<fg>+<bg>-<variant>-<mode>``: the model names are in it so ``-k densenet``
selects by model, and nothing run-dependent is in it so ``--benchmark-compare`` can match
cases of two runs by name. A case measured under MPS carries ``-mps`` at the end (``-k mps``);
a time-sliced case, the driver's default, keeps the plain id.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Optional

from .mps import MpsLimits
from .settings import CommandWorkload, Experiment, JobRef, PairSpec
from .workloads.catalog import BUILTINS


@dataclass(frozen=True)
class JobConfig:
    """One training job: which workload, with which effective hyperparameters."""

    model: str
    hparams: tuple[tuple[str, Any], ...]
    command: Optional[CommandWorkload] = field(default=None, compare=False, hash=False)
    command_key: str = ""
    base_dir: str = ""
    mps: Optional[MpsLimits] = field(default=None, compare=False, hash=False)

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return dict(self.hparams)

    @property
    def is_builtin(self) -> bool:
        return self.command is None

    def with_hyperparameters(self, **changes: Any) -> "JobConfig":
        return replace(self, hparams=tuple(sorted({**self.hyperparameters, **changes}.items())))


@dataclass(frozen=True)
class Overrides:
    """Command-line values; each one that is set beats every settings file."""

    vram_budget_mb: Optional[float] = None
    min_efficiency: Optional[float] = None
    sharing: Optional[tuple[str, ...]] = None


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
    cool_down_s: float = 0.0
    sharing: str = "timeslice"
    source: str = ""
    note: str = ""

    @property
    def models(self) -> tuple[str, ...]:
        return (self.fg.model,) if self.bg is None else (self.fg.model, self.bg.model)


def case_id(group: str, fg: str, bg: Optional[str], variant: str, mode: str) -> str:
    return f"{group}-{fg}+{bg or 'none'}-{variant}-{mode}"


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


def _pair_case(experiment: Experiment, pair: PairSpec, overrides: Overrides) -> Case:
    d = experiment.defaults
    fg, bg = job_config(experiment, pair.foreground), job_config(experiment, pair.background)
    return Case(
        id=case_id(pair.group, fg.model, bg.model, "default", "concurrent"),
        experiment=experiment.name, design=experiment.design, group=pair.group, variant="default",
        mode="concurrent", fg=fg, bg=bg,
        vram_budget_mb=_first(overrides.vram_budget_mb, pair.vram_budget_mb, d.vram_budget_mb),
        min_efficiency=_first(overrides.min_efficiency, pair.min_efficiency, d.min_efficiency),
        runs_per_config=_first(pair.runs_per_config, d.runs_per_config),
        restart_delay_s=d.restart_delay_s, timeout_s=d.timeout_s, cool_down_s=d.cool_down_s,
        source=experiment.source, note=pair.note or "")


def _first(*values):
    return next(v for v in values if v is not None)


def expand(experiment: Experiment, overrides: Overrides = Overrides()) -> list[Case]:
    """All cases of one experiment, in file order."""
    if experiment.design != "pairs":
        raise NotImplementedError(f"{experiment.source}: design {experiment.design!r} is not expanded yet")
    return [_pair_case(experiment, pair, overrides) for pair in experiment.pairs]


def sharing_modes(experiment: Experiment, overrides: Overrides = Overrides()) -> Callable[[Case], tuple[str, ...]]:
    """The mechanisms each case of ``experiment`` is measured under: command line, pair, defaults."""
    per_group = {pair.group: pair.sharing for pair in experiment.pairs if pair.sharing is not None}
    return lambda case: overrides.sharing or per_group.get(case.group) or tuple(experiment.defaults.sharing)


def with_sharing(cases: Iterable[Case], modes_of: Callable[[Case], tuple[str, ...]]) -> list[Case]:
    """Each case once per sharing mechanism, side by side, so a pair is compared under both."""
    return [replace(case, sharing=mode, id=sharing_case_id(case.id, mode)) for case in cases for mode in modes_of(case)]


class DuplicateCaseError(ValueError):
    pass


def expand_all(experiments: Iterable[Experiment], overrides: Overrides = Overrides()) -> list[Case]:
    """Cases of several files; two cases with one id would make results ambiguous, so refuse."""
    seen: dict[str, str] = {}
    cases = []
    for experiment in experiments:
        for case in with_sharing(expand(experiment, overrides), sharing_modes(experiment, overrides)):
            if case.id in seen and seen[case.id] != case.source:
                raise DuplicateCaseError(
                    f"{case.source}: case id {case.id!r} also comes from {seen[case.id]}; rename one group")
            if case.id in seen:
                raise DuplicateCaseError(f"{case.source}: case id {case.id!r} appears twice; give each pair its own group")
            seen[case.id] = case.source
            cases.append(case)
    return cases


def unavailable_reason(case: Case) -> Optional[str]:
    """Why a case cannot run with this installation (a built-in not implemented), else None."""
    for job in (case.fg, case.bg):
        if job is not None and job.is_builtin and not BUILTINS[job.model].implemented:
            return f"built-in workload {job.model!r} is not implemented in this version"
    return None


def describe(case: Case) -> Mapping[str, Any]:
    return {"case_id": case.id, "design": case.design, "variant": case.variant, "mode": case.mode,
            "fg_model": case.fg.model, "bg_model": case.bg.model if case.bg else None,
            "fg_hparams": case.fg.hyperparameters, "bg_hparams": case.bg.hyperparameters if case.bg else None,
            "sharing": case.sharing}
