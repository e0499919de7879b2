"""The predecessor study's report: ``gpu-pairs report`` of the predecessor tool's ``raw_data.csv``
(1225 runs on an RTX 3080), made in this process by the product's own report builder, so the
committed report is what the analysis of this commit makes of that file.

    gpu-pairs study collect predecessor --out reports/reference/predecessor

The CSV is the repository's (``tests/data/predecessor/raw_data.csv``, named relative to the
checkout, as the report records its inputs by the name they were given).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.inputs import SettingsError

RAW_DATA = "tests/data/predecessor/raw_data.csv"
DEVICE = "NVIDIA GeForce RTX 3080"
TITLE = "Predecessor study: raw_data.csv (1225 rows, RTX 3080)"


def build(root: Path, folder: Path) -> Any:
    """The report of the checkout's ``raw_data.csv`` in ``folder`` (``report.build.Report``)."""
    from pytest_gpu_pairs.analysis.report.build import build_report  # pandas and matplotlib: the report extra

    if not (root / RAW_DATA).is_file():
        raise SettingsError(root / RAW_DATA, "$", "expected the predecessor's raw_data.csv of a checkout (--root)")
    out = folder.resolve()
    here = Path.cwd()
    os.chdir(root)  # the report names its input as given: the checkout's relative path
    try:
        return build_report([RAW_DATA], out, TITLE, DEVICE)
    finally:
        os.chdir(here)


def write(folder: Path, root: Path) -> str:
    report = build(root, folder)
    out = report.out_dir
    drawn = sum(1 for plot in report.plots if plot.path is not None)
    return f"{out / 'report.html'}: {len(report.analysis.runs)} runs, {drawn} plots, {len(report.analysis.tests)} tests\n"
