"""One rank of a scaling case: a built-in wrapped in DistributedDataParallel, timed step by step.

    python -m pytest_gpu_pairs.workloads.data_parallel <model> --device cuda --warmup-steps 10 \\
        --steps 100 --val-samples 16 --comm-probe-steps 20 [--<hyperparameter> VALUE ...]

Each rank is a process of its own and reads its place from torchrun's variables (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``): the harness sets them, and
``torchrun --nproc-per-node N -m pytest_gpu_pairs.workloads.data_parallel ...`` runs it the same
way. The workload's model code is not changed: the built model is wrapped in DDP inside this
process, the optimiser keeps the same parameters, and attribute lookups the workload makes on its
model (``init_hidden``, ``features``) reach the wrapped module. Each rank draws its own batches
(the workload's seed plus the rank); DDP broadcasts rank 0's initial weights.

Before the wrapping, one step of the rank's own finds the parameters that get no gradient (a
backbone's classifier that the workload replaced by its head: densenet121, pcb); DDP is then told
to look for them in every step (``find_unused_parameters``), as a user of the same model would
have to. The steps then run in four stretches: ``warmup_steps`` (DDP's bucket rebuild, allocator
and autotuner warm-up), ``steps`` timed one by one, each ended by a device synchronisation and
split into the wait for its batch (data time) and the rest; a validation of ``val_samples``
held-out samples shared among the ranks, as distributed evaluation shares its set (a workload
with a ``validate(count)`` method: the dense-prediction stand-in); and ``comm_probe_steps`` under
``no_sync()``, which skips the gradient all-reduce and nothing else: training after validation,
where a fragmented allocator would show. The probe comes last because its ranks' weights drift
apart. Each stretch's allocator peaks are reported as a memory event (``start``, ``train``,
``eval``, then ``train`` again), so a record says whether training or validation set the peak. The
result event carries every timed step and its data time, the validation's time, the measured
window's wall-clock bounds and torch's peak reserved memory.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, Optional

from pytest_gpu_pairs.catalog import builtin
from pytest_gpu_pairs.protocol import ProgressWriter

MB = 1024 * 1024
DIGITS = 7  # step times in the result event: microseconds of a step of up to tens of seconds


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The step counts; everything else is the workload's command line as ``__main__`` reads it."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--comm-probe-steps", type=int, default=0)
    parser.add_argument("--val-samples", type=int, default=0)
    return parser.parse_known_args(argv)


def rank_place() -> tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun sets them; a lone process is rank 0 of 1."""
    return (int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")),
            int(os.environ.get("LOCAL_RANK", "0")))


def wrapped(model, device_ids: Optional[list[int]], find_unused: bool):
    """The model in DDP, with attribute lookups DDP does not answer passed on to the model itself,
    so a workload's own methods (``self.model.init_hidden(...)``) run unchanged."""
    from torch.nn.parallel import DistributedDataParallel

    class DataParallelModel(DistributedDataParallel):
        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(super().__getattr__("module"), name)

    return DataParallelModel(model, device_ids=device_ids, find_unused_parameters=find_unused)


def unused_parameters(workload, batches: Iterator[Any]) -> int:
    """Parameters one training step leaves without a gradient (a backbone's own classifier that
    the workload replaced by its head). DDP must then look for them in every step, or it waits
    for their gradients for ever; the step is the rank's own, before DDP broadcasts rank 0's weights."""
    workload.train_step(next(batches))
    return sum(1 for p in workload.model.parameters() if p.requires_grad and p.grad is None)


def timed_steps(workload, batches: Iterator[Any], count: int, sync: Callable[[], None],
                progress: ProgressWriter, done: int) -> tuple[list[float], list[float], int]:
    """``count`` optimiser steps, each timed from the wait for its batch to the device's end of it,
    with the wait alone (data time) beside it; the steps done so far are reported through the
    protocol (readiness after the very first)."""
    times, waits = [], []
    for _ in range(count):
        start = time.perf_counter()
        batch = next(batches)
        fetched = time.perf_counter()
        workload.train_step(batch)
        sync()
        end = time.perf_counter()
        times.append(round(end - start, DIGITS))
        waits.append(round(fetched - start, DIGITS))
        done += 1
        if done == 1:
            progress.ready()
        progress.step(done, done / workload.steps_per_epoch())
    return times, waits, done


def validation(workload, samples: int, rank: int, world: int, sync: Callable[[], None]) -> dict[str, Any]:
    """This rank's share of a ``samples``-sample validation, timed to the device's end of it; none
    where the workload cannot validate a given number of samples."""
    if samples <= 0 or not hasattr(workload, "validate"):
        return {"val_time_s": None, "val_samples": 0}
    share = len(range(rank, samples, world))
    ddp = workload.model
    workload.model = ddp.module  # DDP's forward broadcasts buffers: ranks with unequal shares would wait for ever
    try:
        sync()
        start = time.perf_counter()
        metrics = workload.validate(share) if share else {}
        sync()
    finally:
        workload.model = ddp
    return {"val_time_s": round(time.perf_counter() - start, DIGITS), "val_samples": share, "val_metrics": metrics}


def _device(requested: str, local_rank: int) -> tuple[str, str]:
    """(torch device, backend): a GPU of its own per rank with NCCL, else the CPU with gloo."""
    if requested.startswith("cuda"):
        import torch

        torch.cuda.set_device(local_rank)
        return f"cuda:{local_rank}", "nccl"
    return "cpu", "gloo"


def _is_oom(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower() or type(exc).__name__ == "OutOfMemoryError"


def train(model: str, requested: str, scale: float, hparams: dict[str, Any], counts: argparse.Namespace,
          progress: ProgressWriter) -> dict[str, Any]:
    """Build, wrap, run the four stretches; what the result event reports beside the steps."""
    import torch
    import torch.distributed as dist

    rank, world, local_rank = rank_place()
    device, backend = _device(requested, local_rank)
    dist.init_process_group(backend, device_id=torch.device(device) if backend == "nccl" else None)
    info = builtin(model)
    if "seed" in hparams:
        hparams = {**hparams, "seed": int(hparams["seed"]) + rank}
    if info.module is None:
        raise ValueError(f"{model}: the catalogue names no training module for it")
    workload = importlib.import_module(info.module).make(info, hparams, device, scale)
    batches = workload.batches()
    from pytest_gpu_pairs.workloads.train import MemoryPhases

    memory = MemoryPhases(progress, device)
    with memory.phase("start"):  # the first step (cuDNN's autotuning) to the end of the warm-up
        unused = unused_parameters(workload, batches)
        workload.model = wrapped(workload.model, [local_rank] if backend == "nccl" else None, unused > 0)
        sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
        print(f"{model}: rank {rank} of {world}, {backend} on {device}, {counts.warmup_steps} warm-up, "
              f"{counts.steps} timed, {counts.val_samples} validation samples and {counts.comm_probe_steps} "
              f"no-sync steps; {unused} parameter tensor(s) without a gradient (find_unused_parameters "
              f"{unused > 0})", flush=True)
        progress.setup_done()
        warmup, _, done = timed_steps(workload, batches, counts.warmup_steps, sync, progress, 0)
    window_start = time.monotonic()  # on the clock the harness's samples are stamped with (protocol.from_monotonic)
    with memory.phase("train"):
        steps, waits, done = timed_steps(workload, batches, counts.steps, sync, progress, done)
    window_end = time.monotonic()
    with memory.phase("eval"):
        validated = validation(workload, counts.val_samples, rank, world, sync)
    with memory.phase("train"), workload.model.no_sync():
        probe, _, done = timed_steps(workload, batches, counts.comm_probe_steps, sync, progress, done)
    progress.step(done, done / workload.steps_per_epoch(), force=True)
    dist.destroy_process_group()
    return {"steps": done, "peak_mem_reserved_mb": memory.peak_reserved_mb, "rank": rank, "world_size": world,
            "backend": backend, "device": device, "per_gpu_batch": int(workload.batch_size), "unused_parameters": unused,
            "warmup_times_s": warmup, "step_times_s": steps, "data_times_s": waits, "probe_times_s": probe,
            "window_mono": [window_start, window_end], **validated}


def main(argv: Optional[list[str]] = None) -> int:
    from pytest_gpu_pairs.workloads.__main__ import parse as parse_workload

    counts, rest = parse(sys.argv[1:] if argv is None else argv)
    model, requested, scale, hparams = parse_workload(rest)
    sync = (lambda: sys.modules["torch"].cuda.synchronize()) if requested.startswith("cuda") else (lambda: None)
    progress = ProgressWriter.from_env(sync=sync)
    try:
        facts = train(model, requested, scale, hparams, counts, progress)
        steps, peak = facts.pop("steps"), facts.pop("peak_mem_reserved_mb")
        progress.result({}, steps, peak, **facts)
        return 0
    except BaseException as exc:
        progress.error("".join(traceback.format_exception_only(type(exc), exc)), oom=_is_oom(exc))
        traceback.print_exc()
        sys.stdout.flush()
        return 3 if _is_oom(exc) else 1
    finally:
        progress.close()


if __name__ == "__main__":
    sys.exit(main())
