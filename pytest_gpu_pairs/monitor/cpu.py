"""CPU package energy from RAPL (``/sys/class/powercap``), with its counter's wrap-around.

Where RAPL is missing or unreadable (no root on most recent kernels, no Intel/AMD RAPL in a
VM) the figure is unavailable and the reason says so; nothing is guessed from a TDP.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class RaplDomain:
    name: str
    energy_path: Path
    max_range_uj: int


def counter_delta(start: int, end: int, max_range: int) -> int:
    """Energy between two readings of a counter that wraps to zero after ``max_range``."""
    return end - start if end >= start else end + max_range - start


def package_domains(root: Path = POWERCAP) -> tuple[list[RaplDomain], Optional[str]]:
    """Top-level package domains (``intel-rapl:N``) that can be read, or the reason none can."""
    if not root.is_dir():
        return [], f"no RAPL interface ({root} does not exist)"
    domains, problems = [], []
    for zone in sorted(root.glob("intel-rapl:*")):
        if zone.name.count(":") != 1:
            continue  # sub-zones (core, uncore, dram) are inside the package's figure
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


class RaplMeter:
    """Reads package energy at start and stop of a window; ``energy_j`` is None with a reason."""

    def __init__(self, root: Path = POWERCAP):
        self.domains, self.unavailable_reason = package_domains(root)
        self._start: dict[str, int] = {}
        self.energy_j: Optional[float] = None

    def _read(self) -> dict[str, int]:
        return {d.name + str(d.energy_path): int(d.energy_path.read_text()) for d in self.domains}

    def start(self) -> None:
        if self.domains:
            self._start = self._read()

    def stop(self) -> Optional[float]:
        if not self.domains or not self._start:
            return None
        end = self._read()
        total = sum(counter_delta(self._start[key], end[key], d.max_range_uj)
                    for key, d in zip(end, self.domains))
        self.energy_j = total / 1e6
        return self.energy_j

    @property
    def method(self) -> Optional[str]:
        return "rapl" if self.domains else None
