"""The group of four's summary: beside the plan made before it ran, the rule for groups beyond three.

    gpu-pairs study run planner_validation_groups_four
    gpu-pairs study collect planner_validation_groups_four --out reports/reference/planner_validation/groups/four
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.studies.collates import planner_validation_unseen


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    return planner_validation_unseen.summarize(folder, root)


def table(summary: dict[str, Any]) -> str:
    return planner_validation_unseen.table(summary, "A group of four, predicted before it ran",
                                           "planner_validation_groups_four")
