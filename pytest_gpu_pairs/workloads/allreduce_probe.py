"""One rank of the all-reduce probe: how fast this host's GPUs sum a gradient the stand-in's size,
with nothing else running, as NCCL's own ``all_reduce_perf`` measures it.

    python -m pytest_gpu_pairs.workloads.allreduce_probe OUT.json --bytes 234511652 --iterations 20

Each rank reads its place from torchrun's variables. After ``warmup`` all-reduces, ``iterations``
are timed one by one (a device synchronisation and a barrier before each, the synchronisation after
it). Rank 0 writes each time and the bandwidths in NCCL's terms: algorithm bandwidth = bytes / time,
bus bandwidth = algorithm bandwidth x 2 (N - 1) / N, the rate every link carried in a ring, which
does not depend on N and so gives the time on another count: 2 (N - 1) / N x bytes / bus bandwidth.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

FLOAT32_BYTES = 4


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pytest_gpu_pairs.workloads.allreduce_probe")
    parser.add_argument("out", type=Path)
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    return parser.parse_args(argv)


def probe(args: argparse.Namespace) -> Optional[dict]:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    tensor = torch.ones(max(1, args.bytes // FLOAT32_BYTES), dtype=torch.float32, device="cuda")
    times = []
    for index in range(args.warmup + args.iterations):
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        torch.cuda.synchronize()
        if index >= args.warmup:
            times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, device="cuda")
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    dist.destroy_process_group()
    if rank != 0:
        return None
    per_op = slowest.tolist()
    size = tensor.numel() * FLOAT32_BYTES
    median = statistics.median(per_op)
    return {"world": world, "bytes": size, "times_s": per_op, "median_s": median,
            "algbw_gb_s": size / median / 1e9, "busbw_gb_s": size / median / 1e9 * 2 * (world - 1) / world}


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    found = probe(args)
    if found is not None:
        partial = args.out.with_suffix(".partial")
        partial.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
        partial.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
