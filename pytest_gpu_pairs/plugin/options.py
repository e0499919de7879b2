"""The command-line and ini options, registered in one place and read into the run layer's options.

Every option is spelled ``--gpu-pairs-...``; the four older spellings (``RENAMED``) still work for
one release and say so. This module is imported in every pytest session of every project where the
package is installed, so it imports nothing of the package at module level: the settings schema and
the run layer load only when a gpu-pairs session is actually built.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import pytest

from pytest_gpu_pairs.experiment.vocabulary import METHODS, pin_cpus, sharing_modes

if TYPE_CHECKING:
    from pytest_gpu_pairs.run.options import GpuPairsOptions

DEFAULT_OUT = "gpu-pairs-results"
DEFAULT_DEVICE = "auto"
DEFAULT_SCALE = 1.0
MAX_CASE_S_HELP, MAX_CASE_S_CPU_HELP, PRECISION_HELP = 90.0, 300.0, 0.02  # run.options' values, checked by a unit test
RENAMED = {"--vram-budget-mb": "--gpu-pairs-vram-budget-mb", "--min-efficiency": "--gpu-pairs-min-efficiency",
           "--sample-hz": "--gpu-pairs-sample-hz", "--gpu-memory-mb": "--gpu-pairs-gpu-memory-mb"}


def _positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number above 0, got {text!r}")
    return value


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


def _shard(text: str) -> tuple[int, int]:
    from pytest_gpu_pairs.planning.schedule import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration(text: str) -> float:
    from pytest_gpu_pairs.run.time_limit import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gpu_list(text: str) -> tuple[str, ...]:
    parts = [p.strip() for p in text.split(",")]
    valid = all(p.isdigit() or p.startswith(("GPU-", "MIG-")) for p in parts)
    if not parts or not valid or len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(f"expected distinct GPU indices or UUIDs such as 0,1,3, got {text!r}")
    return tuple(parts)


def cpu_share(workerinput: Optional[dict[str, Any]]) -> tuple[int, int]:
    """Worker ``gwI`` of N takes the I-th of N blocks of the host's cores for its jobs (on a GPU or
    not: CPU workers on one host must not pin their jobs to the same cores either); no worker: all."""
    if not workerinput:
        return 0, 1
    index = str(workerinput.get("workerid", "gw0")).removeprefix("gw")
    count = workerinput.get("workercount")
    if not index.isdigit() or not isinstance(count, int) or not 0 <= int(index) < count:
        return 0, 1
    return int(index), count


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


INI_NAMES = ("gpu_pairs_settings", "gpu_pairs_out", "gpu_pairs_device", "gpu_pairs_scale", "gpu_pairs_vram_budget_mb")
_DEFAULTS: dict[str, Any] = {}  # dest -> default of every option below, for in_use


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-pairs", "pytest-gpu-pairs: two training jobs on one GPU")
    _add(group)
    for option in group.options:
        _DEFAULTS[option.dest] = option.default
    _add_ini(parser)


def _add(group) -> None:
    group.addoption("--gpu-pairs-settings", action="append", default=[], metavar="PATH",
                    help="experiment file (native or predecessor format); repeatable; replaces the ini's gpu_pairs_settings")
    group.addoption("--gpu-pairs-device", choices=("auto", "cuda", "cpu"), default=None,
                    help="where jobs train: auto picks cuda when NVML sees a GPU (default: the ini's "
                         f"gpu_pairs_device, else {DEFAULT_DEVICE})")
    group.addoption("--gpu-pairs-scale", type=_positive_float, default=None, metavar="F",
                    help=f"fraction of each epoch's steps every job runs (default: the ini's gpu_pairs_scale, else {DEFAULT_SCALE})")
    group.addoption("--gpu-pairs-vram-budget-mb", "--vram-budget-mb", dest="gpu_pairs_vram_budget_mb",
                    type=_positive_float, default=None, metavar="N",
                    help="peak VRAM budget of a pair in MB; overrides the ini's gpu_pairs_vram_budget_mb and the "
                         "settings (default there: 7500)")
    group.addoption("--gpu-pairs-min-efficiency", "--min-efficiency", dest="gpu_pairs_min_efficiency", type=float,
                    default=None, metavar="X",
                    help="minimum concurrency efficiency; overrides the settings and is then enforced on cpu too")
    group.addoption("--gpu-pairs-sample-hz", "--sample-hz", dest="gpu_pairs_sample_hz", type=_positive_float,
                    default=10.0, metavar="N", help="GPU sampling rate of the monitors (default: 10)")
    group.addoption("--gpu-pairs-gpu-memory-mb", "--gpu-memory-mb", dest="gpu_pairs_gpu_memory_mb",
                    type=_positive_float, default=None, metavar="N",
                    help="emulate a card of N MB: a ballast process holds the rest of the GPU's memory for each "
                         "case, solo baselines included, so a smaller card's OOMs happen for real (needs a GPU)")
    group.addoption("--gpu-pairs-out", default=None, metavar="DIR",
                    help=f"where per-case results, logs and samples go (default: the ini's gpu_pairs_out, else ./{DEFAULT_OUT})")
    group.addoption("--gpu-pairs-plan", action="store_true", default=False,
                    help="print every selected case with its estimated time, the total and the cases that "
                         "will run far longer than the rest, then stop without running anything")
    group.addoption("--gpu-pairs-shard", type=_shard, default=None, metavar="K/N",
                    help="run only shard K of N: the selected cases split into N parts of about equal "
                         "estimated cost, the same split on every machine (Slurm arrays, CI matrices); "
                         "join the results with gpu-pairs merge")
    group.addoption("--gpu-pairs-gpus", type=_gpu_list, default=None, metavar="I,J,...",
                    help="the GPUs to run on (NVML indices); with pytest-xdist one worker per GPU, and -n auto "
                         "counts them (default: CUDA_VISIBLE_DEVICES, else every GPU); one GPU without -n: "
                         "the session runs there, its jobs on that GPU's share of the host's CPUs")
    group.addoption("--gpu-pairs-pin-cpus", type=pin_cpus, default=None, metavar="auto|off|N",
                    help="pin each job to CPUs of its own (whole cores, one core left to the harness, a share "
                         "of the host per xdist worker or named GPU): auto splits them evenly between the two "
                         "jobs, N gives each job N CPUs, off leaves placement to the kernel (default: auto on Linux)")
    group.addoption("--gpu-pairs-sharing", type=sharing_modes, default=None, metavar="MODES",
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
                    help="how concurrent cases are measured; overrides the settings' defaults.method. interleaved "
                         "(the pairs design's default): both jobs kept alive (started again when one ends), rounds "
                         "of fg alone, bg alone and both, until the efficiency is precise enough (figures that "
                         "reproduce); epoch (the hp_study and mutation designs' default): the predecessor's way, one "
                         "real epoch of the foreground under a background restarted in a loop (does it run, does "
                         "it fit, what does a finished run score and spend)")
    group.addoption("--gpu-pairs-precision", type=_precision, default=None, metavar="X|off",
                    help="interleaved cases add rounds until the 95 %% interval of the efficiency is within "
                         f"+-X of its mean (default: {PRECISION_HELP:g} on a GPU; on the CPU a fixed number of rounds); off: "
                         "always the minimum rounds")
    group.addoption("--gpu-pairs-max-rounds", type=_positive_int, default=None, metavar="N",
                    help="most interleaved rounds per case (default: no limit but the time cap, --gpu-pairs-max-case-s)")
    group.addoption("--gpu-pairs-max-case-s", type=_positive_float, default=None, metavar="S",
                    help=f"device time cap per interleaved case, warm-up included (default: {MAX_CASE_S_HELP:g} on a GPU, "
                         f"{MAX_CASE_S_CPU_HELP:g} on the CPU, where steps are slower)")
    group.addoption("--gpu-pairs-time-limit", type=_duration, default=None, metavar="DURATION",
                    help="the session must end within this (seconds, or 25m, 1h30m): a case, or a replicate "
                         "(dependency group) whole, whose estimate would end past it is not started but skipped, "
                         "and the session exits 2; --gpu-pairs-resume measures them later (default: no limit)")


def _add_ini(parser: pytest.Parser) -> None:
    parser.addini("gpu_pairs_settings", type="paths", default=[],
                  help="experiment files used when --gpu-pairs-settings is not given")
    parser.addini("gpu_pairs_mps_control", default="",
                  help="path of nvidia-cuda-mps-control (default: found on PATH or in the driver's folders)")
    parser.addini("gpu_pairs_out", default="", help=f"results folder when --gpu-pairs-out is not given (default: {DEFAULT_OUT})")
    parser.addini("gpu_pairs_device", default="", help="auto, cuda or cpu when --gpu-pairs-device is not given")
    parser.addini("gpu_pairs_scale", default="", help="fraction of each epoch's steps when --gpu-pairs-scale is not given")
    parser.addini("gpu_pairs_vram_budget_mb", default="",
                  help="peak VRAM budget of a pair in MB when --gpu-pairs-vram-budget-mb is not given (over the settings)")


def _ini(config: pytest.Config, name: str, convert: Callable[[str], Any]) -> Any:
    """An ini value through the option's own check; a bad one is one line naming the ini key."""
    text = str(config.getini(name) or "").strip()
    if not text:
        return None
    try:
        return convert(text)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise pytest.UsageError(f"ini option {name} = {text!r}: {exc}") from None


def _device(text: str) -> str:
    if text not in ("auto", "cuda", "cpu"):
        raise ValueError("expected auto, cuda or cpu")
    return text


def _given_or_ini(config: pytest.Config, dest: str, ini: str, convert: Callable[[str], Any], default: Any) -> Any:
    given = config.getoption(dest)
    if given is not None:
        return given
    from_ini = _ini(config, ini, convert)
    return default if from_ini is None else from_ini


def renamed_spellings(args: list[str]) -> list[str]:
    """One line for each old option spelling on the command line, naming the new one."""
    used = {arg.split("=", 1)[0] for arg in args if isinstance(arg, str)}
    return [f"{old} is now {new}; the old spelling goes away in the next release"
            for old, new in RENAMED.items() if old in used]


def warn_renamed(config: pytest.Config) -> None:
    for line in renamed_spellings(list(config.invocation_params.args)):
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(line), stacklevel=2)


def in_use(config: pytest.Config) -> bool:
    """Whether this session asked for gpu-pairs through an option (command line, addopts) or an ini
    value (the suite's fixture is the third way in, seen at collection): until then the plugin
    imports nothing more."""
    return asked_by_option(config) or any(config.getini(name) for name in INI_NAMES)


def asked_by_option(config: pytest.Config) -> bool:
    """A gpu-pairs option was given (command line or addopts), not only an ini value."""
    return any(config.getoption(dest) not in (None, False, [], default) for dest, default in _DEFAULTS.items())


def planning(config: pytest.Config) -> bool:
    return bool(config.getoption("gpu_pairs_plan"))


def options_from_config(config: pytest.Config) -> GpuPairsOptions:
    from pytest_gpu_pairs.run.options import MAX_ROUNDS, GpuPairsOptions

    given = config.getoption("gpu_pairs_settings")
    settings = tuple(Path(p) for p in given) if given else tuple(config.getini("gpu_pairs_settings"))
    precision = config.getoption("gpu_pairs_precision")
    out = config.getoption("gpu_pairs_out") or str(config.getini("gpu_pairs_out") or "").strip() or DEFAULT_OUT
    max_rounds: Optional[int] = config.getoption("gpu_pairs_max_rounds")
    max_case_s: Optional[float] = config.getoption("gpu_pairs_max_case_s")
    workerinput = getattr(config, "workerinput", None)  # a pytest-xdist worker: its id and its GPU
    gpus = config.getoption("gpu_pairs_gpus")
    gpu = workerinput.get("gpu_pairs_gpu") if workerinput is not None else (
        str(gpus[0]) if gpus and len(gpus) == 1 else None)  # one session on one named GPU
    return GpuPairsOptions(
        settings=settings, device=_given_or_ini(config, "gpu_pairs_device", "gpu_pairs_device", _device, DEFAULT_DEVICE),
        scale=_given_or_ini(config, "gpu_pairs_scale", "gpu_pairs_scale", _positive_float, DEFAULT_SCALE),
        vram_budget_mb=_given_or_ini(config, "gpu_pairs_vram_budget_mb", "gpu_pairs_vram_budget_mb", _positive_float, None),
        min_efficiency=config.getoption("gpu_pairs_min_efficiency"),
        sample_hz=config.getoption("gpu_pairs_sample_hz"), out_dir=Path(out).absolute(),
        sharing=config.getoption("gpu_pairs_sharing"), mps_threads=config.getoption("gpu_pairs_mps_threads"),
        mps_mem_limit_mb=config.getoption("gpu_pairs_mps_mem_limit_mb"),
        mps_control=config.getini("gpu_pairs_mps_control") or None,
        gpu_memory_mb=config.getoption("gpu_pairs_gpu_memory_mb"),
        resume=config.getoption("gpu_pairs_resume"), method=config.getoption("gpu_pairs_method"),
        precision=precision,
        max_rounds=MAX_ROUNDS if max_rounds is None else max_rounds,
        max_case_s=max_case_s, time_limit_s=config.getoption("gpu_pairs_time_limit"),
        worker=workerinput.get("workerid") if workerinput is not None else None, gpu=gpu,
        pin_cpus=config.getoption("gpu_pairs_pin_cpus") or "auto", cpu_share=cpu_share(workerinput),
        suite=tuple(Path(p) for p in config.getini("gpu_pairs_settings")))
