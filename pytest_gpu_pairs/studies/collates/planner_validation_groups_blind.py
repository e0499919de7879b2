"""The blind groups' summary: four more groups of three beside the plan made before they ran.

The first four groups (``planner_validation_groups``) prompted sharing the card's capacity max-min
fairly; these four were predicted by that rule before any case ran, so they test it blind.

    gpu-pairs study run planner_validation_groups_blind
    gpu-pairs study collect planner_validation_groups_blind --out reports/reference/planner_validation/groups/blind
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="Four more groups of three, predicted blind", study="planner_validation_groups_blind")
