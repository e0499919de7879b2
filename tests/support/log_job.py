"""A command workload that prints a real tool's log format (tests/data/logformats/<name>.json) and
nothing of the progress protocol to the harness, like a user's script that only prints.

With ``--truth`` it also reports every step it prints through the protocol's writer, to a file the
harness does not read (``$GPU_PAIRS_PROGRESS`` + ``.truth``), each event written before its line is
printed: what the tests compare the steps the harness read from the log with. It never imports
torch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from pytest_gpu_pairs.protocol import ENV_VAR, ProgressWriter

BAR_WIDTH = 10


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--format", required=True, help="a tests/data/logformats/*.json file")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--step-s", type=float, default=0.02)
    p.add_argument("--truth", action="store_true")
    return p.parse_args(argv)


def positions(fmt: dict) -> list[int]:
    return list(range(fmt["start"], fmt["stop"], fmt["increment"]))


def fields(fmt: dict, epoch_index: int, position: int, epochs: int) -> dict:
    """The template's values at one position, and the step it stands for (the tests' truth)."""
    batches = fmt["batches"]
    step = fmt["first_epoch"] + epoch_index if fmt["kind"] == "epoch" else epoch_index * batches + position
    total = epochs * batches
    done = step / total if fmt["kind"] == "counter" else position / batches
    filled = int(done * BAR_WIDTH)
    return {"epoch": fmt["first_epoch"] + epoch_index, "batch": position, "batches": batches, "step": step,
            "total": total, "pct": 100.0 * done, "bar": "█" * filled + " " * (BAR_WIDTH - filled),
            "epoch_end": float(epoch_index + 1), "last_epoch": fmt["first_epoch"] + epochs - 1}


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    with open(args.format, encoding="utf-8") as handle:
        fmt = json.load(handle)
    truth = ProgressWriter(os.environ[ENV_VAR] + ".truth") if args.truth and os.environ.get(ENV_VAR) else None
    print(f"log job: {fmt['description']}", flush=True)
    for epoch_index in range(args.epochs):
        for position in positions(fmt):
            time.sleep(args.step_s)
            values = fields(fmt, epoch_index, position, args.epochs)
            if truth is not None:
                truth.step(values["step"], values["epoch"], force=True)
            sys.stdout.write(fmt["line"].format(**values) + fmt["end"])
            sys.stdout.flush()
        for line in fmt["after_epoch"]:
            sys.stdout.write("\n" + line.format(**fields(fmt, epoch_index, fmt["batches"], args.epochs)))
        sys.stdout.write("\n")
        sys.stdout.flush()
    print("Accuracy: 0.75", flush=True)
    if truth is not None:
        truth.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
