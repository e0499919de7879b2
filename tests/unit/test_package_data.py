"""A wheel holds every file the package reads at run time: setuptools packs only ``.py`` files
unless ``pyproject.toml`` names the rest, and a wheel without the planner's tables or the declared
studies installs cleanly and fails on first use (an editable install hides it)."""
from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gpu_pairs"


def _data_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
                  and "__pycache__" not in p.parts)


def test_every_data_file_of_the_package_is_named_in_its_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["pytest_gpu_pairs"]
    left_out = [str(p.relative_to(PACKAGE)) for p in _data_files()
                if not any(p.relative_to(PACKAGE).match(pattern) for pattern in patterns)]
    assert _data_files() and left_out == [], f"not in [tool.setuptools.package-data]: {left_out}"
