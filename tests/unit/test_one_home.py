"""Small helpers a copy finder misses, each with one home: a second definition under another module
drifts (two ``relative_change`` once took their arguments in opposite orders, two texts of the same
fix said it differently). The package's own modules are read as source; nothing is imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpu_pairs"
JOB_SIDE = PACKAGE / "workloads"  # training code: it may not import the store, and writes its own files

HOMES = {  # name -> the one module that defines it
    "relative_change": "record/metrics.py",
    "measured_mean": "record/metrics.py",
    "clock": "planning/estimate.py",
    "PROGRESS_FIX": "record/checks.py",
    "machine_from_session": "record/store.py",
}
ALIASES = {"_clock": "clock", "_mean": "measured_mean", "_PROGRESS_FIX": "PROGRESS_FIX"}


def _definitions(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _sources() -> dict[str, Path]:
    return {str(p.relative_to(PACKAGE)): p for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("name, home", sorted(HOMES.items()))
def test_a_shared_helper_is_defined_once(name, home):
    where = sorted(rel for rel, path in _sources().items()
                   if {name, *(a for a, n in ALIASES.items() if n == name)} & _definitions(path))
    assert where == [home], f"{name} is defined in {where}; keep it in {home} and import it"


def _renames_a_temporary_file(path: Path) -> bool:
    """``tmp.replace(path)``, ``os.replace`` or ``tmp.rename``: a hand-made atomic write."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("replace", "rename"):
            target = node.func.value
            if isinstance(target, ast.Name) and (target.id == "os" or "tmp" in target.id):
                return True
    return False


def test_files_are_written_atomically_only_through_the_store():
    writers = sorted(rel for rel, path in _sources().items()
                     if not path.is_relative_to(JOB_SIDE) and _renames_a_temporary_file(path))
    assert writers == ["record/store.py"], f"hand-made atomic writes in {writers}: use record.store's writers"
