"""``--gpu-pairs-gpu-memory-mb N``: a smaller card emulated on a big one, so that its OOMs happen for real.

A ballast process allocates everything but N MB of the GPU and holds it for the whole case
(solo baselines included), so the jobs of the case find what a card of N MB would leave them:
N minus what the driver already uses; each job's CUDA context then takes its own share, as on
the real card. The ballast is a job process like any other (own session, in the jobs registry,
killed on every exit path) and also exits by itself when the process that started it is gone.

The harness side imports no torch; ``python -m pytest_gpu_pairs.workloads.ballast`` is the process that
does, with plain ``cudaMalloc`` (torch's caching allocator switched off) in 1 GiB chunks.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from pytest_gpu_pairs.inputs import open_regular

if TYPE_CHECKING:
    from pytest_gpu_pairs.run.jobs import JobProcess

MB = 1024 * 1024
CHUNK_MB = 1024
READY_TIMEOUT_S = 180.0
ROLE = "ballast"


class BallastError(RuntimeError):
    """The ballast could not hold the memory; the message says why."""


EVENTS_MAX_BYTES = 1 << 20  # the ballast writes a handful of short lines


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        with open_regular(path) as handle:
            lines = handle.read(EVENTS_MAX_BYTES).decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def worker_argv(target_free_mb: float) -> list[str]:
    return [sys.executable, "-m", "pytest_gpu_pairs.workloads.ballast", "--target-free-mb", f"{target_free_mb:.0f}"]


class Ballast:
    """Holds the GPU's memory down to ``gpu_memory_mb`` from ``start`` until ``stop``.

    ``gpu`` is the harness's ``monitor.nvml.Gpu``: it says how much the driver already uses
    before the ballast starts, and afterwards how much the ballast process really holds.
    """

    def __init__(self, gpu_memory_mb: float, gpu, out_dir: str | Path, env: Optional[dict[str, str]] = None,
                 make_argv: Callable[[float], list[str]] = worker_argv, ready_timeout_s: float = READY_TIMEOUT_S):
        self.gpu_memory_mb, self.gpu, self.out_dir = gpu_memory_mb, gpu, Path(out_dir)
        self.env, self.make_argv, self.ready_timeout_s = env or {}, make_argv, ready_timeout_s
        self.job: Optional[JobProcess] = None
        self.ready: dict[str, Any] = {}
        self.held_mb: Optional[float] = None
        self.used_before_mb: Optional[float] = None

    @property
    def pid(self) -> Optional[int]:
        return self.job.pid if self.job is not None else None

    def start(self) -> Ballast:
        from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec

        self.used_before_mb = self.gpu.memory_used_mb() or 0.0
        target_free = self.gpu_memory_mb - self.used_before_mb
        if target_free <= 0:
            raise BallastError(f"--gpu-pairs-gpu-memory-mb {self.gpu_memory_mb:.0f} leaves nothing: the GPU already uses "
                               f"{self.used_before_mb:.0f} MB")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        spec = JobSpec(ROLE, ROLE, self.make_argv(target_free), env, None, float("inf"))
        job = self.job = JobProcess(spec, self.out_dir / "ballast.log", self.out_dir / "ballast.jsonl").start()
        try:
            self.ready = self._wait_ready(job)
        except BaseException:
            self.stop()
            raise
        self.held_mb = dict(self.gpu.compute_processes()).get(job.pid)
        return self

    def _wait_ready(self, job: JobProcess) -> dict[str, Any]:
        deadline = time.monotonic() + self.ready_timeout_s
        path = Path(job.progress_path)
        while time.monotonic() < deadline:
            if job.start_error:
                raise BallastError(f"the ballast could not start: {job.start_error}")
            for event in _events(path):
                if event.get("event") == "ready":
                    return event
                if event.get("event") == "error":
                    raise BallastError(f"the ballast failed: {event.get('message')} (log: {job.log_path})")
            if job.poll() is not None:
                raise BallastError(f"the ballast exited with code {job.poll()} before holding the memory "
                                   f"(log: {job.log_path})")
            time.sleep(0.05)
        raise BallastError(f"the ballast did not hold the memory within {self.ready_timeout_s:.0f} s "
                           f"(log: {job.log_path})")

    def stop(self) -> None:
        if self.job is not None:
            self.job.stop()

    def __enter__(self) -> Ballast:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def figures(self) -> dict[str, Any]:
        """What the record says about the emulated card."""
        return {"gpu_memory_mb": self.gpu_memory_mb, "ballast_held_mb": self.held_mb,
                "gpu_free_mb_emulated": self.ready.get("free_mb"), "gpu_used_before_ballast_mb": self.used_before_mb}

