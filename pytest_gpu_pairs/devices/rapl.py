"""RAPL access: the CPU packages' energy counters under ``/sys/class/powercap``."""
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
