"""Progress read from a script's own log: the named groups a ``progress_pattern`` may use, and presets
for the common log formats.

A command workload that does not speak the progress protocol still prints where it is; its
``progress_pattern`` (or a ``progress_preset``) says how to read that, so steps per second, the
training window and readiness come from the log instead of the process's lifetime.
"""
from __future__ import annotations

from dataclasses import dataclass

from pytest_gpu_pairs.patterns import compile_pattern

GROUPS: dict[str, str] = {
    "step": "steps done so far in the run (a global step counter)",
    "total": "beside step: the run's total steps; a line with another total belongs to another progress bar "
             "(an evaluation bar) and is not counted",
    "epoch": "the epoch number; alone, progress is counted in epochs (fractions allowed)",
    "batch": "the position inside the epoch (a batch index, or samples seen); needs batches",
    "batches": "beside batch: the epoch's length in the same unit",
}


@dataclass(frozen=True)
class Preset:
    pattern: str
    text: str


PRESETS: dict[str, Preset] = {
    "pytorch_word_language_model": Preset(
        r"\|\s*epoch\s+(?P<epoch>\d+)\s*\|\s*(?P<batch>\d+)\s*/\s*(?P<batches>\d+)\s+batches",
        "pytorch/examples word_language_model: `| epoch   1 |   200/ 2983 batches | lr 20.00 | ...`"),
    "pytorch_mnist": Preset(
        r"Train Epoch:\s*(?P<epoch>\d+)\s*\[\s*(?P<batch>\d+)\s*/\s*(?P<batches>\d+)",
        "pytorch/examples mnist, mnist_rnn, siamese_network: `Train Epoch: 1 [640/60000 (1%)]\\tLoss: ...`"
        " (samples seen)"),
    "pytorch_imagenet": Preset(
        r"Epoch:\s*\[(?P<epoch>\d+)\]\s*\[\s*(?P<batch>\d+)\s*/\s*(?P<batches>\d+)\]",
        "pytorch/examples imagenet and akamaster/pytorch_resnet_cifar10: `Epoch: [0][ 50/391]\\tTime ...`"),
    "lightning": Preset(
        r"Epoch (?P<epoch>\d+):\s*\d+%\|[^|]*\|\s*(?P<batch>\d+)/(?P<batches>\d+)",
        "PyTorch Lightning's progress bar: `Epoch 0:  45%|████▌     | 450/1000 [00:10<00:12, 45.0it/s, ...]`"),
    "huggingface_trainer": Preset(
        r"\|\s*(?P<step>\d+)/(?P<total>\d+)\s*\[",
        "Hugging Face Trainer's (and any tqdm) progress bar: ` 12%|█▏        | 60/500 [00:05<00:36, 12.1it/s]`; "
        "evaluation bars (another total) are not counted"),
    "reid_baseline": Preset(
        r"^Epoch (?P<epoch>\d+)/\d+\s*$",
        "layumi/Person_reID_baseline_pytorch: `Epoch 3/59` at each epoch's start (progress in whole epochs)"),
}


def check_groups(names: set[str]) -> None:
    """A ValueError naming what is missing or unknown; the rules of ``GROUPS``."""
    unknown = sorted(names - set(GROUPS))
    if unknown:
        raise ValueError(f"expected named groups among {', '.join(GROUPS)} (unknown: {', '.join(unknown)})")
    if not names & {"step", "batch", "epoch"}:
        raise ValueError("expected a named group step, batch (with batches) or epoch, e.g. step (?P<step>\\d+)")
    if ("batch" in names) != ("batches" in names):
        raise ValueError("expected batch and batches together: the epoch's length turns a position in it into steps")
    if "step" in names and "batch" in names:
        raise ValueError("expected either step or batch and batches, not both")
    if "total" in names and "step" not in names:
        raise ValueError("expected total only beside step")


def check_progress_pattern(pattern: str) -> str:
    """The pattern as given once it compiles for RE2 and its named groups follow ``GROUPS``."""
    check_groups(set(compile_pattern(pattern).groupindex))
    return pattern


def preset_pattern(name: str) -> str:
    if name not in PRESETS:
        raise ValueError(f"expected one of the presets {', '.join(PRESETS)}, got {name!r}")
    return PRESETS[name].pattern
