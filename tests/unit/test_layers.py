"""The package's layers, checked: every import points down the layer list or stays inside its own
layer, and no module imports itself back through others (no import circle, lazy imports included)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpu_pairs"

LAYERS = (  # top to bottom; a layer may import from the layers below it, never above
    ("cli",),
    ("plugin",),
    ("analysis",),
    ("run",),
    ("record",),
    ("monitor",),
    ("devices",),
    ("experiment",),
    ("compat",),
    ("workloads",),
    ("inputs", "catalog", "protocol", "patterns", "progress"),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every pytest_gpu_pairs module this file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; the package uses absolute imports")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pytest_gpu_pairs"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pytest_gpu_pairs"))
    return {m for m in found if m in MODULES and m != "pytest_gpu_pairs"}


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"{module} belongs to no layer: add its folder to LAYERS")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "pytest_gpu_pairs"))
def test_imports_point_down_or_stay_in_their_layer(module):
    upward = [imported for imported in imported_modules(MODULES[module]) if layer_of(imported) < layer_of(module)]
    assert not upward, f"{module} imports from a higher layer: {upward}"


def test_no_import_circle():
    graph = {m: imported_modules(p) for m, p in MODULES.items()}
    visiting, done, circles = set(), set(), []

    def visit(module: str, trail: list[str]) -> None:
        if module in done:
            return
        if module in visiting:
            circles.append(trail[trail.index(module):] + [module])
            return
        visiting.add(module)
        for target in sorted(graph[module]):
            if not _is_parent_package(target, module):
                visit(target, trail + [target])
        visiting.discard(module)
        done.add(module)

    for module in sorted(graph):
        visit(module, [module])
    assert not circles, f"import circles: {circles}"


def _is_parent_package(target: str, module: str) -> bool:
    """``import a.b`` runs ``a/__init__``: that edge is Python's, not the code's."""
    return module.startswith(target + ".")


def test_every_layer_folder_exists():
    tops = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if not p.name.startswith("_")}
    declared = {name for names in LAYERS for name in names}
    assert tops - {"__pycache__"} == declared
