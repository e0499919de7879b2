"""A fake NVML for unit tests only: the pynvml functions the monitor calls, driven by a script.

The script is a timeline on a fake clock: power in piecewise-constant segments (so the true
energy of any window is known exactly), an energy counter that advances in steps like the real
one, and processes with a pid, a lifetime, NVML memory and SM utilisation, sampled by the
"driver" every ``util_period_s`` as ``nvmlDeviceGetProcessUtilization`` reports them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

MB = 1024 * 1024


class FakeNVMLError(Exception):
    def __init__(self, name: str):
        super().__init__(f"NVMLError_{name}")


class FakeClock:
    """Wall time in seconds that only moves when told to; ``sleep`` moves it."""

    def __init__(self, t: float = 1_700_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)

    advance = sleep


@dataclass
class FakeProcess:
    pid: int
    start: float
    end: float
    mem_mb: Optional[float]
    sm_pct: float

    def alive(self, t: float) -> bool:
        return self.start <= t < self.end


class FakeNvml:
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_FI_DEV_POWER_AVERAGE = 185
    NVML_FI_DEV_POWER_INSTANT = 186

    def __init__(self, clock: FakeClock, power: Sequence[tuple[float, float]] = ((0.0, 70.0),),
                 processes: Sequence[FakeProcess] = (), total_mb: float = 81559.0, reserved_mb: float = 500.0,
                 counter_period_s: float = 0.0, util_period_s: float = 0.1, energy_start_mj: float = 5e9,
                 fields_supported: bool = True, process_util_supported: bool = True, name: str = "Fake H100",
                 stamp_base: Optional[float] = None, count: int = 1, pstate_unknown: bool = False,
                 gpm_supported: bool = False, gpm_sample_fails: bool = False):
        """``power``: (from time, watts) segments, times relative to the clock's start; ``stamp_base``:
        the time (s) that per-process timestamps count from at the start (the wall clock by default)."""
        self.clock, self.t0 = clock, clock()
        self.power = sorted(power)
        self.processes = list(processes)
        self.total_mb, self.reserved_mb = total_mb, reserved_mb
        self.counter_period_s, self.util_period_s = counter_period_s, util_period_s
        self.energy_start_mj = energy_start_mj
        self.fields_supported, self.process_util_supported = fields_supported, process_util_supported
        self.name = name
        self.pstate_unknown = pstate_unknown
        self.stamp_base = self.t0 if stamp_base is None else stamp_base
        self.count = count  # GPUs seen; the script drives all of them alike, each with its own UUID
        self.gpm_supported, self.gpm_sample_fails = gpm_supported, gpm_sample_fails
        self.gpm_samples: list[SimpleNamespace] = []  # every GPM sample allocated, to check each is freed

    # --- the script ------------------------------------------------------------------

    def rel(self, t: Optional[float] = None) -> float:
        return (self.clock() if t is None else t) - self.t0

    def watts_at(self, rel_t: float) -> float:
        current = self.power[0][1]
        for start, watts in self.power:
            if rel_t >= start:
                current = watts
        return current

    def true_energy_j(self, rel_a: float, rel_b: float) -> float:
        """Exact energy between two relative times."""
        edges = sorted({rel_a, rel_b} | {s for s, _ in self.power if rel_a < s < rel_b})
        return sum(self.watts_at(a) * (b - a) for a, b in zip(edges, edges[1:]))

    def alive(self, rel_t: float) -> list[FakeProcess]:
        return [p for p in self.processes if p.alive(rel_t)]

    # --- pynvml's surface ------------------------------------------------------------

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for index in range(self.count):
            if self.nvmlDeviceGetUUID(("handle", index)) == uuid:
                return ("handle", index)
        raise FakeNVMLError("NotFound")

    def nvmlDeviceGetIndex(self, handle):
        return handle[1]

    def nvmlDeviceGetName(self, handle):
        return self.name

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-fake" if handle[1] == 0 else f"GPU-fake-{handle[1]}"

    def nvmlSystemGetDriverVersion(self):
        return "580.0-fake"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetMemoryInfo(self, handle):
        used = self.reserved_mb + sum(p.mem_mb or 0 for p in self.alive(self.rel()))
        return SimpleNamespace(total=self.total_mb * MB, used=used * MB, free=(self.total_mb - used) * MB)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        rel = self.rel()
        if self.counter_period_s:
            rel = math.floor(rel / self.counter_period_s) * self.counter_period_s
        return int(self.energy_start_mj + self.true_energy_j(0.0, rel) * 1000)

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts_at(self.rel()) * 1000)

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        if not self.fields_supported:
            raise FakeNVMLError("NotSupported")
        watts = self.watts_at(self.rel())
        return [SimpleNamespace(fieldId=f, nvmlReturn=0, value=SimpleNamespace(uiVal=int(watts * 1000)))
                for f in field_ids]

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=min(100, sum(p.sm_pct for p in self.alive(self.rel()))), memory=0)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 40

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetPerformanceState(self, handle):
        """P0 while any process computes, P8 when none does; 32 (unknown) where the script says so."""
        if self.pstate_unknown:
            return 32
        return 0 if any(p.sm_pct > 0 for p in self.alive(self.rel())) else 8

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return 5 if any(p.sm_pct > 0 for p in self.alive(self.rel())) else 1

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p.pid, usedGpuMemory=None if p.mem_mb is None else int(p.mem_mb * MB))
                for p in self.alive(self.rel())]

    def mean_sm_pct(self, rel_a: float, rel_b: float, steps: int = 1000) -> float:
        """The processes' SM load averaged over [rel_a, rel_b] (at most 100): what GPM's SM share reads."""
        width = (rel_b - rel_a) / steps
        loads = [min(100.0, sum(p.sm_pct for p in self.alive(rel_a + (i + 0.5) * width))) for i in range(steps)]
        return sum(loads) / steps if steps else 0.0

    NVML_GPM_METRICS_GET_VERSION = 1

    def nvmlGpmQueryDeviceSupport(self, handle):
        return SimpleNamespace(isSupportedDevice=int(self.gpm_supported))

    def nvmlGpmSampleAlloc(self):
        sample = SimpleNamespace(rel_t=None, freed=False)
        self.gpm_samples.append(sample)
        return sample

    def nvmlGpmSampleGet(self, handle, sample):
        if self.gpm_sample_fails:
            raise FakeNVMLError("NotSupported")
        sample.rel_t = self.rel()
        return sample

    def nvmlGpmSampleFree(self, sample):
        sample.freed = True

    def c_nvmlGpmMetricsGet_t(self):
        return SimpleNamespace(version=0, numMetrics=0, sample1=None, sample2=None,
                               metrics=[SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(16)])

    def nvmlGpmMetricsGet(self, request):
        """SM share: the processes' SM load between the samples; DRAM bandwidth and warp occupancy: half of
        it, FP32 a quarter (a script's choice); tensor and FP16 units never used; any other metric refused."""
        sm = self.mean_sm_pct(request.sample1.rel_t, request.sample2.rel_t)
        values = {2: sm, 3: sm / 2, 5: 0.0, 10: sm / 2, 12: sm / 4, 13: 0.0}
        for metric in request.metrics[:request.numMetrics]:
            metric.value = values.get(metric.metricId, 0.0)
            metric.nvmlReturn = 0 if metric.metricId in values else 3
        return request

    def nvmlDeviceGetProcessUtilization(self, handle, last_seen_us):
        """One sample per process that computed in the driver's latest sample period, if newer."""
        if not self.process_util_supported:
            raise FakeNVMLError("NotSupported")
        rel = self.rel()
        tick = math.floor(rel / self.util_period_s) * self.util_period_s
        stamp = int(round((self.stamp_base + tick) * 1e6))
        found = [SimpleNamespace(pid=p.pid, timeStamp=stamp, smUtil=p.sm_pct, memUtil=0, encUtil=0, decUtil=0)
                 for p in self.alive(tick) if p.sm_pct > 0 and stamp > last_seen_us]
        if not found:
            raise FakeNVMLError("NotFound")
        return found
