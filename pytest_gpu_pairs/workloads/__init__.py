"""Built-in reference workloads and the progress protocol.

This package's ``__init__`` and ``catalog``/``progress`` modules import no torch: the harness
reads them. The training code (``train`` and the model modules) is imported only inside a job
process, through ``python -m pytest_gpu_pairs.workloads <model> ...``.
"""
from pytest_gpu_pairs.catalog import BUILTINS, BuiltinWorkload, builtin

__all__ = ["BUILTINS", "BuiltinWorkload", "builtin"]
