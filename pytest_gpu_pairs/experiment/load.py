"""Experiment files in: the native format, and the predecessor tool's formats through ``compat``.

Structure and types are checked by pydantic; the cross-references (does a model exist, does it
take that hyperparameter) by ``_check_references``. Either way a problem surfaces as one
``SettingsError`` line naming the file, the JSON path and what was expected, so a typo in a
three-day matrix is caught at collection, not at hour two.
"""
from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from pytest_gpu_pairs.catalog import BUILTINS, FRACTIONAL, NOT_DATA_PARALLEL, VALID
from pytest_gpu_pairs.compat import models_config, seed_experiment
from pytest_gpu_pairs.experiment.schema import (
    GROUP_JOB_KEYS,
    CommandWorkload,
    Experiment,
    JobRef,
    Name,
    PairSpec,
    _Strict,
    name_problem,
    range_problem,
    value_type_problem,
)
from pytest_gpu_pairs.inputs import (
    SettingsError,
    describe_number,
    first_error,
    is_finite_number,
    json_path,
    read_json,
)


def at(where: str, *keys: Any) -> str:
    """``where`` followed by ``keys`` as a JSON path: a key that is not a plain name is quoted, so
    a name with a dot, a quote or a newline in it cannot make the message ambiguous."""
    return where + json_path(keys)[1:]


class _NativeWorkloads(_Strict):
    workloads: dict[Name, CommandWorkload] = Field(min_length=1)


def parse_workloads_file(data: Any, source: str) -> dict[str, CommandWorkload]:
    """Command workloads from a workloads file: a native ``{"workloads": {...}}`` or the
    predecessor's ``models_config.json`` (see ``compat.models_config``). Relative paths are read
    from the file's folder."""
    if not isinstance(data, dict) or not ({"models", "workloads"} & set(data)):
        raise SettingsError(source, "$", "expected a workloads file: an object with 'models' (the predecessor's "
                                         "models_config.json) or 'workloads'")
    if models_config.is_models_config(data):
        return _translated_workloads(models_config.to_native(data, source), source)
    folder = Path(source).resolve().parent
    try:
        native = _NativeWorkloads.model_validate(data).workloads
    except ValidationError as exc:
        raise first_error(exc, source) from None
    return {name: w.model_copy(update={"cwd": str((folder / (w.cwd or ".")).resolve())}) for name, w in native.items()}


def _translated_workloads(translated: dict[str, tuple[str, dict[str, Any]]], source: str) -> dict[str, CommandWorkload]:
    workloads = {}
    for name, (repo, native) in translated.items():
        problem = name_problem(name)
        if problem:
            raise SettingsError(source, json_path(("models", repo, "models")),
                                f"{problem}: the workload name {name!r} is made of the repository and model names")
        try:
            workloads[name] = CommandWorkload.model_validate(native)
        except ValidationError as exc:
            error = first_error(exc, source)
            loc = tuple(exc.errors(include_url=False)[0]["loc"])
            raise SettingsError(source, models_config.native_path(repo, loc), error.reason) from None
    return workloads


def load_workloads_file(path: str | Path) -> dict[str, CommandWorkload]:
    path = Path(path)
    return parse_workloads_file(read_json(path), str(path))


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


def did_you_mean(given: str, names: list[str]) -> str:
    """``; did you mean 'mnist'?`` for a near miss (a typo, a swapped letter), else ''."""
    close = difflib.get_close_matches(given, names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_job(experiment: Experiment, job: JobRef, where: str) -> None:
    known = _known_hyperparameters(experiment, job.model)
    if known is None:
        names = sorted(set(BUILTINS) | set(experiment.workloads))
        raise SettingsError(experiment.source, f"{where}.model",
                            f"expected a built-in workload or a key of $.workloads ({', '.join(names)}), "
                            f"got {job.model!r}{did_you_mean(job.model, names)}")
    for name, value in job.hyperparameters.items():
        path = at(where, "hyperparameters", name)
        if name not in known:
            raise SettingsError(experiment.source, path,
                                f"expected one of {job.model}'s hyperparameters ({', '.join(sorted(known))})"
                                f"{did_you_mean(name, sorted(known))}")
        problem = hyperparameter_problem(experiment, job.model, name, value)
        if problem:
            raise SettingsError(experiment.source, path, problem)


def hyperparameter_problem(experiment: Experiment, model: str, name: str, value: Any) -> str | None:
    """Why ``value`` cannot be ``model``'s ``name`` (None when it can): the one judgement of a value,
    whether the settings wrote it or the hyperparameter study scaled it or mutation drew it, so no
    job gets a value the settings could not have given it (a dropout of 1.0, Infinity)."""
    spec = hyperparameter_specs(experiment, model)[name]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_finite_number(value):
        return f"expected a finite number, got {describe_number(value)}"
    kind = value_kind(experiment, model, name, spec)
    return value_type_problem(kind, value) or _value_problem(experiment, model, name, value, spec)


def _value_problem(experiment: Experiment, model: str, name: str, value: Any, spec: Any) -> str | None:
    """A command workload's value must lie in its declared ``range``; a built-in's in what it can
    train with (``catalog.VALID``: its ``range`` is only where mutation samples)."""
    if model in experiment.workloads:
        return range_problem(value, spec.range, zero_allowed=spec.zero_probability > 0)
    if name not in VALID or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    low, high, low_included = VALID[name]
    if (value >= low if low_included else value > low) and value <= high:
        return None
    return f"expected a value in {'[' if low_included else '('}{low:g}, {high:g}] for {model}'s {name}, got {value!r}"


def _check_references(experiment: Experiment) -> None:
    for index, pair in enumerate(experiment.pairs):
        where = experiment.pair_path(index)
        for path, ref in pair.job_refs():
            _check_job(experiment, ref, f"{where}.{path}")
        _check_group_size(experiment, index, pair)
        _check_design_keys(experiment, index, pair)
    for index, spec in enumerate(experiment.scaling):
        _check_data_parallel(experiment, spec.workload, f"$.scaling[{index}].workload")


def _check_group_size(experiment: Experiment, index: int, pair: PairSpec) -> None:
    """More than two jobs are measured with interleaved rounds (each job alone, all together); the
    epoch method times one foreground run beside one background loop, and the hyperparameter and
    mutation designs ask about that foreground: for them a group is a pair."""
    refs = pair.job_refs()
    if len(refs) <= 2:
        return
    where = f"{experiment.pair_path(index)}.{refs[2][0]}"
    if experiment.design != "pairs":
        raise SettingsError(experiment.source, where, f"expected two jobs with design {experiment.design!r} (a "
                            f"foreground and one background); groups of more are measured with design 'pairs'")
    if experiment.defaults.method == "epoch":
        raise SettingsError(experiment.source, where, "expected two jobs with defaults.method 'epoch'; a group of "
                            f"{len(refs)} jobs is measured with method 'interleaved' (each job alone, all together)")


def _check_data_parallel(experiment: Experiment, job: JobRef, where: str) -> None:
    """A scaling workload trains as one data-parallel job: a built-in that cannot (no single
    forward and backward for DistributedDataParallel) is refused here, with the reason."""
    _check_job(experiment, job, where)
    if job.model not in experiment.workloads and job.model in NOT_DATA_PARALLEL:
        raise SettingsError(experiment.source, f"{where}.model",
                            f"expected a workload that trains data-parallel; {job.model} does not: "
                            f"{NOT_DATA_PARALLEL[job.model]}")
    if job.mps is not None:
        raise SettingsError(experiment.source, f"{where}.mps",
                            "expected no MPS limits: each rank of a scaling case has a GPU of its own")


def _check_design_entries(data: dict[str, Any], source: str) -> None:
    """Each design reads one list: ``scaling`` for the scaling design, ``pairs`` for every other;
    a missing, empty or misplaced list is named by its path before the rest is read."""
    design = data.get("design", "pairs")
    if not isinstance(design, str):
        return  # the schema says which designs exist
    wanted, other = ("scaling", "pairs") if design == "scaling" else ("pairs", "scaling")
    if other in data:
        raise SettingsError(source, f"$.{other}", f"expected no '{other}' with design {design!r}, which reads '{wanted}'")
    if wanted not in data:
        raise SettingsError(source, f"$.{wanted}", "required key is missing")
    if data[wanted] == []:
        raise SettingsError(source, f"$.{wanted}", f"expected at least 1 entry for design {design!r}")


_DESIGN_KEYS = {"vary": "hp_study", "split_by_factor": "hp_study", "mutate": "mutation", "mutations": "mutation"}


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
    known = hyperparameter_specs(experiment, job.model)
    return job.hyperparameters.get(name, known[name].default)


def _check_vary(experiment: Experiment, index: int, pair: PairSpec) -> None:
    where = f"{experiment.pair_path(index)}.vary" if pair.vary is not None else "$.vary"
    known = hyperparameter_specs(experiment, pair.fg_ref.model)
    for name in experiment.pair_vary(pair):
        if name not in known:
            raise SettingsError(experiment.source, at(where, name),
                                f"expected one of {pair.fg_ref.model}'s hyperparameters to vary "
                                f"({', '.join(sorted(known))}); give the pair its own 'vary'")
        default = _effective_default(experiment, pair.fg_ref, name)
        if isinstance(default, bool) or not isinstance(default, (int, float)) or default <= 0:
            raise SettingsError(experiment.source, at(where, name),
                                f"expected a hyperparameter with a positive numeric default to scale, "
                                f"{pair.fg_ref.model}'s {name} is {default!r}")


def _check_mutate(experiment: Experiment, index: int, pair: PairSpec) -> None:
    where = experiment.mutate_path(index)
    known = hyperparameter_specs(experiment, pair.fg_ref.model)
    for position, name in enumerate(pair.mutate or ()):
        if name == "all":
            continue
        if name not in known:
            raise SettingsError(experiment.source, f"{where}[{position}]",
                                f"expected one of {pair.fg_ref.model}'s hyperparameters or 'all' "
                                f"({', '.join(sorted(known))}), got {name!r}")
        spec = known[name]
        if spec.range is None or spec.type not in ("int", "float"):
            raise SettingsError(experiment.source, f"{where}[{position}]",
                                f"expected a numeric hyperparameter with a range to sample from; "
                                f"{pair.fg_ref.model}'s {name} has none")
        if spec.type == "int" and math.ceil(spec.range[0]) > math.floor(spec.range[1]):
            raise SettingsError(experiment.source, f"{where}[{position}]",
                                f"expected an int range holding at least one integer, got {list(spec.range)}")


def parse_experiment(data: Any, source: str) -> Experiment:
    """Validate already-parsed JSON in either format; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise SettingsError(source, "$", f"expected a JSON object, got {type(data).__name__}")
    pair_paths: list[str] = []
    mutate_paths: list[str] = []
    if seed_experiment.is_seed_experiment(data):
        data, pair_paths, mutate_paths = seed_experiment.to_native(data, source)
    _check_design_entries(data, source)
    try:
        experiment = Experiment.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise first_error(exc, source, data, {"pairs": GROUP_JOB_KEYS}) from None
    experiment._pair_paths = pair_paths
    experiment._mutate_paths = mutate_paths
    _merge_workloads_files(experiment)
    _check_references(experiment)
    return experiment


def load_experiment(path: str | Path) -> Experiment:
    path = Path(path)
    return parse_experiment(read_json(path), str(path))
