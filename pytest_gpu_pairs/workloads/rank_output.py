"""A command workload's rank under torchrun, given a progress file and a log of its own:
``python -m pytest_gpu_pairs.workloads.rank_output DIR -- COMMAND ...``.

torchrun starts every rank with one environment and one output, so each rank's protocol lines
and printed progress would land in one file, indistinguishable. torchrun starts this module as
each rank's program (``--no-python``); it points ``$GPU_PAIRS_PROGRESS`` at
``DIR/rank<RANK>.progress.jsonl``, sends the rank's output to ``DIR/rank<RANK>.log`` and replaces
itself with the command, which keeps its pid, torchrun's variables and everything else.
Standard library only: no torch is loaded before the command's own.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.protocol import ENV_VAR


def rank_files(folder: str | Path, rank: int | str) -> tuple[Path, Path]:
    """(progress file, log) of one rank: the harness reads them where this module writes them."""
    return Path(folder) / f"rank{rank}.progress.jsonl", Path(folder) / f"rank{rank}.log"


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m pytest_gpu_pairs.workloads.rank_output DIR -- COMMAND ...", file=sys.stderr)
        return 2
    progress, log = rank_files(args[0], os.environ.get("RANK", "0"))
    os.environ[ENV_VAR] = str(progress)
    handle = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    os.dup2(handle, 1)
    os.dup2(handle, 2)
    os.close(handle)
    command = args[2:]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"could not start {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # not reached: execvp replaced this process


if __name__ == "__main__":
    sys.exit(main())
