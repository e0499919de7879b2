"""The host's CPUs and which of them each job may run on.

A host-bound training loop runs as fast as the CPU it lands on. Pinning each job to CPUs of its
own (whole cores, never shared with the other job, the harness or another xdist worker's jobs) keeps
the jobs from competing for a core and brings a job continued at a phase switch back to the same
CPUs. Measured on an H100 machine: pinned jobs stepped 6-17 % faster than unpinned ones; the
per-round noise of interleaved ratios stayed the same.

The kernel's topology files are read tolerantly: a CPU whose siblings cannot be read is a core
of its own.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SYS_CPU = Path("/sys/devices/system/cpu")
ROLES = ("fg", "bg")
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


BUILTIN_JOB_CPUS = 2  # a built-in's training loop: its Python thread and autograd's device thread


@dataclass(frozen=True)
class CpuPlan:
    """Each job's cores and the harness's; ``reason`` says why there is no pinning when ``jobs`` is empty."""

    jobs: dict[str, tuple[tuple[int, ...], ...]]
    harness: frozenset[int] = frozenset()
    reason: Optional[str] = None
    narrow_loops: bool = True  # False where the user sized the shares (N CPUs per job): each job gets them all

    def for_job(self, role: str, one_loop: bool) -> Optional[frozenset[int]]:
        """A job gets all of its role's cores (room for data-loader workers, or for the threads of
        a job computing on the CPU); a job that is one training loop driving a GPU (``one_loop``: a
        built-in on a GPU) only the first ``BUILTIN_JOB_CPUS`` of them, so after every SIGCONT it
        comes back to the same one or two CPUs."""
        cores = self.jobs.get(role)
        if not cores:
            return None
        chosen: list[int] = []
        for core in cores:
            if one_loop and self.narrow_loops and len(chosen) >= BUILTIN_JOB_CPUS:
                break
            chosen.extend(core)
        return frozenset(chosen)

    def described(self, one_loop: dict[str, bool]) -> Optional[dict[str, str]]:
        """The CPUs of the jobs a case ran (role -> whether it is one loop driving a GPU), as the record says them."""
        if not self.jobs:
            return None
        pinned = {role: format_cpu_list(self.for_job(role, loop)) for role, loop in one_loop.items()}
        return {**pinned, "harness": format_cpu_list(self.harness)}


def unpinned(reason: str) -> CpuPlan:
    return CpuPlan({}, reason=reason)


def share_of_cores(cores: Sequence[tuple[int, ...]], index: int, count: int) -> list[tuple[int, ...]]:
    """The ``index``-th of ``count`` contiguous, near-equal blocks of cores: one per xdist worker, so
    workers on one host never pin their jobs to the same CPUs."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"share {index}/{count}: expected 0 <= index < count")
    size, extra = divmod(len(cores), count)
    start = index * size + min(index, extra)
    return list(cores[start:start + size + (1 if index < extra else 0)])


def plan_job_cpus(cores: Sequence[tuple[int, ...]], per_job: Optional[int] = None,
                  roles: Sequence[str] = ROLES) -> CpuPlan:
    """The first core for the harness (pytest, the monitors), then whole cores for each job:
    ``per_job`` logical CPUs each at least, or (``None``) the remaining cores split evenly, so a
    job with data-loader workers keeps room for them."""
    if len(cores) < 1 + len(roles):
        return unpinned(f"{sum(map(len, cores))} CPU(s) in {len(cores)} core(s) here; pinning needs a core "
                        f"for the harness and one for each of {len(roles)} jobs")
    harness, rest = cores[0], list(cores[1:])
    if per_job is None:
        each = len(rest) // len(roles)
        blocks = [rest[i * each:(i + 1) * each] for i in range(len(roles))]
    else:
        blocks = []
        for _ in roles:
            block: list[tuple[int, ...]] = []
            while rest and sum(map(len, block)) < per_job:
                block.append(rest.pop(0))
            if sum(map(len, block)) < per_job:
                return unpinned(f"{per_job} CPU(s) per job asked for and {sum(map(len, cores))} here "
                                "(one core stays with the harness)")
            blocks.append(block)
    return CpuPlan({role: tuple(block) for role, block in zip(roles, blocks)}, frozenset(harness),
                   narrow_loops=per_job is None)


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
