"""The blind groups' summary: four more groups of three beside the plan made before they ran.

The first four groups (``planner_validation_groups``) prompted sharing the card's capacity max-min
fairly; these four were predicted by that rule before any case ran, so they test it blind.

    gpu-pairs study run planner_validation_groups_blind
    gpu-pairs study collect planner_validation_groups_blind --out reports/reference/planner_validation/groups/blind
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.studies.collates import planner_validation_unseen


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    return planner_validation_unseen.summarize(folder, root)


def table(summary: dict[str, Any]) -> str:
    return planner_validation_unseen.table(summary, "Four more groups of three, predicted blind",
                                           "planner_validation_groups_blind")
