"""A command workload trained data-parallel as its users start it under torchrun: it reads its rank
from torchrun's variables, averages its gradients with gloo through DistributedDataParallel and
reports its steps through ``pytest_gpu_pairs.progress`` (or, with ``--print``, only prints them).
It trains until stopped: the harness ends it once every rank has reported the steps it measures.
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from pytest_gpu_pairs import progress


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--step-s", type=float, default=0.02, help="seconds of make-believe work per step")
    parser.add_argument("--print", action="store_true", help="print the steps instead of reporting them")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(int(os.environ["RANK"]))
    model = DistributedDataParallel(torch.nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while True:
        optimizer.zero_grad()
        model(torch.randn(8, 16)).square().mean().backward()
        optimizer.step()
        time.sleep(args.step_s)
        step += 1
        if args.print:
            print(f"step {step}", flush=True)
        else:
            progress.step(step)


if __name__ == "__main__":
    main()
