"""Dense sampling of one job's GPU memory, for the whole-run fit profile.

The case's sampler reads everything ten times a second; a transient of cuDNN's autotuning lasts
tens of milliseconds and falls between its readings. This one reads only the per-process memory
list, a hundred times a second, and keeps the sum over the job's processes at each reading: the
densest view NVML gives of a process it cannot see inside (a command workload; for a built-in the
allocator's own peaks say more, and this reading supplies its CUDA context).
"""
from __future__ import annotations

import threading
import time
from typing import Optional

from pytest_gpu_pairs.devices.nvml import Gpu
from pytest_gpu_pairs.monitor.gpu import PidRoles

DENSE_HZ = 100.0


class MemorySampler:
    """Sums ``role``'s per-process NVML memory at ``hz`` in a daemon thread until stopped."""

    def __init__(self, gpu: Gpu, roles: PidRoles, role: str, hz: float = DENSE_HZ):
        self.gpu, self.roles, self.role, self.period = gpu, roles, role, 1.0 / hz
        self.readings: list[tuple[float, float]] = []  # (time, MB of the role's processes) where NVML listed one
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> MemorySampler:
        self._thread = threading.Thread(target=self._run, name="gpu-pairs-memory", daemon=True)
        self._thread.start()
        return self

    def take(self) -> None:
        t = self.gpu.clock()
        used = [mb for pid, mb in self.gpu.compute_processes() if mb is not None and self.roles.role_of(pid) == self.role]
        if used:
            self.readings.append((t, sum(used)))

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            self.take()
            next_t = max(next_t + self.period, time.monotonic())

    def stop(self) -> list[tuple[float, float]]:
        if not self._stop.is_set():
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
        return self.readings

    def peak(self) -> Optional[float]:
        return max((mb for _, mb in self.readings), default=None)

    def at_or_before(self, t: float) -> Optional[float]:
        """The last reading taken at or before ``t`` (None before the first)."""
        earlier = [mb for when, mb in self.readings if when <= t]
        return earlier[-1] if earlier else None
