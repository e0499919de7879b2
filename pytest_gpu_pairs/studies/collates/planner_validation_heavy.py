"""The heavy pairs' summary: five pairs with a job that fills the card beside the plan made before they ran.

Under MPS a light job's kernels wait behind a card-filling job's (``planning.model``: the stretch
runs one way); the H200's reference pairs taught that, so these pairs, outside every reference set,
test it blind.

    gpu-pairs study run planner_validation_heavy
    gpu-pairs study collect planner_validation_heavy --out reports/reference/planner_validation/heavy
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="Pairs with a card-filling job, predicted blind",
                study="planner_validation_heavy")
