"""GPU sampling through NVML, in a thread of the pytest process.

NVML reads the driver's counters without creating a CUDA context, so the harness measures the
jobs and adds nothing to the card. Energy comes from the total-energy counter (mJ since driver
load), which integrates on the device; polled power is recorded beside it for plots only.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Optional

from pytest_gpu_pairs.devices.nvml import Gpu, optional
from pytest_gpu_pairs.monitor.samples import GpuSample


def read_sample(gpu: Gpu, last_seen_us: Optional[int]) -> tuple[GpuSample, Optional[int]]:
    """One reading of everything; returns the newest per-process timestamp seen, for the next call.

    The driver stamps per-process samples in a time base of its own. Until one has been seen
    (``last_seen_us`` None) the driver is asked for everything it holds, only to learn the
    newest stamp: those samples may be old and are not recorded; every later one is newer.
    """
    n, h = gpu.nvml, gpu.handle
    t = gpu.clock()
    util = optional(lambda: n.nvmlDeviceGetUtilizationRates(h))
    power_mw = optional(lambda: n.nvmlDeviceGetPowerUsage(h))
    instant_w, average_w = gpu.power_fields_w()
    sample = GpuSample(
        t=t, energy_mj=gpu.energy_mj(), power_w=power_mw / 1000 if power_mw is not None else None,
        power_instant_w=instant_w, power_avg_w=average_w,
        util_pct=float(util.gpu) if util is not None else None, mem_used_mb=gpu.memory_used_mb(),
        temp_c=optional(lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
        sm_clock_mhz=optional(lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))),
        mem_clock_mhz=optional(lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM))),
        power_limit_w=optional(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
        clock_event_reasons=gpu.clock_event_reasons(), pstate=gpu.performance_state(),
        pcie_gen=optional(lambda: int(n.nvmlDeviceGetCurrPcieLinkGeneration(h))))
    sample.proc_mem_mb = dict(gpu.compute_processes())
    if last_seen_us is None:
        stamps = [stamp for _, stamp, _ in gpu.process_sm_utilization(0)]
        return sample, max(stamps) if stamps else None
    newest = last_seen_us
    for pid, stamp, sm in gpu.process_sm_utilization(last_seen_us):
        sample.proc_sm_pct[pid] = sample.proc_sm_pct.get(pid, 0.0) + sm
        newest = max(newest, stamp)
    return sample, newest


def _job_tag(pid: int) -> Optional[str]:
    """The ``GPU_PAIRS_JOB`` tag in a process's environment (None when unreadable or absent)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        if entry.startswith(b"GPU_PAIRS_JOB="):
            return entry.split(b"=", 1)[1].decode(errors="replace")
    return None


class PidRoles:
    """Which job a GPU process belongs to, by its process group: each job has a session of its own,
    so a job's children (a ``train.sh`` and the python it starts) resolve to the job's role; a
    descendant that left the session resolves by the job tag in its environment.

    A pid once resolved keeps its role, so a process NVML still lists while it exits stays
    counted; a pid of no registered group or tag (another user's job) is ``other``.
    """

    def __init__(self, getpgid: Callable[[int], int] = os.getpgid,
                 job_tag: Callable[[int], Optional[str]] = _job_tag):
        self._groups: dict[int, str] = {}
        self._tags: dict[str, str] = {}
        self._known: dict[int, str] = {}
        self._getpgid, self._job_tag = getpgid, job_tag
        self._lock = threading.Lock()

    def register(self, pgid: Optional[int], role: str, tag: Optional[str] = None) -> None:
        """``role`` for the group and tag; a group registered again (a job held in standby that
        becomes one of the pair) takes its new role for pids already resolved too. A job that did
        not start has no group (``pgid`` None): only its tag is registered."""
        with self._lock:
            previous = self._groups.get(pgid) if pgid is not None else None
            if pgid is not None:
                self._groups[pgid] = role
            if tag:
                self._tags[tag] = role
            if previous is not None and previous != role:
                self._known = {pid: known for pid, known in self._known.items() if known != previous}

    def role_of(self, pid: int) -> str:
        with self._lock:
            if pid in self._known:
                return self._known[pid]
        try:
            pgid = self._getpgid(pid)
        except OSError:
            return "other"
        with self._lock:
            role = self._groups.get(pgid)
            tags = dict(self._tags)
        role = role or (tags.get(self._job_tag(pid) or "") if tags else None) or "other"
        if role != "other":
            with self._lock:
                self._known[pid] = role
        return role


class Sampler:
    """Samples a ``Gpu`` at ``hz`` in a daemon thread until stopped; ``take`` is one sample."""

    def __init__(self, gpu: Gpu, hz: float, roles: PidRoles):
        self.gpu, self.period, self.roles = gpu, 1.0 / hz, roles
        self.samples: list[GpuSample] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last_seen_us: Optional[int] = None

    def start(self) -> Sampler:
        self.take()
        self._thread = threading.Thread(target=self._run, name="gpu-pairs-nvml", daemon=True)
        self._thread.start()
        return self

    def take(self) -> GpuSample:
        sample, self._last_seen_us = read_sample(self.gpu, self._last_seen_us)
        sample.roles = {pid: self.roles.role_of(pid) for pid in set(sample.proc_mem_mb) | set(sample.proc_sm_pct)}
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        next_t = time.monotonic() + self.period
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            self.take()
            next_t += self.period
            if next_t < time.monotonic():
                next_t = time.monotonic() + self.period

    def stop(self) -> list[GpuSample]:
        if self._stop.is_set():
            return self.samples
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.take()
        return self.samples
