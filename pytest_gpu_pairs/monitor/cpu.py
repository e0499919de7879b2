"""CPU package energy from RAPL (``/sys/class/powercap``), with its counter's wrap-around.

A package counter wraps after ``max_energy_range_uj`` (about 262 kJ: minutes at package power),
so one reading at each end of a case is not enough: a thread reads every ``period_s`` and
unwraps each interval, which stays exact as long as no interval spans a whole range (at 0.5 s
that would take over 500 kW). Where RAPL is missing or unreadable (no root on recent kernels,
no RAPL in a VM) the figure is unavailable and the reason says so; nothing is guessed from a TDP.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .. import metrics

POWERCAP = Path("/sys/class/powercap")
READ_PERIOD_S = 0.5


@dataclass(frozen=True)
class RaplDomain:
    name: str
    energy_path: Path
    max_range_uj: int


def counter_delta(start: int, end: int, max_range: int) -> int:
    """Energy between two readings of a counter that wraps to zero after ``max_range``."""
    return end - start if end >= start else end + max_range - start


def _is_package(zone: Path) -> bool:
    """Top-level package zones only: sub-zones (core, uncore, dram) are inside the package's
    figure, and ``psys`` (platform) would count the packages twice."""
    if zone.name.count(":") != 1:
        return False
    try:
        return (zone / "name").read_text().strip().startswith("package")
    except OSError:
        return True  # unreadable name: let the read below report why


def package_domains(root: Path = POWERCAP) -> tuple[list[RaplDomain], Optional[str]]:
    """Package domains (``intel-rapl:N`` named ``package-N``) that can be read, or the reason none can."""
    if not root.is_dir():
        return [], f"no RAPL interface ({root} does not exist)"
    domains, problems = [], []
    for zone in sorted(root.glob("intel-rapl:*")):
        if not _is_package(zone):
            continue
        try:
            name = (zone / "name").read_text().strip()
            max_range = int((zone / "max_energy_range_uj").read_text())
            int((zone / "energy_uj").read_text())
        except PermissionError:
            problems.append(f"{zone / 'energy_uj'} is not readable without root")
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"{zone}: {exc}")
            continue
        domains.append(RaplDomain(name, zone / "energy_uj", max_range))
    if not domains:
        return [], "; ".join(problems) or f"no RAPL package domain under {root}"
    return domains, None


class RaplSampler:
    """Reads every package counter each ``period_s`` in a thread and keeps (t, joules so far).

    ``energy_j(start, end)`` is the energy of a window inside the readings (interpolated at
    its ends); it is None with ``unavailable_reason`` where RAPL cannot be read.
    """

    def __init__(self, root: Path = POWERCAP, period_s: float = READ_PERIOD_S,
                 clock: Callable[[], float] = time.time):
        self.domains, self.unavailable_reason = package_domains(root)
        self.period_s, self.clock = period_s, clock
        self.readings: list[tuple[float, float]] = []
        self._last_raw: Optional[list[int]] = None
        self._total_uj = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def method(self) -> Optional[str]:
        return "rapl" if self.domains else None

    def read(self) -> None:
        """One reading of every domain, unwrapped against the previous one."""
        if not self.domains:
            return
        try:
            raw = [int(d.energy_path.read_text()) for d in self.domains]
        except (OSError, ValueError) as exc:
            self.unavailable_reason = f"RAPL stopped being readable: {exc}"
            return
        if self._last_raw is not None:
            self._total_uj += sum(counter_delta(a, b, d.max_range_uj)
                                  for a, b, d in zip(self._last_raw, raw, self.domains))
        self._last_raw = raw
        self.readings.append((self.clock(), self._total_uj / 1e6))

    def start(self) -> "RaplSampler":
        if self.domains:
            self.read()
            self._thread = threading.Thread(target=self._run, name="gpu-pairs-rapl", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.read()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.read()

    def energy_j(self, start: float, end: float) -> Optional[float]:
        if not self.domains:
            return None
        joules = metrics.counter_energy_j(((t, j * 1000.0) for t, j in self.readings), start, end)
        if joules is None and self.unavailable_reason is None:
            self.unavailable_reason = "the RAPL readings do not cover the foreground window"
        return joules
