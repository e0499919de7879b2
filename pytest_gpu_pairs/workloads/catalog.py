"""The built-in reference workloads, described without importing torch.

The pytest process validates settings and builds command lines from this table; only the
job process itself imports the torch implementation named in ``module``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Hyperparameter:
    """One tunable value, in the seed's ``supported_hyperparams`` vocabulary."""

    type: str
    default: Any
    range: tuple[float, float] | None = None
    distribution: str | None = None
    flag: str | None = None
    zero_probability: float = 0.0


@dataclass(frozen=True)
class BuiltinWorkload:
    name: str
    family: str
    seed_repo: str
    seed_model: str
    input_shape: tuple[int, ...]
    dataset: str
    train_size: int
    hyperparameters: Mapping[str, Hyperparameter]
    metrics: tuple[str, ...]
    module: str | None = None
    cpu_only: bool = False
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def implemented(self) -> bool:
        return self.module is not None

    def defaults(self) -> dict[str, Any]:
        return {name: hp.default for name, hp in self.hyperparameters.items()}

    @property
    def primary_metric(self) -> str:
        """The metric the hyperparameter study compares (interference, energy per unit of performance)."""
        return self.metrics[0]

    def steps_per_epoch(self, batch_size: int | None = None) -> int:
        size = batch_size or self.hyperparameters["batch_size"].default
        return math.ceil(self.train_size / size)


def _examples_hparams(lr_default: float = 0.01) -> dict[str, Hyperparameter]:
    return {
        "epochs": Hyperparameter("int", 10, (5, 15), "uniform"),
        "learning_rate": Hyperparameter("float", lr_default, (0.005, 0.02), "log_uniform"),
        "batch_size": Hyperparameter("int", 32, (16, 128), "uniform"),
        "seed": Hyperparameter("int", 1, (0, 9999), "uniform"),
    }


def _resnet_hparams() -> dict[str, Hyperparameter]:
    return {
        "epochs": Hyperparameter("int", 200, (100, 300), "uniform"),
        "learning_rate": Hyperparameter("float", 0.1, (0.05, 0.15), "log_uniform"),
        "batch_size": Hyperparameter("int", 128),
        "seed": Hyperparameter("int", 1334, (0, 9999), "uniform"),
        "weight_decay": Hyperparameter("float", 0.0001, (0.00001, 0.001), "log_uniform"),
    }


def _reid_hparams(batch_size: int) -> dict[str, Hyperparameter]:
    return {
        "epochs": Hyperparameter("int", 60, (30, 90), "uniform"),
        "learning_rate": Hyperparameter("float", 0.05, (0.025, 0.075), "log_uniform"),
        "batch_size": Hyperparameter("int", batch_size),
        "seed": Hyperparameter("int", 1334, (0, 9999), "uniform"),
        "dropout": Hyperparameter("float", 0.5, (0.3, 0.6), "uniform"),
    }


def _vulberta_hparams() -> dict[str, Hyperparameter]:
    return {
        "epochs": Hyperparameter("int", 10, (5, 20), "uniform"),
        "learning_rate": Hyperparameter("float", 0.00003, (0.000015, 0.000045), "log_uniform"),
        "batch_size": Hyperparameter("int", 2),
        "seed": Hyperparameter("int", 42, (0, 9999), "uniform"),
        "weight_decay": Hyperparameter("float", 0.0, (0.00001, 0.001), "log_uniform"),
    }


_MNIST = (1, 28, 28)
_CIFAR = (3, 32, 32)
_REID = (3, 256, 128)

_ENTRIES = [
    BuiltinWorkload("mnist", "image_classification", "examples", "mnist", _MNIST, "MNIST", 60000,
                    _examples_hparams(), ("test_accuracy", "test_loss"),
                    module="pytest_gpu_pairs.workloads.mnist"),
    BuiltinWorkload("mnist_rnn", "image_classification", "examples", "mnist_rnn", _MNIST, "MNIST", 60000,
                    _examples_hparams(), ("test_accuracy", "test_loss"),
                    module="pytest_gpu_pairs.workloads.mnist"),
    BuiltinWorkload("mnist_ff", "image_classification", "examples", "mnist_ff", _MNIST, "MNIST", 60000,
                    _examples_hparams(), ("test_accuracy", "test_error", "train_error"),
                    module="pytest_gpu_pairs.workloads.mnist"),
    BuiltinWorkload("siamese", "image_pairs", "examples", "siamese", _MNIST, "MNIST pairs", 60000,
                    _examples_hparams(), ("test_accuracy", "test_loss")),
    BuiltinWorkload("word_lm", "language_model", "examples", "word_lm", (35,), "Wikitext-2", 2088628,
                    _examples_hparams(), ("test_loss", "test_perplexity")),
    BuiltinWorkload("resnet20", "image_classification", "pytorch_resnet_cifar10", "resnet20", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), ("test_accuracy", "best_val_accuracy"),
                    module="pytest_gpu_pairs.workloads.cifar_resnet"),
    BuiltinWorkload("resnet32", "image_classification", "pytorch_resnet_cifar10", "resnet32", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), ("test_accuracy", "best_val_accuracy")),
    BuiltinWorkload("resnet44", "image_classification", "pytorch_resnet_cifar10", "resnet44", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), ("test_accuracy", "best_val_accuracy")),
    BuiltinWorkload("resnet56", "image_classification", "pytorch_resnet_cifar10", "resnet56", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), ("test_accuracy", "best_val_accuracy")),
    BuiltinWorkload("densenet121", "person_reid", "Person_reID_baseline_pytorch", "densenet121", _REID,
                    "Market-1501", 12936, _reid_hparams(24), ("rank1", "rank5", "map")),
    BuiltinWorkload("hrnet18", "person_reid", "Person_reID_baseline_pytorch", "hrnet18", _REID,
                    "Market-1501", 12936, _reid_hparams(24), ("rank1", "rank5", "map")),
    BuiltinWorkload("pcb", "person_reid", "Person_reID_baseline_pytorch", "pcb", (3, 384, 192),
                    "Market-1501", 12936, _reid_hparams(32), ("rank1", "rank5", "map")),
    BuiltinWorkload("vulberta_mlp", "vulnerability_detection", "VulBERTa", "mlp", (1024,), "D2A",
                    4643, _vulberta_hparams(), ("eval_loss", "final_training_loss")),
    BuiltinWorkload("vulberta_cnn", "vulnerability_detection", "VulBERTa", "cnn", (1024,), "D2A",
                    4643, _vulberta_hparams(), ("eval_loss", "final_training_loss")),
    BuiltinWorkload("mrt_oast", "code_clone_detection", "MRT-OAST", "default", (256,), "OJClone",
                    50000, {
                        "epochs": Hyperparameter("int", 10, (5, 15), "uniform"),
                        "learning_rate": Hyperparameter("float", 0.0001, (0.00005, 0.00015), "log_uniform"),
                        "batch_size": Hyperparameter("int", 64),
                        "seed": Hyperparameter("int", 1334, (0, 9999), "uniform"),
                        "dropout": Hyperparameter("float", 0.2, (0.0, 0.3), "uniform"),
                        "weight_decay": Hyperparameter("float", 0.0, (0.00001, 0.001), "log_uniform"),
                    }, ("accuracy", "precision", "recall", "f1")),
    BuiltinWorkload("bug_localization", "bug_localization", "bug-localization-by-dnn-and-rvsm", "default",
                    (31,), "Eclipse UI bug reports", 6495, {
                        "epochs": Hyperparameter("int", 1),
                        "max_iter": Hyperparameter("int", 10000, (1000, 20000), "log_uniform"),
                        "kfold": Hyperparameter("int", 10, (2, 10), "uniform"),
                        "alpha": Hyperparameter("float", 0.00001, (0.000005, 0.00002), "log_uniform"),
                        "seed": Hyperparameter("int", 42, (0, 9999), "uniform"),
                        "batch_size": Hyperparameter("int", 200),
                    }, ("top1_accuracy", "top5_accuracy", "top10_accuracy", "top20_accuracy"),
                    cpu_only=True),
]

FRACTIONAL = frozenset({"epochs"})
"""Built-ins train a fraction of an epoch too (steps = ceil(epochs * steps_per_epoch * scale)), so
the hyperparameter study's 0.5x of a one-epoch default is half an epoch, not a rounded one."""

BUILTINS: dict[str, BuiltinWorkload] = {entry.name: entry for entry in _ENTRIES}

SEED_NAMES: dict[tuple[str, str], str] = {(e.seed_repo, e.seed_model): e.name for e in _ENTRIES}


def builtin(name: str) -> BuiltinWorkload:
    try:
        return BUILTINS[name]
    except KeyError:
        raise KeyError(f"unknown built-in workload {name!r}; known: {', '.join(sorted(BUILTINS))}") from None


def seed_name(repo: str, model: str) -> str | None:
    """Map the seed's (repo, model) pair, e.g. ('VulBERTa', 'mlp'), to a built-in name."""
    return SEED_NAMES.get((repo, model))
