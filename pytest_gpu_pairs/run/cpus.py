"""Which CPUs each job may run on: the pinning policy of a session and its workers.

A host-bound training loop runs as fast as the CPU it lands on. Pinning each job to CPUs of its
own (whole cores, never shared with the other job, the harness or another xdist worker's jobs) keeps
the jobs from competing for a core and brings a job continued at a phase switch back to the same
CPUs. Measured on an H100 machine: pinned jobs stepped 6-17 % faster than unpinned ones; the
per-round noise of interleaved ratios stayed the same. The CPUs themselves are read, and
processes pinned, by ``devices.cpus``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from pytest_gpu_pairs.devices.cpus import format_cpu_list

ROLES = ("fg", "bg")
BUILTIN_JOB_CPUS = 2  # a built-in's training loop: its Python thread and autograd's device thread


@dataclass(frozen=True)
class CpuPlan:
    """Each job's cores and the harness's; ``reason`` says why there is no pinning when ``jobs`` is empty."""

    jobs: dict[str, tuple[tuple[int, ...], ...]]
    harness: frozenset[int] = frozenset()
    reason: Optional[str] = None
    narrow_loops: bool = True  # False where the user sized the shares (N CPUs per job): each job gets them all
    cores: tuple[tuple[int, ...], ...] = ()  # every core the plan split (the harness's first)
    per_job: Optional[int] = None  # the CPUs per job asked for (None: the cores split evenly)

    def for_roles(self, roles: Sequence[str]) -> CpuPlan:
        """The same cores split between ``roles``: a group of more jobs than the session's plan
        names gets a core for each, and never shares one with another job or the harness."""
        if tuple(self.jobs) == tuple(roles) or not self.cores:
            return self
        return plan_job_cpus(self.cores, self.per_job, roles)

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

    def spare_for(self, role: str, index: int) -> Optional[frozenset[int]]:
        """The ``index``-th block (from 1) of ``BUILTIN_JOB_CPUS`` CPUs of ``role``'s cores beyond those its
        one-loop job runs on: where a job of a later start of the pair waits, so that its start-up
        competes with no measured job for a core. None where the share has no such block."""
        if not self.narrow_loops:
            return None
        own = self.for_job(role, True) or frozenset()
        spare = [cpu for core in self.jobs.get(role, ()) for cpu in core if cpu not in own]
        block = spare[(index - 1) * BUILTIN_JOB_CPUS:index * BUILTIN_JOB_CPUS]
        return frozenset(block) if index >= 1 and len(block) == BUILTIN_JOB_CPUS else None

    def described(self, one_loop: dict[str, bool]) -> Optional[dict[str, str]]:
        """The CPUs of the jobs a case ran (role -> whether it is one loop driving a GPU), as the record says them."""
        if not self.jobs:
            return None
        pinned = {role: format_cpu_list(cpus) for role, loop in one_loop.items()
                  if (cpus := self.for_job(role, loop)) is not None}
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
        return CpuPlan({}, cores=tuple(cores), per_job=per_job,
                       reason=f"{sum(map(len, cores))} CPU(s) in {len(cores)} core(s) here; pinning needs a core "
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
                   narrow_loops=per_job is None, cores=tuple(cores), per_job=per_job)
