"""The contended pairs' summary: every pair the planner calls contended under MPS that no study held,
beside the plan made before they ran.

The random draw estimates what a user who picks a pair meets, and its pairs were mostly mildly
contended; these are all the pairs left where MPS's errors have been largest (a job that fills the
card beside another), taken whole rather than drawn, so the worst case is tested blind.

    gpu-pairs study run planner_validation_contended
    gpu-pairs study collect planner_validation_contended --out reports/reference/planner_validation/contended
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="Every pair contended under MPS, predicted blind",
                study="planner_validation_contended")
