"""Job code: the built-in reference workloads, run inside a training process.

Everything here runs in a job's own process (``python -m pytest_gpu_pairs.workloads <model> ...``)
and may import torch; the harness never imports it. What the harness knows about the built-ins
(names, hyperparameters, epoch lengths) is in ``pytest_gpu_pairs.catalog``.
"""
