"""Solo profile of one built-in workload, run as its own process:
``python -m pytest_gpu_pairs.workloads.profile <model> --device cuda --seconds 8 --out FILE``.

Evaluates the freshly built model (as a run at lr 0 would end, batch-norm statistics aside),
trains at the default hyperparameters for ``--warmup`` seconds, then for a timed window of
``--seconds``, and evaluates again; the evaluation sets are those of ``--eval-scale``. It writes
one JSON object: the window's wall-clock bounds (so a monitor outside can cut its samples to
them), steps, step time, samples per second, torch's peak reserved and allocated memory over the
whole process, and the metrics before and after training. GPU power, energy, utilisation and
per-process NVML memory are measured by the caller, which creates no CUDA context of its own
(the archived workload-profiles study's profiler did, ``reports/archive/workload_profiles/``;
``gpu-pairs profile`` is the product's solo profile).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

MB = 1024 * 1024
HOST_SHARE_METHOD = ("1 - (seconds the host waited in torch.cuda.synchronize, called every 5 steps) / window: "
                     "the share of the window the host was busy preparing and launching work rather than "
                     "waiting for the GPU (launches that block on a full queue count as host time)")


def _sync(device: str):
    import torch

    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


class _TimedSync:
    """The device synchronisation, timed: the seconds the host spent waiting for the GPU."""

    def __init__(self, sync):
        self.sync, self.waited_s = sync, 0.0

    def __call__(self) -> None:
        began = time.perf_counter()
        self.sync()
        self.waited_s += time.perf_counter() - began


def _timed_steps(workload, seconds: float, sync) -> tuple[int, float, float, float]:
    """Train until ``seconds`` have passed (synchronised, on the monotonic clock: a wall clock set
    back mid-run does not stretch it); (steps, start, end) wall times and the seconds spent waiting
    in the synchronisations after the start."""
    batches = workload.batches()
    sync()
    timed = _TimedSync(sync)
    start, began = time.time(), time.monotonic()
    steps = 0
    while True:
        workload.train_step(next(batches))
        steps += 1
        if steps % 5 == 0 or seconds < 2:
            timed()
            if time.monotonic() - began >= seconds:
                break
    timed()
    return steps, start, start + time.monotonic() - began, timed.waited_s


def profile_torch(name: str, device: str, seconds: float, warmup: float, eval_scale: float) -> dict:
    import torch

    from pytest_gpu_pairs.catalog import builtin
    from pytest_gpu_pairs.workloads.train import build, parameter_count

    info = builtin(name)
    sync = _sync(device)
    built_t = time.monotonic()
    workload = build(name, device, eval_scale)
    record = {"params": parameter_count(workload.model), "data": workload.data_kind,
              "batch_size": workload.batch_size, "steps_per_epoch": workload.steps_per_epoch(),
              "build_s": time.monotonic() - built_t}
    record["metrics_untrained"] = workload.evaluate()
    _timed_steps(workload, warmup, sync)
    steps, start, end, waited = _timed_steps(workload, seconds, sync)
    record.update(window_start=start, window_end=end, steps=steps, window_s=end - start)
    if device.startswith("cuda"):
        record["host_share"] = max(0.0, 1.0 - waited / (end - start))
        record["host_share_method"] = HOST_SHARE_METHOD
    record["step_time_s"] = (end - start) / steps
    record["samples_per_s"] = steps * workload.batch_size / (end - start)
    record["metrics_trained"] = workload.evaluate()
    if device.startswith("cuda"):
        record["torch_peak_reserved_mb"] = torch.cuda.max_memory_reserved() / MB
        record["torch_peak_allocated_mb"] = torch.cuda.max_memory_allocated() / MB
    record["input_shape"] = list(info.input_shape)
    return record


def profile_cpu_job(name: str, seconds: float) -> dict:
    """The CPU-only workload: its parallel folds for about ``seconds``, steps counted by them."""
    from pytest_gpu_pairs.catalog import builtin
    from pytest_gpu_pairs.protocol import ProgressWriter
    from pytest_gpu_pairs.workloads import bug_localization as bl

    info = builtin(name)
    passes = 1
    workload = bl.make(info, {**info.defaults(), "max_iter": passes}, "cpu", 1.0)
    start, began = time.time(), time.monotonic()
    steps = workload.train(ProgressWriter(None), 0, 1)
    end = start + time.monotonic() - began
    return {"params": info.param_count, "data": workload.data_kind, "batch_size": info.defaults()["batch_size"],
            "steps_per_epoch": workload.steps_per_epoch(), "window_start": start, "window_end": end,
            "window_s": end - start, "steps": steps, "step_time_s": (end - start) / max(1, steps),
            "samples_per_s": steps * info.defaults()["batch_size"] / (end - start),
            "metrics_trained": workload.final_metrics(), "workers": bl.workers(),
            "note": f"one pass over each of {info.defaults()['kfold']} folds ({bl.workers()} worker processes); "
                    "the window is that pass, not --seconds"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_gpu_pairs.workloads.profile")
    parser.add_argument("model")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--eval-scale", type=float, default=0.01)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from pytest_gpu_pairs.catalog import builtin

    info = builtin(args.model)
    record = {"model": args.model, "device": "cpu" if info.cpu_only else args.device, "pid": os.getpid()}
    try:
        if info.cpu_only:
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            record.update(profile_cpu_job(args.model, args.seconds))
        else:
            record.update(profile_torch(args.model, args.device, args.seconds, args.warmup, args.eval_scale))
        record["ok"] = True
    except Exception as exc:
        record.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(record, default=lambda v: None if isinstance(v, float) and not math.isfinite(v) else v))
    tmp.replace(args.out)
    print(json.dumps({k: record.get(k) for k in ("model", "ok", "steps", "step_time_s", "error")}), flush=True)
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
