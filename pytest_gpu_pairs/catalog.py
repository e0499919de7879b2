"""The built-in reference workloads, described without importing torch.

The pytest process validates settings and builds command lines from this table; only the
job process itself imports the torch implementation named in ``module``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hyperparameter:
    """One tunable value, in the predecessor's ``supported_hyperparams`` vocabulary."""

    type: str
    default: Any
    range: tuple[float, float] | None = None
    distribution: str | None = None
    flag: str | None = None
    zero_probability: float = 0.0


@dataclass(frozen=True)
class BuiltinWorkload:
    """One built-in workload. ``param_count`` is the measured size of the model the workload
    builds (tests rebuild it and compare), so listings need no torch; ``published_params`` is the
    figure the original publishes for the same architecture (``published_what`` says which), and
    ``seed_vram_mb`` the predecessor tool's own peak-VRAM estimate, for comparison with measurements."""

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
    param_count: int | None = None
    published_params: int | None = None
    published_what: str = ""
    seed_vram_mb: float | None = None
    drop_last: bool = False
    tokens_per_sample: int = 0

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
        """Optimiser steps in one epoch of the real dataset at ``batch_size``: a language model
        walks ``batch_size`` parallel token streams ``tokens_per_sample`` at a time; a loader
        with ``drop_last`` skips the last partial batch."""
        size = int(batch_size or self.hyperparameters["batch_size"].default)
        if self.tokens_per_sample:
            return max(1, math.ceil((self.train_size // size - 1) / self.tokens_per_sample))
        if self.drop_last:
            return max(1, self.train_size // size)
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


def _reid_hparams(batch_size: int, lr: float = 0.05) -> dict[str, Hyperparameter]:
    return {
        "epochs": Hyperparameter("int", 60, (30, 90), "uniform"),
        "learning_rate": Hyperparameter("float", lr, (lr / 2, lr * 1.5), "log_uniform"),
        "batch_size": Hyperparameter("int", batch_size),
        "seed": Hyperparameter("int", 1334, (0, 9999), "uniform"),
        "dropout": Hyperparameter("float", 0.5, (0.3, 0.6), "uniform"),
    }


def _vulberta_hparams(epochs: int = 10, lr: float = 0.00003, batch_size: int = 2,
                      seed: int = 42) -> dict[str, Hyperparameter]:
    return {
        "epochs": Hyperparameter("int", epochs, (epochs // 2, epochs * 2), "uniform"),
        "learning_rate": Hyperparameter("float", lr, (lr / 2, lr * 1.5), "log_uniform"),
        "batch_size": Hyperparameter("int", batch_size),
        "seed": Hyperparameter("int", seed, (0, 9999), "uniform"),
        "weight_decay": Hyperparameter("float", 0.0, (0.00001, 0.001), "log_uniform"),
    }


@dataclass(frozen=True)
class MetricUnit:
    """What a built-in's metric is measured in and the values it can take."""

    unit: str
    low: float
    high: float = math.inf

    def describe(self) -> str:
        span = f">= {self.low:g}" if math.isinf(self.high) else f"{self.low:g} to {self.high:g}"
        return f"{self.unit}, {span}"


FRACTION = MetricUnit("fraction", 0.0, 1.0)
NATS = MetricUnit("nats (mean cross-entropy per example; per token for word_lm)", 0.0)
METRIC_UNITS: Mapping[str, MetricUnit] = {
    # Every accuracy-like metric is a fraction, as the predecessor's precision, recall, rank-1,
    # mAP and top-k were; it printed test_accuracy and best_val_accuracy in percent, and
    # compat/raw_data.py reads those as fractions.
    **{name: FRACTION for name in ("test_accuracy", "best_val_accuracy", "accuracy", "precision", "recall",
                                   "f1", "rank1", "rank5", "map", "top1_accuracy", "top5_accuracy",
                                   "top10_accuracy", "top20_accuracy", "test_error", "train_error", "auc",
                                   "miou", "pixel_accuracy")},
    "test_loss": NATS, "eval_loss": NATS, "final_training_loss": NATS,
    "test_perplexity": MetricUnit("perplexity per token", 1.0),
}
"""The unit of every built-in's metric (``docs/settings.md`` lists them per workload)."""


def metric_unit(name: str) -> MetricUnit | None:
    """A built-in metric's unit; None for a metric no built-in reports (a user's own workload's)."""
    return METRIC_UNITS.get(name)


_MNIST = (1, 28, 28)
_CIFAR = (3, 32, 32)
_REID = (3, 256, 128)
_W = "pytest_gpu_pairs.workloads."
_IMAGE_METRICS = ("test_accuracy", "test_loss")
_RESNET_METRICS = ("test_accuracy", "best_val_accuracy")
_REID_METRICS = ("rank1", "rank5", "map")
_VB_METRICS = ("eval_loss", "final_training_loss", "accuracy", "precision", "recall", "f1")
# Market-1501 train_all: 12 936 images of 751 identities; the predecessor's train.sh batches
_REID_NOTE = "Market-1501 train_all; query/gallery of 750 unseen identities (3 368 / 15 913 images)"

_ENTRIES = [
    BuiltinWorkload("mnist", "image_classification", "examples", "mnist", _MNIST, "MNIST", 60000,
                    _examples_hparams(), _IMAGE_METRICS, module=_W + "mnist", param_count=1199882,
                    published_params=1199882, published_what="pytorch/examples mnist Net", seed_vram_mb=450),
    BuiltinWorkload("mnist_rnn", "image_classification", "examples", "mnist_rnn", _MNIST, "MNIST", 60000,
                    _examples_hparams(), _IMAGE_METRICS, module=_W + "mnist", param_count=26602,
                    published_params=26602, published_what="pytorch/examples mnist_rnn Net", seed_vram_mb=450),
    BuiltinWorkload("mnist_ff", "image_classification", "examples", "mnist_ff", _MNIST, "MNIST (50 000 train split)",
                    50000, _examples_hparams(), ("test_accuracy", "test_error", "train_error"), module=_W + "mnist",
                    param_count=643000, published_params=643000,
                    published_what="pytorch/examples mnist_forward_forward Net([784, 500, 500])", seed_vram_mb=450),
    BuiltinWorkload("siamese", "image_pairs", "examples", "siamese", _MNIST, "MNIST pairs", 60000,
                    _examples_hparams(), _IMAGE_METRICS, module=_W + "siamese", param_count=11432897,
                    published_params=11689512, published_what="torchvision resnet18 (the twin's trunk, 3-channel, with fc)",
                    seed_vram_mb=1350),
    BuiltinWorkload("word_lm", "language_model", "examples", "word_lm", (35,), "Wikitext-2 (2 088 628 tokens)",
                    2088628, _examples_hparams(), ("test_loss", "test_perplexity"), module=_W + "word_lm",
                    param_count=13987678, published_params=13987678,
                    published_what="pytorch/examples word_language_model LSTM 200x2, 33 278 words", seed_vram_mb=1350,
                    tokens_per_sample=35),
    BuiltinWorkload("resnet20", "image_classification", "pytorch_resnet_cifar10", "resnet20", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), _RESNET_METRICS, module=_W + "cifar_resnet",
                    param_count=269722, published_params=270000, published_what="akamaster README: 0.27M",
                    seed_vram_mb=720),
    BuiltinWorkload("resnet32", "image_classification", "pytorch_resnet_cifar10", "resnet32", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), _RESNET_METRICS, module=_W + "cifar_resnet",
                    param_count=464154, published_params=460000, published_what="akamaster README: 0.46M",
                    seed_vram_mb=900),
    BuiltinWorkload("resnet44", "image_classification", "pytorch_resnet_cifar10", "resnet44", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), _RESNET_METRICS, module=_W + "cifar_resnet",
                    param_count=658586, published_params=660000, published_what="akamaster README: 0.66M",
                    seed_vram_mb=1080),
    BuiltinWorkload("resnet56", "image_classification", "pytorch_resnet_cifar10", "resnet56", _CIFAR,
                    "CIFAR-10", 50000, _resnet_hparams(), _RESNET_METRICS, module=_W + "cifar_resnet",
                    param_count=853018, published_params=850000, published_what="akamaster README: 0.85M",
                    seed_vram_mb=1350),
    BuiltinWorkload("densenet121", "person_reid", "Person_reID_baseline_pytorch", "densenet121", _REID,
                    "Market-1501", 12936, _reid_hparams(24), _REID_METRICS, module=_W + "reid",
                    notes=_REID_NOTE, param_count=8889943, published_params=7978856,
                    published_what="torchvision densenet121 (backbone)", seed_vram_mb=3300, drop_last=True),
    BuiltinWorkload("hrnet18", "person_reid", "Person_reID_baseline_pytorch", "hrnet18", _REID,
                    "Market-1501", 12936, _reid_hparams(24), _REID_METRICS, module=_W + "reid",
                    notes=_REID_NOTE, param_count=20685379, published_params=21299004,
                    published_what="timm hrnet_w18 (backbone)", seed_vram_mb=2250, drop_last=True),
    BuiltinWorkload("pcb", "person_reid", "Person_reID_baseline_pytorch", "pcb", (3, 384, 192),
                    "Market-1501", 12936, _reid_hparams(32, lr=0.02), _REID_METRICS, module=_W + "reid",
                    notes=_REID_NOTE + "; the predecessor's train.sh forces lr 0.02 for pcb", param_count=29865410,
                    published_params=25557032, published_what="torchvision resnet50 (backbone)", seed_vram_mb=1800,
                    drop_last=True),
    BuiltinWorkload("vulberta_mlp", "vulnerability_detection", "VulBERTa", "mlp", (1024,),
                    "D2A function split (4 643 train / 596 dev)", 4643, _vulberta_hparams(), _VB_METRICS,
                    module=_W + "vulberta", notes="fp16 (autocast + GradScaler) on cuda, fp32 on cpu",
                    param_count=124836866, published_params=124836866,
                    published_what="VulBERTa-MLP (RobertaForSequenceClassification), as the predecessor's log prints",
                    seed_vram_mb=1350),
    BuiltinWorkload("vulberta_cnn", "vulnerability_detection", "VulBERTa", "cnn", (1024,),
                    "D2A function split (4 643 train / 596 dev)", 4643,
                    _vulberta_hparams(epochs=20, lr=0.0005, batch_size=128, seed=1234), _VB_METRICS,
                    module=_W + "vulberta", notes="defaults of the VulBERTa-CNN notebook: the predecessor never trained it",
                    param_count=40430810, published_params=40430810,
                    published_what="VulBERTa-CNN notebook myCNN (38.4 M of it the frozen embedding)",
                    seed_vram_mb=1350),
    BuiltinWorkload("mrt_oast", "code_clone_detection", "MRT-OAST", "default", (256,),
                    "OJClone (40 000 train / 5 000 test pairs)", 40000, {
                        "epochs": Hyperparameter("int", 10, (5, 15), "uniform"),
                        "learning_rate": Hyperparameter("float", 0.0001, (0.00005, 0.00015), "log_uniform"),
                        "batch_size": Hyperparameter("int", 64),
                        "seed": Hyperparameter("int", 1334, (0, 9999), "uniform"),
                        "dropout": Hyperparameter("float", 0.2, (0.0, 0.3), "uniform"),
                        "weight_decay": Hyperparameter("float", 0.0, (0.00001, 0.001), "log_uniform"),
                    }, ("accuracy", "precision", "recall", "f1", "auc"), module=_W + "mrt_oast", param_count=575360,
                    seed_vram_mb=1950),
    BuiltinWorkload("dense_aspp", "dense_prediction", "stand-in", "dense_aspp", (3, 600, 600),
                    "generated 600 x 600 scenes of 9 classes (123 580 a epoch: the predecessor's 30 895 iterations "
                    "of 4)", 123580, {
                        "epochs": Hyperparameter("int", 10, (5, 15), "uniform"),
                        "learning_rate": Hyperparameter("float", 0.0001, (0.00005, 0.0002), "log_uniform"),
                        "batch_size": Hyperparameter("int", 1),
                        "seed": Hyperparameter("int", 0, (0, 9999), "uniform"),
                        "weight_decay": Hyperparameter("float", 0.01, (0.001, 0.1), "log_uniform"),
                        "loader_workers": Hyperparameter("int", 0),
                        "image_size": Hyperparameter("int", 600),
                        "backbone_depth": Hyperparameter("int", 101),
                        "output_stride": Hyperparameter("int", 8),
                    }, ("miou", "pixel_accuracy", "eval_loss"), module=_W + "dense_aspp", param_count=58627913,
                    notes="the predecessor's 4-versus-6 GPU job's stand-in: DeepLabv3 (ASPP) on a dilated ResNet-101, "
                          "fp16 (autocast + GradScaler) on cuda, one sample per GPU, its data pipeline on the CPU in "
                          "the training process unless loader_workers says otherwise"),
    BuiltinWorkload("bug_localization", "bug_localization", "bug-localization-by-dnn-and-rvsm", "default",
                    (5,), "Eclipse UI bug reports (6 495 reports, 1-3 fixed + 50 other files each)", 5845500, {
                        "epochs": Hyperparameter("int", 1),
                        "max_iter": Hyperparameter("int", 10000, (1000, 20000), "log_uniform"),
                        "kfold": Hyperparameter("int", 10, (2, 10), "uniform"),
                        "alpha": Hyperparameter("float", 0.00001, (0.000005, 0.00002), "log_uniform"),
                        "seed": Hyperparameter("int", 42, (0, 9999), "uniform"),
                        "batch_size": Hyperparameter("int", 200),
                    }, ("top1_accuracy", "top5_accuracy", "top10_accuracy", "top20_accuracy"),
                    module=_W + "bug_localization", cpu_only=True, param_count=2101, seed_vram_mb=1800,
                    notes="CPU only; an epoch is one pass over all folds' oversampled training sets (10 folds)"),
]

VALID: Mapping[str, tuple[float, float, bool]] = {
    # name -> (low, high, low included): what a built-in can train with at all. ``range`` is only
    # where mutation samples from, so epochs 1 is fine; epochs 0 or batch_size 0 trains nothing.
    "epochs": (0, 10_000, False), "batch_size": (1, 1_000_000, True), "learning_rate": (0, 100, False),
    "seed": (0, 2**32 - 1, True), "weight_decay": (0, 1, True), "dropout": (0, 0.99, True),
    "max_iter": (1, 10_000_000, True), "kfold": (2, 1000, True), "alpha": (0, 1e6, True),
    "loader_workers": (0, 64, True), "image_size": (32, 4096, True), "backbone_depth": (50, 101, True),
    "output_stride": (8, 16, True),
}
"""Built-in hyperparameters' valid values; a name not listed here takes any finite value of its type."""

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
    """Map the predecessor's (repo, model) pair, e.g. ('VulBERTa', 'mlp'), to a built-in name."""
    return SEED_NAMES.get((repo, model))


NOT_DATA_PARALLEL: dict[str, str] = {  # built-ins a scaling case refuses, and why
    "mnist_ff": "Forward-Forward trains each layer on a loss of its own, with no end-to-end backward "
                "pass whose gradients DistributedDataParallel could average",
    "bug_localization": "it is a numpy MLP trained in k-fold processes on the CPU, with no torch model to wrap",
}
