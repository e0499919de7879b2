"""The predecessor tool's ``models_config.json``: each repository's models as command workloads."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_gpu_pairs.inputs import SettingsError, first_error, json_path


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _SeedMetrics(BaseModel):
    model_config = ConfigDict(extra="allow")
    log_patterns: dict[str, str] = Field(default_factory=dict)


class _SeedRepo(_Strict):
    path: str = Field(min_length=1)
    train_script: str = Field(min_length=1)
    models: list[str] = Field(min_length=1)
    supported_hyperparams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    model_flag: Optional[str] = None
    required_args: dict[str, str] = Field(default_factory=dict)
    performance_metrics: _SeedMetrics = Field(default_factory=_SeedMetrics)
    progress_pattern: Optional[str] = None  # not the predecessor's: a key this format gained
    progress_preset: Optional[str] = None


class _SeedModelsConfig(_Strict):
    models: dict[str, _SeedRepo] = Field(min_length=1)


# The progress presets (experiment.logformats) the predecessor's repositories' training logs
# match, by repository and model (None: every model of it). Left out: MRT-OAST and
# bug-localization-by-dnn-and-rvsm (no per-step or per-epoch line known), examples' mnist_ff
# (the forward-forward example prints per layer, not per step).
SEED_PROGRESS: dict[tuple[str, Optional[str]], str] = {
    ("pytorch_resnet_cifar10", None): "pytorch_imagenet",
    ("examples", "mnist"): "pytorch_mnist",
    ("examples", "mnist_rnn"): "pytorch_mnist",
    ("examples", "siamese"): "pytorch_mnist",
    ("examples", "word_lm"): "pytorch_word_language_model",
    ("Person_reID_baseline_pytorch", None): "reid_baseline",
    ("VulBERTa", None): "huggingface_trainer",
}


def _progress(repo_name: str, repo: _SeedRepo, model: str) -> dict[str, str]:
    """The repository's own progress_pattern or progress_preset, else the preset its log is known to match."""
    if repo.progress_pattern or repo.progress_preset:
        return {key: value for key, value in (("progress_pattern", repo.progress_pattern),
                                              ("progress_preset", repo.progress_preset)) if value}
    preset = SEED_PROGRESS.get((repo_name, model)) or SEED_PROGRESS.get((repo_name, None))
    return {"progress_preset": preset} if preset else {}


def seed_workload_name(repo: str, model: str) -> str:
    """The predecessor's own key for a repository's model (``examples_mnist``, ``MRT-OAST_default``):
    no slash, so it can name a case and its results folder."""
    return f"{repo}_{model}"


def _seed_command(repo_name: str, repo: _SeedRepo, model: str, folder: Path) -> dict[str, Any]:
    argv = [repo.train_script]
    if repo.model_flag:
        argv += [repo.model_flag, model]
    for value in repo.required_args.values():
        argv += shlex.split(value)
    return {"command": argv, "cwd": str((folder / repo.path).resolve()),
            "hyperparameters": dict(repo.supported_hyperparams),
            "log_patterns": dict(repo.performance_metrics.log_patterns), **_progress(repo_name, repo, model)}


def is_models_config(data: Any) -> bool:
    return isinstance(data, dict) and "models" in data and "workloads" not in data


def native_path(repo: str, loc: tuple) -> str:
    """Where a problem of a translated workload stands in the predecessor's file."""
    if loc[:1] == ("hyperparameters",):
        return json_path(("models", repo, "supported_hyperparams") + tuple(loc[1:]))
    if loc[:1] in (("progress_pattern",), ("progress_preset",)):
        return json_path(("models", repo, loc[0]))
    return json_path(("models", repo))


def to_native(data: dict[str, Any], source: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each repository's model as a native command workload: name -> (repository, workload).

    One workload per repository and model, named ``<repo>_<model>``, argv ``[train_script,
    model_flag, model, *required_args, flags...]``, cwd the repository's path, log patterns from
    ``performance_metrics``, progress from the repository's own ``progress_pattern`` or the preset
    of ``SEED_PROGRESS``; relative paths are read from the file's folder."""
    try:
        seed = _SeedModelsConfig.model_validate(data)
    except ValidationError as exc:
        raise first_error(exc, source) from None
    folder = Path(source).resolve().parent
    workloads = {}
    for repo_name, repo in seed.models.items():
        for model in repo.models:
            try:
                workloads[seed_workload_name(repo_name, model)] = (repo_name, _seed_command(repo_name, repo, model, folder))
            except ValueError as exc:
                raise SettingsError(source, json_path(("models", repo_name, "required_args")),
                                    f"expected shell-like arguments ({exc})") from None
    return workloads
