"""What a session was asked to do: the options the plugin read, as one immutable value."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.record.stats import StoppingRule

# a run's interval holds its own rounds' noise, not the offset each start of a pair lands on (H100,
# 2026-11-24: between-run sd 1.3 % on a quiet host, Cochran's p < 0.01); at +-2 % three sessions
# agree within 5 % about nine times in ten there, at +-3 % about eight (reports/reference/default_method/run-spread)
DEFAULT_PRECISION = 0.02
# hyperfine's floor is 10 runs; half-second phases make 10 rounds only ~20 s, shorter than the
# seconds over which a host-bound loop's speed wanders, and such intervals looked tight by luck
# (H100, 2026-11-23: the two of nine cases that stopped at 10-11 rounds were the sessions' outliers)
MIN_ROUNDS_FOR_PRECISION = 20
MAX_ROUNDS: Optional[int] = None  # the time cap ends a case that does not reach its precision
# a case's device time, warm-up and every start included, spread evenly over the pair's starts: on the
# H100s the precision target is out of reach within any such time once the interval covers where the
# next start lands (the between-start offset alone is about +-1.9 % over three starts), so the cap, not
# the target, ends most cases, and a plan knows their cost in advance
MAX_CASE_S = 90.0
# on the CPU a training step takes tenths of a second to seconds (a 2-core laptop: resnet20's step in
# the pair 1-5 s, siamese's 2-4 s), and the phases must hold several of them: three rounds then need
# minutes, and the CPU's time is no shared device's; a case there may take this long unless the
# option says otherwise
MAX_CASE_S_CPU = 300.0


class OptionsError(ValueError):
    """An option value that makes no sense; the message is one line naming the option."""


_POSITIVE = {"scale": "--gpu-pairs-scale", "sample_hz": "the sampling rate (--gpu-pairs-sample-hz)",
             "vram_budget_mb": "the VRAM budget (--gpu-pairs-vram-budget-mb)",
             "gpu_memory_mb": "the emulated card size (--gpu-pairs-gpu-memory-mb)", "max_case_s": "--gpu-pairs-max-case-s",
             "time_limit_s": "--gpu-pairs-time-limit"}


def _finite(value: Optional[float], positive: bool) -> bool:
    return value is None or (math.isfinite(value) and (value > 0 if positive else value >= 0))


@dataclass(frozen=True)
class GpuPairsOptions:
    settings: tuple[Path, ...]
    device: str
    scale: float
    vram_budget_mb: Optional[float]
    min_efficiency: Optional[float]
    sample_hz: float
    out_dir: Path
    sharing: Optional[tuple[str, ...]] = None
    mps_threads: Optional[int] = None
    mps_mem_limit_mb: Optional[int] = None
    mps_control: Optional[str] = None
    gpu_memory_mb: Optional[float] = None
    resume: bool = False
    method: Optional[str] = None
    # the interleaved rounds' precision target: None for the device's default (2 % on a GPU, fixed
    # rounds on the CPU), 0 for none (fixed rounds everywhere, --gpu-pairs-precision off)
    precision: Optional[float] = None
    max_rounds: Optional[int] = MAX_ROUNDS
    max_case_s: Optional[float] = None  # None: the device's (MAX_CASE_S on a GPU, MAX_CASE_S_CPU on the CPU)
    worker: Optional[str] = None  # the pytest-xdist worker this session is (gw0, ...), None outside xdist
    gpu: Optional[str] = None  # the GPU this session owns (NVML index or UUID); None: GPU 0, unpinned
    pin_cpus: str = "auto"  # auto, off, or a number of CPUs per job
    cpu_share: tuple[int, int] = (0, 1)  # this worker's block of the host's cores: (index, count)
    suite: tuple[Path, ...] = ()  # the project's own suite (the ini's gpu_pairs_settings): it owns its case ids
    time_limit_s: Optional[float] = None  # start no replicate the estimates say would end past this (run.time_limit)

    def __post_init__(self) -> None:
        for name, option in _POSITIVE.items():
            if not _finite(getattr(self, name), positive=True):
                raise OptionsError(f"{option}: expected a finite number above 0, got {getattr(self, name)!r}")
        if not _finite(self.min_efficiency, positive=False):
            raise OptionsError(f"the efficiency minimum (--gpu-pairs-min-efficiency): expected a finite number of 0 or more, "
                               f"got {self.min_efficiency!r}")
        if self.settings and self.out_dir.exists() and not self.out_dir.is_dir():
            raise OptionsError(f"--gpu-pairs-out {self.out_dir}: expected a folder, and this is a file")


def stopping_rule(precision: Optional[float], max_rounds: Optional[int], max_case_s: Optional[float], device: str,
                  min_rounds: int) -> StoppingRule:
    """How many interleaved rounds a case measures: to the precision target on a GPU, a fixed
    number on the CPU (where the figures only show that the pipeline works). ``precision`` None is
    the device's default and 0 none; ``max_case_s`` None is the device's cap."""
    if precision is None:
        precision = DEFAULT_PRECISION if device == "cuda" else None
    precision = precision or None
    if precision is not None:
        min_rounds = max(min_rounds, MIN_ROUNDS_FOR_PRECISION)
    max_rounds = None if max_rounds is None else max(max_rounds, min_rounds)
    cap = max_case_s if max_case_s is not None else (MAX_CASE_S if device == "cuda" else MAX_CASE_S_CPU)
    return StoppingRule(precision, min_rounds, max_rounds, cap)
