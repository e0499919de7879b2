"""Counted parameters of built-in models, in a process of their own:
``python -m pytest_gpu_pairs.workloads.params mnist resnet20 ...`` prints ``{"mnist": 1199882, ...}``.

``gpu-pairs workloads --measure`` starts this rather than importing the training code, so the
command line stays torch-free like the rest of the harness; a model whose module is not
implemented, or that has no ``model`` to count, is given its catalogue figure.
"""
from __future__ import annotations

import json
import sys

from pytest_gpu_pairs.catalog import BUILTINS


def counted(name: str) -> int | None:
    from pytest_gpu_pairs.workloads.train import build, parameter_count

    workload = build(name, "cpu", 1e-9, epochs=1)
    return parameter_count(workload.model) if hasattr(workload, "model") else BUILTINS[name].param_count


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in BUILTINS]
    if unknown:
        print(f"not built-in workloads: {', '.join(unknown)}", file=sys.stderr)
        return 2
    print(json.dumps({name: counted(name) for name in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
