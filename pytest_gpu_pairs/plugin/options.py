"""The command-line and ini options, registered in one place and read into the run layer's options."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from pytest_gpu_pairs.experiment.schema import METHODS, SHARING_MODES
from pytest_gpu_pairs.run.options import MAX_CASE_S, MAX_ROUNDS, GpuPairsOptions

DEFAULT_OUT = "gpu-pairs-results"


def _positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number above 0, got {text!r}")
    return value


def _sharing_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",")))
    if not modes or any(m not in SHARING_MODES for m in modes):
        raise argparse.ArgumentTypeError(f"expected timeslice, mps or timeslice,mps, got {text!r}")
    return modes


def _percentage(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise argparse.ArgumentTypeError(f"expected a whole percentage from 1 to 100, got {text!r}")
    return int(text)


def _precision(text: str) -> float:
    if text.strip().lower() == "off":
        return 0.0
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a relative half width between 0 and 1 (e.g. 0.03) or off, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-pairs", "pytest-gpu-pairs: two training jobs on one GPU")
    group.addoption("--gpu-pairs-settings", action="append", default=[], metavar="PATH",
                    help="experiment file (native or predecessor format); repeatable; replaces the ini's gpu_pairs_settings")
    group.addoption("--gpu-pairs-device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="where jobs train: auto picks cuda when NVML sees a GPU (default: auto)")
    group.addoption("--gpu-pairs-scale", type=_positive_float, default=1.0, metavar="F",
                    help="fraction of each epoch's steps every job runs (default: 1.0)")
    group.addoption("--vram-budget-mb", type=_positive_float, default=None, metavar="N",
                    help="peak VRAM budget of a pair in MB; overrides the settings (default there: 7500)")
    group.addoption("--min-efficiency", type=float, default=None, metavar="X",
                    help="minimum concurrency efficiency; overrides the settings and is then enforced on cpu too")
    group.addoption("--sample-hz", type=_positive_float, default=10.0, metavar="N",
                    help="GPU sampling rate of the monitors (default: 10)")
    group.addoption("--gpu-memory-mb", type=_positive_float, default=None, metavar="N",
                    help="emulate a card of N MB: a ballast process holds the rest of the GPU's memory for each "
                         "case, solo baselines included, so a smaller card's OOMs happen for real (needs a GPU)")
    group.addoption("--gpu-pairs-out", default=DEFAULT_OUT, metavar="DIR",
                    help=f"where per-case results, logs and samples go (default: ./{DEFAULT_OUT})")
    group.addoption("--gpu-pairs-sharing", type=_sharing_modes, default=None, metavar="MODES",
                    help="how the two jobs share the GPU: timeslice (the driver's default), mps (a private "
                         "MPS daemon of the harness), or timeslice,mps to measure every pair both ways; "
                         "overrides the settings (default there: timeslice)")
    group.addoption("--gpu-pairs-mps-threads", type=_percentage, default=None, metavar="PCT",
                    help="CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of every job of an mps case; overrides the settings")
    group.addoption("--gpu-pairs-mps-mem-limit-mb", type=_positive_int, default=None, metavar="N",
                    help="CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (N MB on the device) of every job of an mps case; "
                         "overrides the settings")
    group.addoption("--gpu-pairs-compare", default=None, metavar="PATH",
                    help="baseline to compare this session's records with at the end: pytest-benchmark JSON, "
                         "a --gpu-pairs-out directory or a result.json; the table goes into the terminal summary")
    group.addoption("--gpu-pairs-compare-fail", default=None, metavar="METRIC:PCT[,...]",
                    help="with --gpu-pairs-compare: exit non-zero when a metric is worse than the baseline by "
                         "more than PCT %%, e.g. gpu_energy_j:5%%,peak_vram_mb:3%%,concurrency_efficiency:5%%")
    group.addoption("--gpu-pairs-compare-force", action="store_true", default=False,
                    help="compare even with a baseline from another GPU model, driver or CUDA version")
    group.addoption("--gpu-pairs-resume", action="store_true", default=False,
                    help="skip cases whose folder in --gpu-pairs-out holds a complete result of the same "
                         "models, hyperparameters, scale and device (an interrupted case runs again)")
    group.addoption("--gpu-pairs-method", choices=METHODS, default=None,
                    help="how concurrent cases are measured; overrides the settings' defaults.method. interleaved: "
                         "both jobs kept alive, rounds of fg alone, bg alone and both, until the efficiency is "
                         "precise enough (figures that reproduce); epoch (default): the predecessor's way, one real "
                         "epoch of the foreground under a background restarted in a loop (does it run, does it fit, "
                         "what does a finished run score)")
    group.addoption("--gpu-pairs-precision", type=_precision, default=None, metavar="X|off",
                    help="interleaved cases add rounds until the 95 %% interval of the efficiency is within "
                         "+-X of its mean (default: 0.03 on a GPU; on the CPU a fixed number of rounds); off: "
                         "always the minimum rounds")
    group.addoption("--gpu-pairs-max-rounds", type=_positive_int, default=MAX_ROUNDS, metavar="N",
                    help=f"most interleaved rounds per case (default: {MAX_ROUNDS})")
    group.addoption("--gpu-pairs-max-case-s", type=_positive_float, default=MAX_CASE_S, metavar="S",
                    help=f"device time cap per interleaved case, warm-up included (default: {MAX_CASE_S:g})")
    parser.addini("gpu_pairs_settings", type="paths", default=[],
                  help="experiment files used when --gpu-pairs-settings is not given")
    parser.addini("gpu_pairs_mps_control", default="",
                  help="path of nvidia-cuda-mps-control (default: found on PATH or in the driver's folders)")


def options_from_config(config: pytest.Config) -> GpuPairsOptions:
    given = config.getoption("gpu_pairs_settings")
    settings = tuple(Path(p) for p in given) if given else tuple(config.getini("gpu_pairs_settings"))
    precision = config.getoption("gpu_pairs_precision")
    return GpuPairsOptions(
        settings=settings, device=config.getoption("gpu_pairs_device"), scale=config.getoption("gpu_pairs_scale"),
        vram_budget_mb=config.getoption("vram_budget_mb"), min_efficiency=config.getoption("min_efficiency"),
        sample_hz=config.getoption("sample_hz"), out_dir=Path(config.getoption("gpu_pairs_out")).absolute(),
        sharing=config.getoption("gpu_pairs_sharing"), mps_threads=config.getoption("gpu_pairs_mps_threads"),
        mps_mem_limit_mb=config.getoption("gpu_pairs_mps_mem_limit_mb"),
        mps_control=config.getini("gpu_pairs_mps_control") or None, gpu_memory_mb=config.getoption("gpu_memory_mb"),
        resume=config.getoption("gpu_pairs_resume"), method=config.getoption("gpu_pairs_method"),
        precision=precision or None, precision_off=precision == 0.0,
        max_rounds=config.getoption("gpu_pairs_max_rounds"), max_case_s=config.getoption("gpu_pairs_max_case_s"))
