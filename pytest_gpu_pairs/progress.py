"""Three calls for a training script that can be edited: ``progress.ready()``, ``progress.step(n)``,
``progress.result(metrics)``; the harness then reads the script's progress as it reads a built-in's.

Standard library only (it imports nothing heavy, not even what the plugin itself needs), and a
no-op outside the harness: without ``$GPU_PAIRS_PROGRESS`` nothing is written, so the same script
runs anywhere unchanged. See docs/progress.md for a complete example.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

from pytest_gpu_pairs.protocol import ENV_VAR, ProgressWriter, step_interval_s, step_problem

_writer: Optional[ProgressWriter] = None
_ready = False
_steps = 0
_epoch = 0.0


def _cuda_sync() -> None:
    """A step counted is a step the GPU has finished: CUDA queues run ahead of Python. Only when
    the script itself imported torch and uses CUDA; never imported from here."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _open() -> Optional[ProgressWriter]:
    global _writer
    if _writer is None and os.environ.get(ENV_VAR):
        _writer = ProgressWriter(os.environ[ENV_VAR], sync=_cuda_sync, interval_s=step_interval_s())
    return _writer


def active() -> bool:
    """Whether the harness is listening (the script runs as a gpu-pairs job)."""
    return bool(os.environ.get(ENV_VAR))


def ready() -> None:
    """The script trains from now on (after its first optimiser step): what came before is startup.
    Optional: the first ``step`` calls it."""
    global _ready
    writer = _open()
    if writer is not None and not _ready:
        writer.ready()
    _ready = True


def _whole(n: Any, what: str) -> int:
    try:
        return int(n)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"progress: expected {what} to be a whole number from 0 to 2**53, got {n!r}") from None


def _checked(steps: int, epoch: float) -> None:
    problem = step_problem(steps, epoch)
    if problem:
        raise ValueError(f"progress: {problem}")


def step(n: Optional[int] = None, epoch: Optional[float] = None) -> None:
    """``n`` steps done so far in this run (or one more than the last call, without ``n``);
    ``epoch``: where in the training that is, in epochs, if the script knows. Written at most four
    times a second (twenty under interleaved rounds), so it can be called every step. A value the
    harness could not read (a negative or non-finite step, a NaN epoch) is a ``ValueError`` here,
    and the call changes nothing: the next valid call counts on from the last valid one."""
    global _steps, _epoch
    steps = _steps + 1 if n is None else _whole(n, "the step")
    try:
        new_epoch = _epoch if epoch is None else float(epoch)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"progress: expected 'epoch' to be a finite number, got {epoch!r}") from None
    _checked(steps, new_epoch)
    _steps, _epoch = steps, new_epoch
    if not _ready:
        ready()
    writer = _open()
    if writer is not None:
        writer.step(_steps, _epoch)


def result(metrics: dict[str, Any], steps: Optional[int] = None) -> None:
    """The run's final model metrics (accuracy, loss, ...), recorded as the job's ``perf``; the last
    step count is written first, so the run's end is its last step."""
    global _steps
    count = _steps if steps is None else _whole(steps, "steps")
    _checked(count, _epoch)
    _steps = count
    writer = _open()
    if writer is None:
        return
    writer.step(_steps, _epoch, force=True)
    writer.result(dict(metrics), _steps, _peak_reserved_mb())


def _peak_reserved_mb() -> Optional[float]:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return torch.cuda.max_memory_reserved() / 2**20
