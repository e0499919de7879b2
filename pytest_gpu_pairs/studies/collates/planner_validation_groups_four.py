"""The group of four's summary: beside the plan made before it ran, the rule for groups beyond three.

    gpu-pairs study run planner_validation_groups_four
    gpu-pairs study collect planner_validation_groups_four --out reports/reference/planner_validation/groups/four
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="A group of four, predicted before it ran", study="planner_validation_groups_four")
