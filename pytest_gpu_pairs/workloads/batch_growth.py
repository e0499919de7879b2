"""What a larger global batch does to learning, from one checkpoint: the stand-in trained at the
current global batch, then continued at the current and at the larger one.

    python -m pytest_gpu_pairs.workloads.batch_growth checkpoint OUT.pt --device cuda --global-batch 4 --samples 800
    python -m pytest_gpu_pairs.workloads.batch_growth branch OUT.json --checkpoint CKPT.pt --device cuda \\
        --global-batch 6 --learning-rate 1.5e-4 --seed 1 --samples 600 --eval-every 120 --eval-samples 16

A global batch of N one-sample ranks is trained here as N accumulated one-sample micro-batches on
one device: DDP averages the ranks' gradients, accumulation with each loss divided by N sums the
same averages, and the stand-in's BatchNorm normalises each sample over its own pixels either way,
so the gradient is the one N ranks would compute. Two things differ and are said: the BatchNorm
running statistics move once per micro-batch here (DDP keeps rank 0's, moved once per step), which
touches evaluation only, and the samples are drawn by one stream instead of N.

A branch evaluates the held-out loss every ``eval-every`` samples (and at the checkpoint), and
writes its curve with the training loss of every optimiser step to ``OUT.json`` in one piece at the
end. The seed orders the branch's data; the checkpoint is the same for every branch.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

MODEL = "dense_aspp"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pytest_gpu_pairs.workloads.batch_growth")
    parser.add_argument("action", choices=("checkpoint", "branch"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--global-batch", type=int, required=True)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, required=True)
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--eval-samples", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=600)
    parser.add_argument("--loader-workers", type=int, default=2)
    parser.add_argument("--backbone-depth", type=int, default=101)
    parser.add_argument("--output-stride", type=int, default=8)
    return parser.parse_args(argv)


def build(args: argparse.Namespace):
    from pytest_gpu_pairs.workloads.train import build as build_workload

    overrides: dict[str, Any] = {"seed": args.seed, "image_size": args.image_size, "loader_workers": args.loader_workers,
                                 "backbone_depth": args.backbone_depth, "output_stride": args.output_stride}
    if args.learning_rate is not None:
        overrides["learning_rate"] = args.learning_rate
    return build_workload(MODEL, args.device, 1.0, **overrides)


def optimiser_steps(workload, batches, global_batch: int, count: int) -> list[float]:
    """``count`` steps of ``global_batch`` accumulated one-sample micro-batches; each step's mean loss."""
    losses = []
    workload.model.train()
    for _ in range(count):
        total = 0.0
        workload.optimizer.zero_grad(set_to_none=True)
        for _ in range(global_batch):
            loss = workload.loss(next(batches))
            workload.backward(loss, 1.0 / global_batch)
            total += float(loss.detach())
        workload.optimizer_step()
        losses.append(total / global_batch)
    return losses


def checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    workload = build(args)
    steps = math.ceil(args.samples / args.global_batch)
    losses = optimiser_steps(workload, workload.batches(), args.global_batch, steps)
    partial = args.out.with_suffix(".partial")
    torch.save({"model": workload.model.state_dict(), "optimizer": workload.optimizer.state_dict(),
                "scaler": workload.scaler.state_dict()}, partial)
    partial.replace(args.out)
    return {"steps": steps, "samples": steps * args.global_batch, "last_losses": losses[-10:]}


def branch(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if args.checkpoint is None:
        raise ValueError("a branch needs --checkpoint")
    workload = build(args)
    state = torch.load(args.checkpoint, map_location=workload.device, weights_only=True)
    workload.model.load_state_dict(state["model"])
    workload.optimizer.load_state_dict(state["optimizer"])
    workload.scaler.load_state_dict(state["scaler"])
    for group in workload.optimizer.param_groups:
        group["lr"] = workload.optimizer.defaults["lr"] = float(workload.hp["learning_rate"])
    batches, seen, curve, train = workload.batches(), 0, [], []
    every = args.eval_every or args.samples
    curve.append([0, workload.validate(args.eval_samples)])
    while seen < args.samples:
        steps = max(1, math.ceil(min(every, args.samples - seen) / args.global_batch))
        for loss in optimiser_steps(workload, batches, args.global_batch, steps):
            seen += args.global_batch
            train.append([seen, loss])
        curve.append([seen, workload.validate(args.eval_samples)])
    return {"curve": curve, "train": train, "learning_rate": float(workload.hp["learning_rate"])}


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    facts = checkpoint(args) if args.action == "checkpoint" else branch(args)
    if args.action == "branch":
        result = {"global_batch": args.global_batch, "seed": args.seed, "samples": args.samples,
                  "eval_samples": args.eval_samples, "image_size": args.image_size, "device": args.device,
                  "seconds": round(time.perf_counter() - started, 3), **facts}
        partial = args.out.with_suffix(".partial")
        partial.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        partial.replace(args.out)
    print(json.dumps({"action": args.action, "seconds": round(time.perf_counter() - started, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
