"""The ballast process of ``--gpu-pairs-gpu-memory-mb``: allocates GPU memory until the card is as small as asked, then holds it."""
from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Optional

MB = 1024 * 1024
CHUNK_MB = 1024


def _emit(path: Optional[str], event: dict[str, Any]) -> None:
    line = json.dumps({**event, "t": time.time()})
    print(line, flush=True)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def hold(target_free_mb: float, progress_path: Optional[str], poll_s: float = 0.5) -> int:
    """The ballast process: allocate until CUDA reports ``target_free_mb`` free, then hold."""
    import torch

    if not torch.cuda.is_available():
        _emit(progress_path, {"event": "error", "message": "CUDA is not available to the ballast process"})
        return 2
    free, total = torch.cuda.mem_get_info()
    to_hold = int(free - target_free_mb * MB)
    if to_hold <= 0:
        _emit(progress_path, {"event": "error", "message": f"only {free / MB:.0f} MB are free; cannot leave "
                                                           f"{target_free_mb:.0f} MB by holding the rest"})
        return 2
    chunks = []
    try:
        while to_hold > 0:
            size = min(CHUNK_MB * MB, to_hold)
            chunks.append(torch.empty(size, dtype=torch.uint8, device="cuda").zero_())
            to_hold -= size
        torch.cuda.synchronize()
    except RuntimeError as exc:
        _emit(progress_path, {"event": "error", "message": f"allocation failed: {str(exc).splitlines()[0]}"})
        return 2
    free_after, _ = torch.cuda.mem_get_info()
    _emit(progress_path, {"event": "ready", "held_alloc_mb": sum(c.numel() for c in chunks) / MB,
                          "free_mb": free_after / MB, "total_mb": total / MB})
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(poll_s)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_gpu_pairs.workloads.ballast",
                                     description="hold GPU memory until only --target-free-mb is free, until killed")
    parser.add_argument("--target-free-mb", type=float, required=True)
    args = parser.parse_args(argv)
    from pytest_gpu_pairs.protocol import ENV_VAR

    return hold(args.target_free_mb, os.environ.get(ENV_VAR))


if __name__ == "__main__":
    import sys

    sys.exit(main())
