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
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.devices.rapl import POWERCAP, counter_delta, package_domains
from pytest_gpu_pairs.monitor.counters import counter_energy_j

READ_PERIOD_S = 0.5


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

    def start(self) -> RaplSampler:
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
        joules = counter_energy_j(((t, j * 1000.0) for t, j in self.readings), start, end)
        if joules is None and self.unavailable_reason is None:
            self.unavailable_reason = "the RAPL readings do not cover the foreground window"
        return joules
