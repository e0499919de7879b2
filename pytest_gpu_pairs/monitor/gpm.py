"""GPM's shares over one window (the SMs busy and how full of warps, the units and the DRAM bandwidth
used), from a sample at each end.

NVML computes each metric between two samples, so two bound the window exactly; the planner reads
them as how much of the card a job's kernels occupy while they run."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_gpu_pairs.devices.nvml import GPM_METRICS, NvmlUnavailable


@dataclass(frozen=True)
class GpmShares:
    """Whole-window percentages (0-100), each None with the reason in ``unmeasured``."""

    gpm_sm_util_pct: Optional[float] = None
    gpm_dram_bw_pct: Optional[float] = None
    gpm_sm_occupancy_pct: Optional[float] = None  # resident warps as a share of what the SMs can hold
    gpm_tensor_util_pct: Optional[float] = None
    gpm_fp32_util_pct: Optional[float] = None
    gpm_fp16_util_pct: Optional[float] = None
    unmeasured: dict[str, str] = field(default_factory=dict)


def not_measured(why: str) -> GpmShares:
    return GpmShares(unmeasured={key: why for key in GPM_METRICS})


class GpmWindow:
    """``open`` at the window's start, ``close`` at its end; a window never closed frees its sample."""

    def __init__(self, gpu: Any):
        self.gpu = gpu
        self.first: Any = None
        self.why: Optional[str] = gpu.gpm_unsupported()

    def open(self) -> None:
        if self.why is None:
            try:
                self.first = self.gpu.gpm_sample()
            except NvmlUnavailable as exc:
                self.why = str(exc)

    def close(self) -> GpmShares:
        if self.first is None:
            return not_measured(self.why or "the window's first GPM sample was never taken")
        try:
            second = self.gpu.gpm_sample()
        except NvmlUnavailable as exc:
            self.discard()
            return not_measured(str(exc))
        try:
            values = self.gpu.gpm_metrics(self.first, second)
        finally:
            self.gpu.gpm_free(second)
            self.discard()
        return GpmShares(**values, unmeasured={key: "NVML computed no value of it between the window's GPM samples"
                                               for key in GPM_METRICS if key not in values})

    def discard(self) -> None:
        if self.first is not None:
            self.gpu.gpm_free(self.first)
            self.first = None
