"""The host's CPUs as the kernel describes them, and the calls that pin a process to some of them:
readings and system calls, no policy (which job gets which CPUs is ``run.cpus``).

The kernel's topology files are read tolerantly: a CPU whose siblings cannot be read is a core
of its own.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Optional

SYS_CPU = Path("/sys/devices/system/cpu")
_RANGE = re.compile(r"^\s*(\d{1,5})(?:\s*-\s*(\d{1,5}))?\s*$")


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on; empty where the platform does not say (no pinning there)."""
    getter = getattr(os, "sched_getaffinity", None)
    return frozenset(getter(0)) if getter is not None else frozenset()


def parse_cpu_list(text: str) -> frozenset[int]:
    """A kernel CPU list (``0-3,8,10-11``); an unreadable part is left out."""
    cpus: set[int] = set()
    for part in text.split(","):
        match = _RANGE.match(part)
        if match:
            low = int(match.group(1))
            high = int(match.group(2)) if match.group(2) else low
            cpus.update(range(low, high + 1) if high >= low else ())
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's own list format, so a record reads like ``taskset -c`` takes it."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = previous = None
    for cpu in ordered + [None]:
        if cpu is not None and previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(parts)


def thread_siblings(cpu: int) -> frozenset[int]:
    try:
        text = (SYS_CPU / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text()
    except OSError:
        return frozenset({cpu})
    return parse_cpu_list(text) | {cpu}


def physical_cores(cpus: Iterable[int],
                   siblings: Optional[Callable[[int], frozenset[int]]] = None) -> list[tuple[int, ...]]:
    """The usable CPUs grouped by physical core (hyperthreads together), in CPU order."""
    siblings = siblings or thread_siblings
    usable = set(cpus)
    cores: list[tuple[int, ...]] = []
    seen: set[int] = set()
    for cpu in sorted(usable):
        if cpu in seen:
            continue
        core = tuple(sorted((siblings(cpu) & usable) | {cpu}))
        seen.update(core)
        cores.append(core)
    return cores


def pin_thread(tid: int, cpus: frozenset[int]) -> bool:
    """Pin one thread (Linux's affinity is per thread); False where it is gone or the call fails."""
    setter = getattr(os, "sched_setaffinity", None)
    if setter is None:
        return False
    try:
        setter(tid, cpus)
    except OSError:  # gone, or not ours to pin
        return False
    return True


def pin_process(pid: int, cpus: frozenset[int]) -> int:
    """Every thread of a process pinned; how many were."""
    try:
        tids = [int(name) for name in os.listdir(f"/proc/{pid}/task") if name.isdigit()]
    except OSError:
        tids = [pid]
    return sum(pin_thread(tid, cpus) for tid in tids)
