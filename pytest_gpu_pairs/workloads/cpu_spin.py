"""A command workload that keeps one CPU busy and never touches the GPU:
``python -m pytest_gpu_pairs.workloads.cpu_spin``.

Beside a host-bound training job it tells a host effect from a GPU one: a job that steps faster
beside this one than alone is sped up by the host being busy (a virtual machine's idle CPUs waking
late, frequency scaling), not by anything on the card. It imports no torch, so it opens no CUDA
context; each step spins ``--step-s`` seconds of pure Python and is reported through the progress
protocol like any workload's."""
from __future__ import annotations

import argparse
import sys
import time

from pytest_gpu_pairs.protocol import ProgressWriter


def spin(seconds: float) -> int:
    """Busy arithmetic for ``seconds`` of this process's CPU time; returns the loops done."""
    end, loops, x = time.process_time() + seconds, 0, 1
    while time.process_time() < end:
        for _ in range(1000):
            x = (x * 1103515245 + 12345) % 2147483648
        loops += 1
    return loops


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=100, help="steps of one run")
    p.add_argument("--step-s", type=float, default=0.01, help="CPU seconds each step spins")
    args = p.parse_args(argv)
    if args.steps < 1 or not args.step_s > 0:
        p.error("--steps must be at least 1 and --step-s above 0")
    writer = ProgressWriter.from_env()
    print("Epoch 1", flush=True)
    writer.ready()
    for step in range(1, args.steps + 1):
        spin(args.step_s)
        writer.step(step, step / args.steps)
    writer.step(args.steps, 1.0, force=True)
    writer.result({}, args.steps, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
