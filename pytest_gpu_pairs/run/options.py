"""What a session was asked to do: the options the plugin read, as one immutable value."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.record.stats import StoppingRule

DEFAULT_PRECISION = 0.03
MIN_ROUNDS_FOR_PRECISION = 10  # hyperfine's floor: an interval from fewer rounds can look tight by luck
MAX_ROUNDS = 60
MAX_CASE_S = 180.0


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
    precision: Optional[float] = None  # None: the device's default (3 % on a GPU, fixed rounds on the CPU)
    precision_off: bool = False
    max_rounds: int = MAX_ROUNDS
    max_case_s: float = MAX_CASE_S

    def stopping_rule(self, device: str, min_rounds: int) -> StoppingRule:
        """How many interleaved rounds a case measures: to the precision target on a GPU, a fixed
        number on the CPU (where the figures only show that the pipeline works)."""
        precision = None if self.precision_off else (self.precision or (DEFAULT_PRECISION if device == "cuda" else None))
        if precision is not None:
            min_rounds = max(min_rounds, MIN_ROUNDS_FOR_PRECISION)
        return StoppingRule(precision, min_rounds, max(self.max_rounds, min_rounds), self.max_case_s)
