"""The processes of one data-parallel job: a process per rank for a built-in, torchrun for a
command workload, each a supervised job (a session of its own, in the jobs registry, killed as
a tree on every way out).

A built-in rank runs ``pytest_gpu_pairs.workloads.data_parallel`` with torchrun's variables set
here (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` on the loopback);
a command workload is started by ``torchrun --standalone --nproc-per-node N`` as its users start
it, each rank through ``workloads.rank_output`` for a progress file and a log of its own, and is
stopped by the harness once every rank has reported the warm-up and measured steps. The ranks wait
for each other in every all-reduce, so one that fails would leave the others waiting for ever:
they are stopped ``PEER_EXIT_GRACE_S`` after it. NVLink multicast stays off in every rank
(``NCCL_ENV``): the machines this runs on do not offer it to jobs.
"""
from __future__ import annotations

import dataclasses
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.experiment.cases import JobConfig, ScalingPlan
from pytest_gpu_pairs.protocol import Progress, now
from pytest_gpu_pairs.record.measurement import JobOutcome
from pytest_gpu_pairs.run.joblog import detect_oom
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec, build_spec
from pytest_gpu_pairs.run.logprogress import LogFollower, LogProgress
from pytest_gpu_pairs.run.proctree import deferred_signals

NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
RANK_MODULE = "pytest_gpu_pairs.workloads.data_parallel"
RANK_OUTPUT_MODULE = "pytest_gpu_pairs.workloads.rank_output"
PEER_EXIT_GRACE_S = 15.0
TICK_S = 0.2
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on the loopback now, for rank 0's rendezvous store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def rank_variables(rank: int, world: int, port: int) -> dict[str, str]:
    """torchrun's variables for one rank of a single-host job."""
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world),
            "MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port)}


@dataclass(frozen=True)
class RankSetup:
    """What the ranks of one job share: the job, its steps (already scaled), where and how long it
    may train, the harness's extra environment, and each rank's CPUs (None: not pinned)."""

    job: JobConfig
    plan: ScalingPlan
    device: str
    scale: float
    timeout_s: float
    env: dict[str, str]
    cpus: tuple[Optional[frozenset[int]], ...] = ()

    @property
    def world(self) -> int:
        return self.plan.gpus

    def rank_cpus(self, rank: int) -> Optional[frozenset[int]]:
        return self.cpus[rank] if rank < len(self.cpus) else None

    @property
    def bounded_steps(self) -> int:
        """Steps after which a command workload has given all the case measures."""
        return self.plan.warmup_steps + self.plan.steps


def builtin_rank_spec(setup: RankSetup, rank: int, port: int) -> JobSpec:
    """The command line of one built-in rank: the workload's own arguments, plus the step counts."""
    env = {**setup.env, **NCCL_ENV, **rank_variables(rank, setup.world, port)}
    spec = build_spec(setup.job, f"rank{rank}", setup.device, setup.scale, setup.timeout_s, env, setup.rank_cpus(rank))
    plan = setup.plan
    argv = [sys.executable, "-m", RANK_MODULE, *spec.argv[3:], "--warmup-steps", str(plan.warmup_steps),
            "--steps", str(plan.steps), "--comm-probe-steps", str(plan.comm_probe_steps),
            "--val-samples", str(plan.val_samples)]
    return dataclasses.replace(spec, argv=argv)


def launcher_spec(setup: RankSetup, out_dir: Path) -> JobSpec:
    """torchrun starting a command workload's ranks, each through ``rank_output``."""
    spec = build_spec(setup.job, "ranks", setup.device, setup.scale, setup.timeout_s, {**setup.env, **NCCL_ENV})
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(setup.world), "-m", RANK_OUTPUT_MODULE, str(out_dir.resolve()), "--", *spec.argv]
    return dataclasses.replace(spec, argv=argv, progress_pattern=None)


def rank_files(out_dir: Path, rank: int) -> tuple[Path, Path]:
    """(progress file, log) of a command workload's rank, as ``workloads.rank_output`` names them."""
    return out_dir / f"rank{rank}.progress.jsonl", out_dir / f"rank{rank}.log"


class DataParallelJob:
    """All the ranks of one job, started together and ended together."""

    def __init__(self, setup: RankSetup, out_dir: str | Path):
        self.setup, self.out_dir = setup, Path(out_dir)
        self.processes: list[JobProcess] = []
        self.followers: list[Optional[LogFollower]] = []
        self.stopped_because: Optional[str] = None
        self.start_t = self.end_t = 0.0

    @property
    def is_builtin(self) -> bool:
        return self.setup.job.is_builtin

    def start(self) -> DataParallelJob:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.start_t = now()
        if self.is_builtin:
            port = free_port()
            for rank in range(self.setup.world):
                spec = builtin_rank_spec(self.setup, rank, port)
                self.processes.append(JobProcess(spec, self.out_dir / f"rank{rank}.log",
                                                 self.out_dir / f"rank{rank}.progress.jsonl").start())
            return self
        for rank in range(self.setup.world):
            rank_files(self.out_dir, rank)[0].unlink(missing_ok=True)
        self.followers = [self._follower(rank) for rank in range(self.setup.world)]
        spec = launcher_spec(self.setup, self.out_dir)
        self.processes.append(JobProcess(spec, self.out_dir / "launcher.log",
                                         self.out_dir / "launcher.progress.jsonl").start())
        return self

    def _follower(self, rank: int) -> Optional[LogFollower]:
        """A rank of a command workload that prints its progress is read from its own log, live."""
        command = self.setup.job.command
        if command is None or command.progress_regex is None:
            return None
        log = rank_files(self.out_dir, rank)[1]
        log.touch()
        return LogFollower(str(log), LogProgress(command.progress_regex, command.ready_pattern)).start()

    def roles(self) -> list[tuple[int, str, str]]:
        """(process group, role, job tag) of each started process, for the GPU monitors."""
        return [(p.pid, p.spec.role, p.tag) for p in self.processes if p.pid is not None]

    def wait(self, on_tick: Optional[Callable[[], None]] = None) -> None:
        """Until every rank has ended; the timeout, a failed rank, or (a command workload) enough
        steps on every rank end the others."""
        deadline = self.start_t + self.setup.timeout_s
        failed_t: Optional[float] = None
        while any(p.poll() is None and p.popen is not None for p in self.processes):
            moment = now()
            if moment >= deadline:
                self._end_all(f"the case's timeout of {self.setup.timeout_s:g} s passed", timed_out=True)
                break
            failed_t = failed_t or self._first_failure_t(moment)
            if failed_t is not None and moment - failed_t >= PEER_EXIT_GRACE_S:
                self._end_all("another rank failed; the others would wait for it in their next all-reduce")
                break
            if not self.is_builtin and self._enough_steps():
                self._end_all(None)
                break
            if on_tick is not None:
                on_tick()
            time.sleep(TICK_S)
        self.close()

    def _first_failure_t(self, now: float) -> Optional[float]:
        return now if any(p.poll() not in (None, 0) or p.start_error for p in self.processes) else None

    def _enough_steps(self) -> bool:
        return all(p.total_steps >= self.setup.bounded_steps for p in self.rank_progress())

    def _end_all(self, reason: Optional[str], timed_out: bool = False) -> None:
        if reason is not None and self.stopped_because is None:
            self.stopped_because = reason
        with deferred_signals():
            for process in self.processes:
                if timed_out and process.poll() is None:
                    process.timed_out = True
                process.stop()

    def close(self) -> None:
        """Every process tree ended (a no-op for those already gone), every log follower stopped."""
        with deferred_signals():
            for process in self.processes:
                process.kill_tree()
            for follower in self.followers:
                if follower is not None:
                    follower.stop()
        self.end_t = self.end_t or now()

    def rank_progress(self) -> list[Progress]:
        """What each rank reported: its protocol file, else what its log said."""
        if self.is_builtin:
            return [p.progress() for p in self.processes]
        found = []
        for rank in range(self.setup.world):
            path = rank_files(self.out_dir, rank)[0]
            follower = self.followers[rank] if rank < len(self.followers) else None
            found.append(follower.progress() if follower is not None and not path.exists() else Progress.read(path))
        return found

    def outcomes(self) -> list[JobOutcome]:
        """How each rank ended; a command workload's ranks share torchrun's exit and times, and
        each has its own progress, log and out-of-memory verdict."""
        if self.is_builtin:
            return [p.outcome() for p in self.processes]
        launcher = self.processes[0].outcome()
        ranks = []
        for rank, progress in enumerate(self.rank_progress()):
            path, log = rank_files(self.out_dir, rank)
            oom = detect_oom(str(log), progress, launcher.returncode, launcher.timed_out or launcher.stopped_by_harness)
            ranks.append(dataclasses.replace(launcher, role=f"rank{rank}", log_path=str(log), progress_path=str(path),
                                             progress=progress, oom=oom is not None, oom_message=oom))
        return ranks
