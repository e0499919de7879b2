"""NVML access for one GPU: readings with NVML's errors translated, and no sampling policy."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

MB = 1024 * 1024
POWER_FIELDS = ("NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE")
# NVML_GPM_METRIC_SM_UTIL, _SM_OCCUPANCY, _ANY_TENSOR_UTIL, _FP32_UTIL, _FP16_UTIL, _DRAM_BW_UTIL: the SMs a job
# holds, how full it keeps them with warps, and which of their units and how much bandwidth it uses
GPM_METRICS = {"gpm_sm_util_pct": 2, "gpm_sm_occupancy_pct": 3, "gpm_tensor_util_pct": 5, "gpm_fp32_util_pct": 12,
               "gpm_fp16_util_pct": 13, "gpm_dram_bw_pct": 10}



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


def optional(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:
        return None


def gpu_count(nvml=None) -> int:
    """How many GPUs NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES)."""
    nvml = nvml or _load_nvml()
    try:
        return int(nvml.nvmlDeviceGetCount())
    except Exception as exc:
        raise NvmlUnavailable(f"NVML could not count devices: {exc}") from None


def open_gpu(spec: str, nvml=None, clock: Callable[[], float] = time.time) -> Gpu:
    """A GPU named as CUDA_VISIBLE_DEVICES and ``--gpu-pairs-gpus`` name them: a UUID (``GPU-...``),
    a unique prefix of one (CUDA accepts those), or an NVML index; ``clock`` as ``Gpu`` takes it."""
    spec = spec.strip()
    if spec.isdigit():
        return Gpu(int(spec), nvml, clock)
    try:
        return Gpu(nvml=nvml, clock=clock, uuid=spec)
    except NvmlUnavailable:
        full = _uuid_with_prefix(spec, nvml or _load_nvml())
        if full is None:
            raise
        return Gpu(nvml=nvml, clock=clock, uuid=full)


def _uuid_with_prefix(prefix: str, nvml) -> Optional[str]:
    matches = []
    for index in range(gpu_count(nvml)):
        uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index))
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        if uuid.startswith(prefix):
            matches.append(uuid)
    return matches[0] if len(matches) == 1 else None


def visible_gpu() -> Optional[str]:
    """The GPU a job's CUDA device 0 is, as CUDA_VISIBLE_DEVICES names it (its first entry), or
    None where the variable names none: the monitors must read the card the jobs train on."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return first if first and first != "-1" else None


class Gpu:
    """An opened NVML device; ``nvml`` is the pynvml module or a fake with the same functions.

    ``clock`` and ``sleep`` are the clock samples are stamped with and the way to wait: the harness
    passes its own (monotonic, so a wall clock stepped mid-case moves no sample out of its phase),
    tests a scripted one.
    """

    def __init__(self, index: int = 0, nvml=None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, uuid: Optional[str] = None):
        """``uuid`` opens the GPU of that UUID (as CUDA_VISIBLE_DEVICES may name it), else ``index``
        in NVML's order (PCI bus order, which CUDA_VISIBLE_DEVICES does not change)."""
        self.nvml = nvml or _load_nvml()
        self.clock, self.sleep = clock, sleep
        if uuid is not None:
            try:
                self.handle = self.nvml.nvmlDeviceGetHandleByUUID(uuid)
                index = int(self.nvml.nvmlDeviceGetIndex(self.handle))
            except Exception as exc:
                raise NvmlUnavailable(f"NVML has no GPU {uuid}: {exc}") from None
        else:
            count = gpu_count(self.nvml)
            if count <= index:
                raise NvmlUnavailable(f"NVML reports {count} GPU(s); device {index} does not exist")
            self.handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        self.info = self._read_info(index)
        self._energy_ok = self.energy_mj() is not None
        self._power_fields = tuple(getattr(self.nvml, name, None) for name in POWER_FIELDS)
        self._power_fields_ok = None not in self._power_fields

    def _read_info(self, index: int) -> DeviceInfo:
        n, h = self.nvml, self.handle
        cuda = optional(n.nvmlSystemGetCudaDriverVersion)
        limit = optional(lambda: n.nvmlDeviceGetEnforcedPowerLimit(h))
        return DeviceInfo(index, _text(n.nvmlDeviceGetName(h)), _text(optional(lambda: n.nvmlDeviceGetUUID(h)) or ""),
                          _text(optional(n.nvmlSystemGetDriverVersion) or "unknown"),
                          f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else "unknown",
                          n.nvmlDeviceGetMemoryInfo(h).total / MB, limit / 1000 if limit else None)

    @property
    def has_energy_counter(self) -> bool:
        return self._energy_ok

    def energy_mj(self) -> Optional[float]:
        return optional(lambda: float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)))

    def memory_used_mb(self) -> Optional[float]:
        mem = optional(lambda: self.nvml.nvmlDeviceGetMemoryInfo(self.handle))
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
        average, instant = (v.value.uiVal / 1000.0 if v.nvmlReturn == 0 else None for v in values)
        return average, instant

    def compute_processes(self) -> list[tuple[int, Optional[float]]]:
        """(pid, used MB) of every compute process; used is None where the driver withholds it."""
        procs = optional(lambda: self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)) or []
        return [(p.pid, None if p.usedGpuMemory is None else p.usedGpuMemory / MB) for p in procs]

    def process_sm_utilization(self, since_us: int) -> list[tuple[int, int, float]]:
        """(pid, timestamp µs, SM %) samples newer than ``since_us``; empty when none or unsupported.

        NVML answers NOT_FOUND when no sample is newer than ``since_us``; that is an empty list.
        """
        samples = optional(lambda: self.nvml.nvmlDeviceGetProcessUtilization(self.handle, since_us)) or []
        return [(s.pid, int(s.timeStamp), float(s.smUtil)) for s in samples]

    def clock_event_reasons(self) -> Optional[int]:
        """Why the clocks are below their maximum now (NVML's bit mask; 0: nothing holds them down).
        Drivers before R535 call it the throttle reasons."""
        n, h = self.nvml, self.handle
        read = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            n, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        return optional(lambda: int(read(h))) if read is not None else None

    def performance_state(self) -> Optional[int]:
        """The card's P-state now (0 the fastest); None where NVML does not know it (its 32)."""
        state = optional(lambda: int(self.nvml.nvmlDeviceGetPerformanceState(self.handle)))
        return state if state is not None and 0 <= state <= 15 else None

    def gpm_unsupported(self) -> Optional[str]:
        """Why GPM (GPU performance metrics: the share of SMs busy, of DRAM bandwidth used) cannot be
        read here; None where it can. NVML serves it on Hopper and newer cards only."""
        query = getattr(self.nvml, "nvmlGpmQueryDeviceSupport", None)
        if query is None:
            return "this nvidia-ml-py has no GPM functions"
        try:
            supported = bool(query(self.handle).isSupportedDevice)
        except Exception as exc:
            return f"NVML could not say whether this GPU serves GPM: {exc}"
        return None if supported else f"{self.info.name} does not serve GPM (Hopper and newer do)"

    def gpm_sample(self) -> Any:
        """A GPM sample taken now, to free with ``gpm_free``; ``NvmlUnavailable`` where NVML refuses."""
        sample = self.nvml.nvmlGpmSampleAlloc()
        try:
            self.nvml.nvmlGpmSampleGet(self.handle, sample)
        except Exception as exc:
            self.gpm_free(sample)
            raise NvmlUnavailable(f"NVML took no GPM sample: {exc}") from None
        return sample

    def gpm_free(self, sample: Any) -> None:
        with contextlib.suppress(Exception):
            self.nvml.nvmlGpmSampleFree(sample)

    def gpm_metrics(self, first: Any, second: Any) -> dict[str, float]:
        """``GPM_METRICS`` between two samples, in percent; a metric NVML refuses is left out."""
        n = self.nvml
        request = n.c_nvmlGpmMetricsGet_t()
        request.version, request.numMetrics = n.NVML_GPM_METRICS_GET_VERSION, len(GPM_METRICS)
        request.sample1, request.sample2 = first, second
        for index, metric in enumerate(GPM_METRICS.values()):
            request.metrics[index].metricId = metric
        try:
            n.nvmlGpmMetricsGet(request)
        except Exception:
            return {}
        return {key: float(request.metrics[i].value) for i, key in enumerate(GPM_METRICS)
                if request.metrics[i].nvmlReturn == 0}

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
