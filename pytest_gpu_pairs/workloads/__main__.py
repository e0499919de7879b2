"""Job entry point: ``python -m pytest_gpu_pairs.workloads <model> --device cuda --scale 1.0 --epochs 1 ...``.

``--data-root DIR`` (or ``GPU_PAIRS_DATA_ROOT``) points at real datasets in their standard
layouts (see ``realdata``); without it, or where a dataset is absent, the data is generated.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from pytest_gpu_pairs.catalog import BUILTINS, FRACTIONAL, builtin

_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "bool": lambda s: s.lower() in ("1", "true", "yes")}


def parse(argv: list[str]) -> tuple[str, str, float, dict]:
    head = argparse.ArgumentParser(prog="python -m pytest_gpu_pairs.workloads", add_help=False)
    head.add_argument("model", choices=sorted(BUILTINS))
    known, _ = head.parse_known_args(argv)
    info = builtin(known.model)
    parser = argparse.ArgumentParser(prog=f"python -m pytest_gpu_pairs.workloads {info.name}")
    parser.add_argument("model", choices=[info.name])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each epoch's steps to run")
    parser.add_argument("--data-root", default=None, help="folder with real datasets (default: $GPU_PAIRS_DATA_ROOT)")
    for name, spec in info.hyperparameters.items():
        kind = "float" if name in FRACTIONAL else spec.type
        parser.add_argument(f"--{name}", type=_TYPES[kind], default=spec.default)
    args = vars(parser.parse_args(argv))
    model, device, scale = args.pop("model"), args.pop("device"), args.pop("scale")
    data_root = args.pop("data_root")
    if data_root:
        os.environ["GPU_PAIRS_DATA_ROOT"] = data_root
    return model, device, scale, args


def main(argv: list[str] | None = None) -> int:
    model, device, scale, hparams = parse(sys.argv[1:] if argv is None else argv)
    info = builtin(model)
    if info.module is None:
        print(f"built-in workload {model!r} is not implemented in this version", file=sys.stderr)
        return 2
    if info.cpu_only:
        device = "cpu"
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from pytest_gpu_pairs.workloads.train import run

    workload = importlib.import_module(info.module).make(info, hparams, device, scale)
    return run(info, workload, device, scale)


if __name__ == "__main__":
    sys.exit(main())
