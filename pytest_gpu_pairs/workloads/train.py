"""The training loop every built-in workload shares, speaking the progress protocol.

A workload supplies its model, optimiser, batches and evaluation; this loop runs the scaled
number of steps, reports readiness after the first optimiser step, reports steps, and ends with
the result event (metrics, steps, torch's peak reserved memory, which data it trained on).
``--scale`` shrinks the evaluation sets with the epochs (never below a floor that still tells
learning from chance), so a 1 % run is a 1 % run end to end.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import torch

from pytest_gpu_pairs.catalog import BuiltinWorkload
from pytest_gpu_pairs.protocol import (
    ENV_VAR,
    ProgressWriter,
    cycling,
    fit_run_steps,
    runs_wanted,
    steady_state_only,
    wait_for_start_gate,
)

MB = 1024 * 1024


def total_steps(epochs: float, steps_per_epoch: int, scale: float) -> int:
    return max(1, math.ceil(epochs * steps_per_epoch * scale))


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


CUDNN_BENCHMARK_VAR = "GPU_PAIRS_CUDNN_BENCHMARK"


def resolve_cudnn_benchmark(original: bool) -> bool:
    """The original's cudnn.benchmark setting unless ``GPU_PAIRS_CUDNN_BENCHMARK`` (0/1) says otherwise.

    Autotuning every convolution shape is what the re-ID originals do, and it is seconds to
    tens of seconds of each process's first step (DenseNet-121 on an H100: ~35 s). Rounds of a
    few seconds of training can switch it off; the record's log says which setting ran.
    """
    forced = os.environ.get(CUDNN_BENCHMARK_VAR)
    return original if forced in (None, "") else forced.strip().lower() in ("1", "true", "yes", "on")


class Workload:
    """Base of the built-ins: a model trained by a per-step optimiser on generated or real batches."""

    eval_every_epoch = False
    cudnn_benchmark = False

    def __init__(self, info: BuiltinWorkload, hp: dict[str, Any], device: str, scale: float = 1.0):
        self.info, self.hp, self.device, self.scale = info, hp, torch.device(device), scale
        self.data_kind = "generated"
        torch.manual_seed(int(hp.get("seed", 0)))
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = resolve_cudnn_benchmark(self.cudnn_benchmark)
        self.data = self.build_data()
        self._fresh_training()

    def _fresh_training(self) -> None:
        self.model: Any = self.build_model().to(self.device)  # each workload's own network, with its own methods
        self.optimizer = self.build_optimizer()
        self.scheduler = self.build_scheduler()
        self.history: list[dict[str, float]] = []

    def restart_training(self) -> None:
        """The same run again in this process (a kept-running background): the seed set anew and a
        fresh model, optimiser and schedule, on the data already built, so the run repeats the
        first one's arithmetic up to the device's nondeterminism."""
        torch.manual_seed(int(self.hp.get("seed", 0)))
        self._fresh_training()

    @property
    def batch_size(self) -> int:
        return int(self.hp["batch_size"])

    def steps_per_epoch(self) -> int:
        return self.info.steps_per_epoch(self.batch_size)

    def build_data(self) -> Any:
        return None

    def build_model(self) -> torch.nn.Module:
        raise NotImplementedError

    def build_optimizer(self) -> torch.optim.Optimizer:
        raise NotImplementedError

    def build_scheduler(self) -> Optional[Any]:
        return None

    def batches(self) -> Iterator[Any]:
        raise NotImplementedError

    def loss(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def train_step(self, batch) -> torch.Tensor:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch)
        loss.backward()
        self.optimizer.step()
        return loss

    def evaluate(self) -> dict[str, float]:
        raise NotImplementedError

    def end_epoch(self) -> None:
        if self.scheduler is not None:
            self.scheduler.step()
        if self.eval_every_epoch and not steady_state_only():
            self.history.append(self.evaluate())

    def final_metrics(self) -> dict[str, float]:
        return self.evaluate()

    def checkpoint_state(self) -> dict[str, Any]:
        """What the workload's own script saves at an epoch's end; a workload that trains without
        one optimiser (hand-written SGD, one optimiser per layer) says so in its override."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def train(self, progress: ProgressWriter, total: int, scaled_epoch: int, counted: int = 0) -> int:
        """Run ``total`` optimiser steps; returns the steps done (a workload with early stopping
        may do fewer). ``counted``: steps earlier runs of this process reported, which the count
        goes on from."""
        batches = self.batches()
        for step in range(1, total + 1):
            self.train_step(next(batches))
            if step == 1 and not counted:
                progress.ready()
            progress.step(counted + step, (counted + step) / scaled_epoch)
            if step % scaled_epoch == 0 or step == total:
                self.end_epoch()
        return total


def _sync_for(device: str):
    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def _peak_reserved_mb(device: str) -> Optional[float]:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.max_memory_reserved() / MB
    return None


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


class MemoryPhases:
    """The caching allocator's peak over each part of a run, reported as the part ends: a fit run
    says which part (start-up with cuDNN's autotuning, training, evaluation, a checkpoint) needed
    the most memory. The allocator sees every allocation it makes, however brief, where a sampler
    from outside sees only the moments it happens to look."""

    def __init__(self, progress: ProgressWriter, device: str):
        self.progress, self.cuda = progress, device.startswith("cuda") and torch.cuda.is_available()
        self.peak_reserved_mb: Optional[float] = None  # over every part reported

    def report(self, phase: str) -> None:
        """The peaks since the last reset (or since the process started) under ``phase``."""
        if self.cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_reserved() / MB
            self.peak_reserved_mb = max(peak, self.peak_reserved_mb or 0.0)
            self.progress.memory(phase, peak, torch.cuda.max_memory_allocated() / MB, torch.cuda.memory_reserved() / MB)

    @contextlib.contextmanager
    def phase(self, name: str):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        yield
        self.report(name)


def save_checkpoint(workload: Workload) -> None:
    """What a run saves at the end of an epoch: the model's and the optimiser's state, written where
    the job's progress file lies (or a temporary folder) and removed again."""
    folder = Path(os.environ[ENV_VAR]).parent if os.environ.get(ENV_VAR) else Path(tempfile.gettempdir())
    path = folder / f"fit-checkpoint-{os.getpid()}.pt"
    try:
        torch.save(workload.checkpoint_state(), path)
    finally:
        path.unlink(missing_ok=True)


def fit_run(workload: Workload, progress: ProgressWriter, steps: int, scaled_epoch: int,
            memory: MemoryPhases, whole: bool = True) -> dict[str, float]:
    """A short run through every part that holds memory: the first step (cuDNN's autotuning tries
    its algorithms here), ``steps - 1`` more, an evaluation over the run's evaluation set, a
    checkpoint (not ``whole``: the first two only). Each part's allocator peak is reported; returns
    the evaluation's metrics (none without one)."""
    batches = workload.batches()
    with memory.phase("start"):
        workload.train_step(next(batches))
        progress.ready()
    with memory.phase("train"):
        for step in range(2, steps + 1):
            workload.train_step(next(batches))
            progress.step(step, step / scaled_epoch)
        progress.step(steps, steps / scaled_epoch, force=True)
    if not whole:
        return {}
    with memory.phase("eval"):
        metrics = workload.evaluate()
    with memory.phase("checkpoint"):
        save_checkpoint(workload)
    return metrics


def _train_runs(workload: Workload, progress: ProgressWriter, total: int, scaled_epoch: int) -> tuple[int, dict]:
    """One run; a kept-running background (``cycling``) reports each run's metrics as a cycle and
    trains the run again until the harness stops it, or until it has trained ``runs_wanted`` runs.
    Returns the steps and the last run's metrics."""
    done = workload.train(progress, total, scaled_epoch)
    progress.step(done, done / scaled_epoch, force=True)
    metrics = workload.final_metrics()
    runs, wanted = 1, runs_wanted()
    while (cycling() or runs < wanted) and hasattr(workload, "restart_training"):
        runs += 1
        progress.cycle(metrics, done)
        workload.restart_training()
        done += workload.train(progress, total, scaled_epoch, counted=done)
        progress.step(done, done / scaled_epoch, force=True)
        metrics = workload.final_metrics()
    return done, metrics


def run(info: BuiltinWorkload, workload: Workload, device: str, scale: float) -> int:
    progress = ProgressWriter.from_env(sync=_sync_for(device))
    try:
        steps_per_epoch = workload.steps_per_epoch()
        total = total_steps(float(workload.hp.get("epochs", 1)), steps_per_epoch, scale)
        scaled_epoch = max(1, math.ceil(steps_per_epoch * scale))
        fit_steps, whole_fit = fit_run_steps()
        run_kind = f"a fit run of {fit_steps} steps" if fit_steps else f"{total} steps"
        print(f"{info.name}: {run_kind} ({scaled_epoch} per epoch at scale {scale}), device {device}, "
              f"{workload.data_kind} data, cudnn.benchmark {torch.backends.cudnn.benchmark}", flush=True)
        memory = MemoryPhases(progress, device)
        if fit_steps:
            memory.report("setup")
        progress.setup_done()
        wait_for_start_gate()
        if fit_steps:
            done = fit_steps
            metrics = fit_run(workload, progress, fit_steps, scaled_epoch, memory, whole_fit)
        else:
            done, metrics = _train_runs(workload, progress, total, scaled_epoch)
        for name, value in metrics.items():
            print(f"{name}: {value:.6g}", flush=True)
        peak = memory.peak_reserved_mb if fit_steps else _peak_reserved_mb(device)
        progress.result(metrics, done, peak, data=workload.data_kind)
        return 0
    except BaseException as exc:
        progress.error("".join(traceback.format_exception_only(type(exc), exc)), oom=_is_oom(exc))
        traceback.print_exc()
        sys.stdout.flush()
        return 3 if _is_oom(exc) else 1
    finally:
        progress.close()


def build(name: str, device: str = "cpu", scale: float = 1.0, **overrides: Any) -> Workload:
    """A built-in workload in this process (tests, the profiler): defaults plus ``overrides``."""
    import importlib

    from pytest_gpu_pairs.catalog import builtin

    info = builtin(name)
    if info.module is None:
        raise ValueError(f"built-in workload {name!r} is not implemented")
    return importlib.import_module(info.module).make(info, {**info.defaults(), **overrides}, device, scale)
