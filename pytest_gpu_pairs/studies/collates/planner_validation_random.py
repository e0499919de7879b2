"""The drawn pairs' summary: six contended pairs drawn at random beside the plan made before they ran.

The other blind studies chose their pairs (where the planner's rules differ, where a host moved a
pair); these were drawn by a seed from every contended pair no H200 study holds, so their errors
estimate what a user who picks a pair meets.

    gpu-pairs study run planner_validation_random
    gpu-pairs study collect planner_validation_random --out reports/reference/planner_validation/random
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="Contended pairs drawn at random, predicted blind",
                study="planner_validation_random")
