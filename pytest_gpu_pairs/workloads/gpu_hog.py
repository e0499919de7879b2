"""A command workload that holds a share of the card: ``python -m pytest_gpu_pairs.workloads.gpu_hog``.

It takes a share of the card's memory in 1 GiB tensors (a real CUDA out-of-memory error when it
does not fit), then computes matmuls while it speaks the progress protocol. ``--hang-run N`` makes
its N-th invocation (counted in ``--state``) compute forever instead of finishing: a job that only a
kill ends. The teardown study's jobs (``studies/steps/teardown.py``) and the awake probe's keeper
(``--mem-frac 0``)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from pytest_gpu_pairs.protocol import ProgressWriter

GIB = 1 << 30


def invocation(state: str) -> int:
    Path(state).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(state) / "invocations", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, b".")
    os.close(fd)
    return (Path(state) / "invocations").stat().st_size


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mem-frac", type=float, required=True, help="share of the card's total memory to hold")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--step-s", type=float, default=0.05)
    p.add_argument("--hang-run", type=int, default=0)
    p.add_argument("--state", default="/tmp/gpu_hog_state")
    args = p.parse_args()
    run = invocation(args.state)
    free, total = torch.cuda.mem_get_info()
    print(f"gpu_hog: invocation {run}, taking {args.mem_frac:.2f} of {total / GIB:.1f} GiB "
          f"({free / GIB:.1f} GiB free)", flush=True)
    held = [torch.empty(GIB, dtype=torch.uint8, device="cuda") for _ in range(int(args.mem_frac * total / GIB))]
    writer = ProgressWriter.from_env(sync=torch.cuda.synchronize)
    x = torch.randn(2048, 2048, device="cuda")
    step = 0
    while step < args.steps or run == args.hang_run:
        step += 1
        x = torch.tanh(x @ x)
        time.sleep(args.step_s)
        if step == 1:
            print("Epoch 1", flush=True)
            writer.ready()
        writer.step(step, step / args.steps)
    writer.step(step, 1.0, force=True)
    writer.result({"held_gib": len(held)}, step, torch.cuda.max_memory_reserved() / 2**20)
    print(f"held_gib: {len(held)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
