"""The one way a study's summary is written: its collate's figures as ``summary.json`` through the
store's JSON writer (sorted keys, a number JSON cannot hold written as null) and its table as
markdown, both replaced whole or not at all. A study whose summary is other files (a report of the
product's own, a README made from the figures) has a collate with ``write(folder, root)``, which
writes them through the same store writers."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text
from pytest_gpu_pairs.studies.declaration import Study


def collate_module(study: Study) -> Any:
    """The module of the study's collate: ``summarize(folder, root) -> dict`` and ``table(summary) -> str``,
    or ``write(folder, root) -> str`` where the summary is files of its own."""
    if study.collate is None:
        raise ValueError(f"study {study.name} has no collate: {study.not_rebuilt}")
    return importlib.import_module(f"pytest_gpu_pairs.studies.collates.{study.collate}")


def collect(study: Study, folder: Path, root: Path) -> str:
    """The study's summary files rebuilt in ``folder`` from the results there; the table is returned."""
    module = collate_module(study)
    if hasattr(module, "write"):
        return str(module.write(folder, root))
    summary = module.summarize(folder, root)
    text = module.table(summary)
    json_name, table_name = study.summary_files
    atomic_write_json(folder / json_name, summary)
    atomic_write_text(folder / table_name, text)
    return text
