"""The host study's summary: four pairs planned from busy fractions profiled on the host that ran them.

Beside each measured pair stand the plan made before any case from this host's profiles
(``plan.json``: ``gpu-pairs plan --out <profiled>``) and the package table's prediction of this commit,
which never reads the host: the gap between the two errors is what profiling on the host is worth.

    gpu-pairs study run planner_validation_host
    gpu-pairs study collect planner_validation_host --out reports/reference/planner_validation/host
"""
from __future__ import annotations

from functools import partial

from pytest_gpu_pairs.studies.collates import planner_validation_unseen

summarize = planner_validation_unseen.summarize
table = partial(planner_validation_unseen.table, title="Four pairs planned from this host's profiles",
                study="planner_validation_host")
