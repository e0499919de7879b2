"""GPU sampling through NVML, in a thread of the pytest process.

NVML reads the driver's counters without creating a CUDA context, so the harness measures the
jobs and adds nothing to the card. Energy comes from the total-energy counter (mJ since driver
load), which integrates on the device; polled power is recorded beside it for plots only.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .samples import GpuSample

MB = 1024 * 1024
POWER_FIELDS = ("NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE")


class NvmlUnavailable(RuntimeError):
    """No usable NVIDIA GPU; the message says why, for the record's notes."""


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    uuid: str
    driver: str
    cuda_driver_version: str
    memory_total_mb: float
    power_limit_w: Optional[float]


def _load_nvml():
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"nvidia-ml-py is not importable ({exc})") from None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise NvmlUnavailable(f"NVML could not start: {exc}") from None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _optional(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:
        return None


class Gpu:
    """An opened NVML device; ``nvml`` is the pynvml module or a fake with the same functions.

    ``clock`` and ``sleep`` are the wall clock NVML's per-process timestamps share (µs since the
    epoch) and the way to wait; tests pass a scripted clock.
    """

    def __init__(self, index: int = 0, nvml=None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.nvml = nvml or _load_nvml()
        self.clock, self.sleep = clock, sleep
        try:
            count = self.nvml.nvmlDeviceGetCount()
        except Exception as exc:
            raise NvmlUnavailable(f"NVML could not count devices: {exc}") from None
        if count <= index:
            raise NvmlUnavailable(f"NVML reports {count} GPU(s); device {index} does not exist")
        self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        self.info = self._read_info(index)
        self._energy_ok = self.energy_mj() is not None
        self._power_fields = tuple(getattr(self.nvml, name, None) for name in POWER_FIELDS)
        self._power_fields_ok = None not in self._power_fields

    def _read_info(self, index: int) -> DeviceInfo:
        n, h = self.nvml, self.handle
        cuda = _optional(n.nvmlSystemGetCudaDriverVersion)
        limit = _optional(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
        return DeviceInfo(index, _text(n.nvmlDeviceGetName(h)), _text(_optional(lambda: n.nvmlDeviceGetUUID(h)) or ""),
                          _text(_optional(n.nvmlSystemGetDriverVersion) or "unknown"),
                          f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else "unknown",
                          n.nvmlDeviceGetMemoryInfo(h).total / MB, limit / 1000 if limit else None)

    @property
    def has_energy_counter(self) -> bool:
        return self._energy_ok

    def energy_mj(self) -> Optional[float]:
        return _optional(lambda: float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)))

    def memory_used_mb(self) -> Optional[float]:
        mem = _optional(lambda: self.nvml.nvmlDeviceGetMemoryInfo(self.handle))
        return mem.used / MB if mem is not None else None

    def power_fields_w(self) -> tuple[Optional[float], Optional[float]]:
        """POWER_INSTANT and POWER_AVERAGE in W, one call for both; None for a field the driver refuses.

        A driver that rejects the call as a whole is not asked again in this session.
        """
        if not self._power_fields_ok:
            return None, None
        try:
            values = self.nvml.nvmlDeviceGetFieldValues(self.handle, list(self._power_fields))
        except Exception:
            self._power_fields_ok = False
            return None, None
        return tuple(v.value.uiVal / 1000.0 if v.nvmlReturn == 0 else None for v in values)

    def compute_processes(self) -> list[tuple[int, Optional[float]]]:
        """(pid, used MB) of every compute process; used is None where the driver withholds it."""
        procs = _optional(lambda: self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)) or []
        return [(p.pid, None if p.usedGpuMemory is None else p.usedGpuMemory / MB) for p in procs]

    def process_sm_utilization(self, since_us: int) -> list[tuple[int, int, float]]:
        """(pid, timestamp µs, SM %) samples newer than ``since_us``; empty when none or unsupported.

        NVML answers NOT_FOUND when no sample is newer than ``since_us``; that is an empty list.
        """
        samples = _optional(lambda: self.nvml.nvmlDeviceGetProcessUtilization(self.handle, since_us)) or []
        return [(s.pid, int(s.timeStamp), float(s.smUtil)) for s in samples]

    def sample(self, last_seen_us: Optional[int]) -> tuple[GpuSample, Optional[int]]:
        """One reading of everything; returns the newest per-process timestamp seen, for the next call.

        The driver stamps per-process samples in a time base of its own. Until one has been seen
        (``last_seen_us`` None) the driver is asked for everything it holds, only to learn the
        newest stamp: those samples may be old and are not recorded; every later one is newer.
        """
        n, h = self.nvml, self.handle
        t = self.clock()
        util = _optional(lambda: n.nvmlDeviceGetUtilizationRates(h))
        power_mw = _optional(lambda: n.nvmlDeviceGetPowerUsage(h))
        instant_w, average_w = self.power_fields_w()
        sample = GpuSample(
            t=t, energy_mj=self.energy_mj(), power_w=power_mw / 1000 if power_mw is not None else None,
            power_instant_w=instant_w, power_avg_w=average_w,
            util_pct=float(util.gpu) if util is not None else None, mem_used_mb=self.memory_used_mb(),
            temp_c=_optional(lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))),
            sm_clock_mhz=_optional(lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))))
        sample.proc_mem_mb = dict(self.compute_processes())
        if last_seen_us is None:
            stamps = [stamp for _, stamp, _ in self.process_sm_utilization(0)]
            return sample, max(stamps) if stamps else None
        newest = last_seen_us
        for pid, stamp, sm in self.process_sm_utilization(last_seen_us):
            sample.proc_sm_pct[pid] = sample.proc_sm_pct.get(pid, 0.0) + sm
            newest = max(newest, stamp)
        return sample, newest

    def _next_counter_update(self, limit_s: float = 0.5, poll_s: float = 0.002) -> tuple[float, Optional[float]]:
        """The time and value of the counter's next change (it advances in steps, not continuously)."""
        first = self.energy_mj()
        deadline = self.clock() + limit_s
        while self.clock() < deadline:
            value = self.energy_mj()
            if value != first:
                return self.clock(), value
            self.sleep(poll_s)
        return self.clock(), self.energy_mj()

    def idle_power_w(self, seconds: float = 3.0) -> Optional[float]:
        """Mean power over about ``seconds`` from the energy counter, with nothing of ours running.

        Both ends of the window sit on an update of the counter, so its update period (tens of
        ms) does not enter as an error of up to one period over a few seconds.
        """
        t0, start = self._next_counter_update()
        self.sleep(seconds)
        t1, end = self._next_counter_update()
        if start is None or end is None or end < start or t1 <= t0:
            return None
        return (end - start) / 1000 / (t1 - t0)


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

    def register(self, pgid: int, role: str, tag: Optional[str] = None) -> None:
        with self._lock:
            self._groups[pgid] = role
            if tag:
                self._tags[tag] = role

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

    def start(self) -> "Sampler":
        self.take()
        self._thread = threading.Thread(target=self._run, name="gpu-pairs-nvml", daemon=True)
        self._thread.start()
        return self

    def take(self) -> GpuSample:
        sample, self._last_seen_us = self.gpu.sample(self._last_seen_us)
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
