"""What is on the card now, and whether it went back to idle: NVML's compute processes and memory in
use, and every live job process of the harness (``GPU_PAIRS_JOB`` in its environment).

A dead process's memory is freed by the driver within moments, not at once, so a reading after a
fault is a poll: up to a time limit, until no compute process and no job process is left and the
memory in use is back within a margin of what it was before any job started."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional, Protocol

from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable, open_gpu, visible_gpu
from pytest_gpu_pairs.run.proctree import JOB_TAG_VAR, tagged_processes

POLL_S = 0.25


class Card(Protocol):
    """What a reading needs of an opened GPU (``devices.nvml.Gpu``, or a fake in tests)."""

    def memory_used_mb(self) -> Optional[float]: ...

    def compute_processes(self) -> list[tuple[int, Optional[float]]]: ...


def open_card() -> Gpu:
    """The GPU a job's CUDA device 0 is (the first entry of CUDA_VISIBLE_DEVICES), else NVML's GPU 0;
    ``NvmlUnavailable`` saying why where there is none."""
    spec = visible_gpu()
    return open_gpu(spec) if spec is not None else Gpu(0)


def job_processes() -> list[int]:
    """Live processes (zombies aside) of any job the harness started, by the tag they inherit."""
    return [p.pid for p in tagged_processes(lambda environ: JOB_TAG_VAR in environ)]


def reading(card: Card, jobs: Optional[Callable[[], list[int]]] = None,
            clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """The card now: ``t``, ``mem_used_mb`` (one decimal), ``compute_processes`` ([pid, MB], 0 where
    the driver withholds a process's memory) and ``job_processes`` (pids)."""
    used = card.memory_used_mb()
    if used is None:
        raise NvmlUnavailable("NVML did not report the card's memory in use")
    return {"t": clock(), "mem_used_mb": round(used, 1),
            "compute_processes": [[pid, mb or 0] for pid, mb in card.compute_processes()],
            "job_processes": (jobs or job_processes)()}


def is_idle(state: dict[str, Any], idle_mb: float) -> bool:
    return not state["compute_processes"] and not state["job_processes"] and state["mem_used_mb"] <= idle_mb


def wait_for_idle(card: Card, idle_mb: float, timeout_s: float, jobs: Optional[Callable[[], list[int]]] = None,
                  clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Readings every ``POLL_S`` until the card is idle (memory at most ``idle_mb``) or ``timeout_s``
    passed; the last reading with ``idle_reached`` and ``waited_s``. A job process still alive at the
    end keeps the card from idle and is named in ``job_processes``."""
    started = clock()
    state = reading(card, jobs, clock)
    while clock() - started < timeout_s and not is_idle(state, idle_mb):
        sleep(POLL_S)
        state = reading(card, jobs, clock)
    return {**state, "idle_reached": is_idle(state, idle_mb), "waited_s": round(clock() - started, 2)}
