"""What the monitors record, and how it is saved beside each case."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

DEVICE_COLUMNS = ("t", "energy_mj", "power_w", "power_instant_w", "power_avg_w", "util_pct", "mem_used_mb",
                  "temp_c", "sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "clock_event_reasons", "pstate",
                  "pcie_gen")
JOB_ROLES = ("fg", "bg")


@dataclass
class GpuSample:
    """One reading of the device and of every compute process on it, at wall time ``t``.

    ``power_w`` is ``nvmlDeviceGetPowerUsage``; ``power_instant_w`` and ``power_avg_w`` are the
    POWER_INSTANT and POWER_AVERAGE fields. All three are polled and kept for plots and for the
    comparison with the energy counter; no energy figure is computed from them.
    """

    t: float
    energy_mj: Optional[float] = None
    power_w: Optional[float] = None
    power_instant_w: Optional[float] = None
    power_avg_w: Optional[float] = None
    util_pct: Optional[float] = None
    mem_used_mb: Optional[float] = None
    temp_c: Optional[float] = None
    sm_clock_mhz: Optional[float] = None
    mem_clock_mhz: Optional[float] = None
    power_limit_w: Optional[float] = None
    clock_event_reasons: Optional[int] = None  # NVML's bit mask of why clocks are held down (throttling)
    pstate: Optional[int] = None  # the card's performance state: 0 the fastest, 15 the slowest
    pcie_gen: Optional[int] = None  # the PCIe link's current generation: an idle link may drop to a slower one
    proc_mem_mb: dict[int, Optional[float]] = field(default_factory=dict)
    proc_sm_pct: dict[int, float] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)

    def pids_with(self, roles: tuple[str, ...]) -> list[int]:
        pids = set(self.proc_mem_mb) | set(self.proc_sm_pct)
        return sorted(pid for pid in pids if self.roles.get(pid, "other") in roles)

    def role_memory_mb(self, roles: tuple[str, ...]) -> Optional[float]:
        """Summed NVML memory of this sample's processes with one of ``roles``; None if unreported."""
        values = [self.proc_mem_mb[pid] for pid in self.pids_with(roles) if pid in self.proc_mem_mb]
        known = [v for v in values if v is not None]
        return float(sum(known)) if len(known) == len(values) else None

    def role_sm_pct(self, role: str) -> float:
        return float(sum(v for pid, v in self.proc_sm_pct.items() if self.roles.get(pid, "other") == role))

    @property
    def has_sm_data(self) -> bool:
        return bool(self.proc_sm_pct)


CLOCK_EVENT_REASONS = {  # NVML's nvmlClocksEventReason bits, as a sample holds them, named as a reader of a record needs them
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def clock_event_names(mask: Optional[int]) -> Optional[list[str]]:
    """The names of the bits set in a clock-event mask; None when the mask was not readable."""
    if mask is None:
        return None
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + ([f"other_0x{unknown:x}"] if unknown else [])
