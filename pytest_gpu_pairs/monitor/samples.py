"""What the monitors record, and how it is saved beside each case."""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

DEVICE_COLUMNS = ("t", "energy_mj", "power_w", "power_instant_w", "power_avg_w", "util_pct", "mem_used_mb",
                  "temp_c", "sm_clock_mhz")
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
    proc_mem_mb: dict[int, Optional[float]] = field(default_factory=dict)
    proc_sm_pct: dict[int, float] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)

    def pids_with(self, roles: tuple[str, ...]) -> list[int]:
        pids = set(self.proc_mem_mb) | set(self.proc_sm_pct)
        return sorted(pid for pid in pids if self.roles.get(pid, "other") in roles)

    def role_memory_mb(self, roles: tuple[str, ...]) -> Optional[float]:
        """Summed NVML memory of this sample's processes with one of ``roles``; None if unreported."""
        values = [self.proc_mem_mb[pid] for pid in self.pids_with(roles) if pid in self.proc_mem_mb]
        if any(v is None for v in values):
            return None
        return float(sum(values))

    def role_sm_pct(self, role: str) -> float:
        return float(sum(v for pid, v in self.proc_sm_pct.items() if self.roles.get(pid, "other") == role))

    @property
    def has_sm_data(self) -> bool:
        return bool(self.proc_sm_pct)


def write_atomic_csv(path: Path, header: tuple[str, ...], rows: Iterable) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    os.replace(tmp, path)


def save_samples(samples: list[GpuSample], out_dir: str | Path) -> list[Path]:
    """``gpu_samples.csv`` (device) and ``gpu_process_samples.csv`` (one row per process and sample)."""
    out_dir = Path(out_dir)
    device_path, process_path = out_dir / "gpu_samples.csv", out_dir / "gpu_process_samples.csv"
    write_atomic_csv(device_path, DEVICE_COLUMNS,
                     ([getattr(s, c) for c in DEVICE_COLUMNS] for s in samples))
    write_atomic_csv(process_path, ("t", "pid", "role", "mem_mb", "sm_pct"),
                     ((s.t, pid, s.roles.get(pid, "other"), s.proc_mem_mb.get(pid), s.proc_sm_pct.get(pid))
                      for s in samples for pid in sorted(set(s.proc_mem_mb) | set(s.proc_sm_pct))))
    return [device_path, process_path]


def save_cpu_readings(readings: list[tuple[float, float]], out_dir: str | Path) -> Path:
    """``cpu_energy.csv``: RAPL package energy, unwrapped and summed over packages, in joules."""
    path = Path(out_dir) / "cpu_energy.csv"
    write_atomic_csv(path, ("t", "energy_j"), readings)
    return path
