"""The command-line options of DESIGN.md, registered in one place and read into one object."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

DEFAULT_OUT = "gpu-pairs-results"


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"expected a positive number, got {text}")
    return value


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-pairs", "pytest-gpu-pairs: two training jobs on one GPU")
    group.addoption("--gpu-pairs-settings", action="append", default=[], metavar="PATH",
                    help="experiment file (native or seed format); repeatable; replaces the ini's gpu_pairs_settings")
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
    parser.addini("gpu_pairs_settings", type="paths", default=[],
                  help="experiment files used when --gpu-pairs-settings is not given")


@dataclass(frozen=True)
class GpuPairsOptions:
    settings: tuple[Path, ...]
    device: str
    scale: float
    vram_budget_mb: Optional[float]
    min_efficiency: Optional[float]
    sample_hz: float
    out_dir: Path
    gpu_memory_mb: Optional[float] = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "GpuPairsOptions":
        given = config.getoption("gpu_pairs_settings")
        settings = tuple(Path(p) for p in given) if given else tuple(config.getini("gpu_pairs_settings"))
        return cls(settings=settings, device=config.getoption("gpu_pairs_device"),
                   scale=config.getoption("gpu_pairs_scale"), vram_budget_mb=config.getoption("vram_budget_mb"),
                   min_efficiency=config.getoption("min_efficiency"), sample_hz=config.getoption("sample_hz"),
                   out_dir=Path(config.getoption("gpu_pairs_out")).absolute(),
                   gpu_memory_mb=config.getoption("gpu_memory_mb"))
