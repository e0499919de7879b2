"""Session-wide facts every round needs: the device, the scale, the idle power."""
from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_gpu_pairs.devices.nvml import Gpu
from pytest_gpu_pairs.run.cpus import CpuPlan, unpinned


@dataclass
class Environment:
    """Session-wide facts every measurement needs."""

    device: str
    scale: float
    sample_hz: float
    gpu: Optional[Gpu] = None
    gpu_unavailable: Optional[str] = None
    idle_power_w: Optional[float] = None
    idle_power_note: Optional[str] = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # process groups of helpers that are not jobs (the --gpu-pairs-gpu-memory-mb ballast), by role
    fixed_roles: dict[int, str] = field(default_factory=dict)
    cpus: CpuPlan = field(default_factory=lambda: unpinned("no CPU plan was made"))
    live: Optional[Any] = None  # live.LiveLine when the terminal shows one: told when a round starts and ends
    host: str = field(default_factory=socket.gethostname)

    def one_loop(self, builtin: bool) -> bool:
        """Whether a job is one training loop driving a GPU (a built-in on a GPU): it gets two CPUs;
        a built-in training on the CPU, or a command workload, gets its role's whole share."""
        return builtin and self.device == "cuda"

    def job_cpus(self, role: str, builtin: bool) -> Optional[frozenset[int]]:
        """The CPUs a job of this role runs on."""
        return self.cpus.for_job(role, self.one_loop(builtin))

    @property
    def device_name(self) -> str:
        return self.gpu.info.name if self.gpu is not None and self.device == "cuda" else "cpu"

    @property
    def gpu_uuid(self) -> Optional[str]:
        return self.gpu.info.uuid if self.gpu is not None and self.device == "cuda" else None
