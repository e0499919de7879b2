"""What a session was asked to do: the options the plugin read, as one immutable value."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional


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
