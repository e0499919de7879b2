"""The groups' summary: each measured group of three beside what the planner said of it, before and now.

No measured group teaches the planner: a group is predicted by its base model plus its pairs'
corrections, so each group the study measured (``timeslice/``, ``mps/``) is a test of that rule on a
group it never saw, set beside the plan made before any case ran (``plan.json``) and what the
planner of this commit predicts for the card it ran on.

    gpu-pairs study run planner_validation_groups       # on a GPU: plan.json, then the groups time-sliced and under MPS
    gpu-pairs study collect planner_validation_groups --out reports/reference/planner_validation/groups
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="Groups of three the planner never saw", study="planner_validation_groups")
