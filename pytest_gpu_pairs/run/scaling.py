"""The scaling method's part of the case wrapper: the case's GPUs (each made smaller by a ballast under
``--gpu-pairs-gpu-memory-mb``), an NVML monitor on each, the job's ranks, then one record,
whatever happens.

Rank ``r`` trains on the ``r``-th GPU this session may use: the one ``--gpu-pairs-gpus`` (or an
xdist worker) pins, else those ``CUDA_VISIBLE_DEVICES`` names, else every GPU NVML sees. A case
that needs more is skipped with the count it found. On the CPU the ranks are processes on the
host's cores (gloo), each with one intra-op thread, so that a rank stands for one device whatever
the count (OpenMP threads that share a busy core wait on each other many times over), and every GPU
figure is null with the reason.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.devices.cpus import format_cpu_list
from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable, gpu_count, open_gpu
from pytest_gpu_pairs.experiment.cases import Case
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.scaling import GpuTrace, ScalingMeasurement
from pytest_gpu_pairs.record.store import atomic_write_csv, save_samples
from pytest_gpu_pairs.run import ballast
from pytest_gpu_pairs.run.ballast import Ballast, BallastError
from pytest_gpu_pairs.run.case import CaseRun
from pytest_gpu_pairs.run.cpus import BUILTIN_JOB_CPUS, CpuPlan, share_of_cores
from pytest_gpu_pairs.run.dataparallel import DataParallelJob, RankSetup
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.proctree import deferred_signals


def gpu_names() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them: those it names, else every
    GPU NVML sees, by index; ``NvmlUnavailable`` where NVML cannot count them."""
    named = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return named or [str(index) for index in range(gpu_count())]


def usable_gpus(env: Environment) -> list[Gpu]:
    """The GPUs this session's scaling cases may use, in rank order."""
    if env.gpu is None or env.device != "cuda":
        return []
    if env.extra_env.get("CUDA_VISIBLE_DEVICES"):
        return [env.gpu]
    try:
        return [open_gpu(name, clock=now) for name in gpu_names()]
    except NvmlUnavailable:
        return [env.gpu]


def visible_devices(gpus: list[Gpu]) -> str:
    """CUDA_VISIBLE_DEVICES for the ranks: rank ``r``'s ``cuda:r`` is the ``r``-th of ``gpus``."""
    return ",".join(gpu.info.uuid or str(gpu.info.index) for gpu in gpus)


def rank_cpus(plan: CpuPlan, ranks: int, one_loop: bool) -> tuple[Optional[frozenset[int]], ...]:
    """Each rank's CPUs: the jobs' cores of the session's plan (the harness keeps its own) split
    into one block per rank, a rank driving a GPU narrowed as a job is; unpinned when there are
    fewer cores than ranks."""
    cores = [core for role in ("fg", "bg") for core in plan.jobs.get(role, ())]
    if len(cores) < ranks:
        return (None,) * ranks
    chosen = []
    for rank in range(ranks):
        cpus: list[int] = []
        for core in share_of_cores(cores, rank, ranks):
            if one_loop and plan.narrow_loops and len(cpus) >= BUILTIN_JOB_CPUS:
                break
            cpus.extend(core)
        chosen.append(frozenset(cpus))
    return tuple(chosen)


CPU_RANK_THREADS = "1"  # a rank on the CPU: one intra-op thread, as torchrun sets for several ranks


class ScalingRanks:
    """The scaling method's part of the case wrapper: one job's ranks on the case's GPUs."""

    def __init__(self, run: CaseRun, build: Callable[..., Record]):
        self.run, self.case, self.context, self.env = run, run.case, run.context, run.env
        self.build = build
        if self.case.scaling is None:
            raise ValueError(f"{self.case.id}: not a scaling case")
        self.plan = self.case.scaling.scaled(self.env.scale)
        self.job: Optional[DataParallelJob] = None
        self.gpus: list[Gpu] = []
        self.ballasts: list[Ballast] = []
        self.samplers: list[Sampler] = []

    def prepare(self) -> None:
        self.gpus = self._gpus_or_skip()

    def before_start(self) -> None:
        self.run.timeline["cool_down_s"] = self.context.device.cool_down(self.case.cool_down_s)

    def _gpus_or_skip(self) -> list[Gpu]:
        if self.env.device != "cuda":
            if self.context.device.card_mb is not None:
                pytest.skip(f"--gpu-pairs-gpu-memory-mb emulates a smaller GPU and needs one: {self.env.gpu_unavailable}")
            return []
        gpus = usable_gpus(self.env)
        if len(gpus) < self.plan.gpus:
            pytest.skip(f"{self.case.id} needs {self.plan.gpus} GPUs; this session may use {len(gpus)} "
                        "(run it without -n and --gpu-pairs-gpus, on a machine with enough GPUs)")
        return gpus[:self.plan.gpus]

    def measure(self) -> Record:
        gpus = self.gpus
        out = self.context.folder.case_dir(self.case)
        roles = PidRoles()
        self._start_ballasts(gpus, out, roles)
        self.samplers = [Sampler(gpu, self.env.sample_hz, roles).start() for gpu in gpus]
        self.job = DataParallelJob(self._setup(gpus), out).start()
        for pid, role, tag in self.job.roles():
            roles.register(pid, role, tag)
        benchmark = self.run.benchmark
        try:
            benchmark.pedantic(self.job.wait, rounds=1, iterations=1)
        except BaseException:
            benchmark.has_error = True  # as in the pair runner: a cut case has no timings to write
            raise
        measurement = self._measurement(gpus, out)
        self.close()
        self.context.device.release()
        self.run.timeline["rounds"] = [_round_times(self.job, measurement)]
        return self.build(self.case, measurement, self.env.device_name, self.env.scale, self._baseline())

    def _setup(self, gpus: list[Gpu]) -> RankSetup:
        env = dict(self.env.extra_env)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = visible_devices(gpus)
        elif "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = CPU_RANK_THREADS
        cpus = rank_cpus(self.env.cpus, self.plan.gpus, self.env.one_loop(True)) if self.case.fg.is_builtin else ()
        return RankSetup(self.case.fg, self.plan, self.env.device, self.env.scale, self.case.timeout_s, env, cpus)

    def _start_ballasts(self, gpus: list[Gpu], out: Path, roles: PidRoles) -> None:
        size = self.context.device.card_mb
        if size is None:
            return
        for rank, gpu in enumerate(gpus):
            card = Ballast(size, gpu, out / f"gpu{rank}", {**self.env.extra_env, "CUDA_VISIBLE_DEVICES": visible_devices([gpu])})
            self.ballasts.append(card)
            try:
                card.start()
            except BallastError as exc:
                self.run.close()
                pytest.fail(f"{self.case.id}: --gpu-pairs-gpu-memory-mb on GPU {gpu.info.index}: {exc}", pytrace=False)
            roles.register(card.pid, ballast.ROLE)

    def _measurement(self, gpus: list[Gpu], out: Path) -> ScalingMeasurement:
        for sampler in self.samplers:
            sampler.stop()
        traces = [GpuTrace(gpu.info.index, sampler.samples, *self._card(rank, gpu))
                  for rank, (gpu, sampler) in enumerate(zip(gpus, self.samplers))]
        for rank, trace in enumerate(traces):
            if trace.samples:
                save_samples(trace.samples, out / f"gpu{rank}")
        if self.job is None:
            raise RuntimeError(f"{self.case.id}: the data-parallel job never started")
        ranks = self.job.outcomes()
        results = [r.progress.result or {} for r in ranks]
        _save_step_times(out, results)
        backend = results[0].get("backend") if results and isinstance(results[0].get("backend"), str) else None
        return ScalingMeasurement(self.plan, backend, ranks, traces, self.env.gpu_unavailable, self.job.stopped_because,
                                  out, self.env.sample_hz, _per_gpu_batch(self.case, results))

    def _card(self, rank: int, gpu: Gpu) -> tuple[float, Optional[float]]:
        """(the card's memory as its rank saw it, what the ballast held of it)."""
        size = self.context.device.card_mb
        if size is None:
            return gpu.info.memory_total_mb, None
        held = self.ballasts[rank].held_mb if rank < len(self.ballasts) else None
        return size, held if held is not None else gpu.info.memory_total_mb - size

    def _baseline(self) -> Optional[Record]:
        """The record of this workload's one-GPU case in this session, if it ran and did not fail."""
        for result in reversed(self.context.results):
            record, case = result.record, result.case
            if (case is not None and case.scaling is not None and case.scaling.gpus == 1
                    and case.group == self.case.group and case.fg == self.case.fg and not record.failure):
                return record
        return None

    def _unpinned_reason(self) -> str:
        if not self.case.fg.is_builtin:
            return "torchrun starts a command workload's ranks"
        return self.env.cpus.reason or f"fewer of the jobs' cores than the {self.plan.gpus} ranks"

    def completed(self, record: Record) -> Record:
        cpus = _described_cpus(self.job.setup if self.job else None, self.env)
        notes = dict(record.notes or {})
        if cpus is None:
            notes["job_cpus"] = f"ranks not pinned: {self._unpinned_reason()}"
        return record.updated(gpu_memory_mb=self.context.device.card_mb, job_cpus=cpus, notes=notes)

    def close(self) -> None:
        """Every rank, monitor and ballast ended; safe to call at any point and more than once."""
        with deferred_signals():
            if self.job is not None:
                self.job.close()
            for sampler in self.samplers:
                sampler.stop()
            for card in self.ballasts:
                card.stop()


def _round_times(job: DataParallelJob, m: ScalingMeasurement) -> dict[str, Any]:
    """The job's phases in the names a pair's round uses, so ``gpu-pairs dead-time`` reads a scaling
    case as it reads any: its ranks' start, their first and last steps (every stretch is training),
    their end, and the end of the case's teardown."""
    firsts = [r.progress.ready_t for r in m.ranks if r.progress.ready_t is not None]
    lasts = [r.progress.last_t for r in m.ranks if r.progress.last_t is not None]
    return {"fg_start_t": job.start_t, "fg_train_start_t": min(firsts) if firsts else None,
            "fg_train_end_t": max(lasts) if lasts else None, "fg_end_t": job.end_t, "round_end_t": now()}


def _per_gpu_batch(case: Case, results: list[dict[str, Any]]) -> Optional[int]:
    reported = results[0].get("per_gpu_batch") if results else None
    if isinstance(reported, int) and not isinstance(reported, bool):
        return reported
    declared = case.fg.hyperparameters.get("batch_size")
    return declared if isinstance(declared, int) and not isinstance(declared, bool) else None


def _described_cpus(setup: Optional[RankSetup], env: Environment) -> Optional[dict[str, str]]:
    if setup is None or not setup.cpus or None in setup.cpus:
        return None
    return {**{f"rank{r}": format_cpu_list(cpus) for r, cpus in enumerate(setup.cpus) if cpus is not None},
            "harness": format_cpu_list(env.cpus.harness)}


def _save_step_times(out: Path, results: list[dict[str, Any]]) -> None:
    """``step_times.csv``: every timed step of every rank, warm-up and probe included."""
    rows = [(rank, stretch, index, seconds) for rank, result in enumerate(results)
            for stretch, key in (("warmup", "warmup_times_s"), ("measured", "step_times_s"), ("no_sync", "probe_times_s"))
            for index, seconds in enumerate(result.get(key) or [])]
    if rows:
        atomic_write_csv(out / "step_times.csv", ("rank", "stretch", "step", "seconds"), rows)
