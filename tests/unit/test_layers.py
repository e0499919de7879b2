"""The package's layers, checked: which layer may import which is stated edge by edge in
``MAY_IMPORT`` (an order alone let an analysis module import the run layer, a record module the
devices, and the settings layer the training code), every import in the code (lazy ones included)
is one of those edges or stays in its own layer, no module imports itself back through others,
and ``docs/architecture.md`` shows the same table and every module with its docstring's first line."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gpu_pairs"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

COMMON = ("inputs", "catalog", "protocol", "patterns", "progress")  # torch-free modules every side shares

MAY_IMPORT: dict[str, tuple[str, ...]] = {  # top to bottom; a layer imports these and its own modules, nothing else
    "cli": (),  # subcommands are wired by module name
    "studies": ("plugin", "planning", "analysis", "run", "record", "experiment", "compat", "catalog", "inputs",
                "protocol"),
    "plugin": ("planning", "analysis", "run", "record", "monitor", "devices", "experiment",
               "catalog", "inputs", "protocol"),
    "planning": ("run", "record", "experiment", "catalog", "inputs", "protocol"),
    "analysis": ("record", "compat", "catalog", "inputs"),
    "run": ("record", "monitor", "devices", "experiment", "catalog", "inputs", "patterns", "protocol"),
    "record": ("monitor", "experiment", "compat", "catalog", "inputs", "protocol"),
    "monitor": ("devices",),
    "devices": (),
    "experiment": ("compat", "catalog", "inputs", "patterns"),
    "compat": ("catalog", "inputs"),
    "workloads": ("catalog", "inputs", "protocol"),
    "progress": ("protocol",),
    "protocol": ("inputs",),
    "patterns": (),
    "catalog": (),
    "inputs": (),
}

FORBIDDEN_EXAMPLES = [  # slips the layers once let through, each of which this table refuses
    ("analysis", "run", "analysis reads stored records: it does not run, estimate or schedule cases"),
    ("analysis", "planning", "what a plan predicts lives above analysis, not in it"),
    ("record", "devices", "a measurement touches no device, and pinning policy is the run layer's"),
    ("experiment", "workloads", "settings and their listing never import training code"),
    ("run", "planning", "the run layer runs cases; estimates and schedules are planning's"),
    ("devices", "run", "device access holds no policy"),
    ("planning", "analysis", "planning reads records through the store, not through reports"),
    ("plugin", "studies", "a study runs pytest as a process of its own: the plugin knows nothing of studies"),
    ("record", "studies", "a study's collate reads records; no record depends on a study"),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


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


def layer_of(module: str) -> str:
    top = module.split(".")[1] if "." in module else ""
    if top not in MAY_IMPORT:
        raise AssertionError(f"{module} belongs to no layer: add its folder to MAY_IMPORT")
    return top


def allowed(importer: str, imported: str) -> bool:
    return importer == imported or imported in MAY_IMPORT[importer]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "pytest_gpu_pairs"))
def test_every_import_is_an_allowed_edge(module):
    layer = layer_of(module)
    refused = sorted(m for m in imported_modules(MODULES[module]) if not allowed(layer, layer_of(m)))
    assert not refused, (f"{module} ({layer}) imports {refused}; {layer} may import only "
                         f"{', '.join(MAY_IMPORT[layer]) or 'nothing outside itself'}")


@pytest.mark.parametrize("importer, imported, why", FORBIDDEN_EXAMPLES)
def test_the_table_refuses_the_slips_an_order_let_through(importer, imported, why):
    assert not allowed(importer, imported), why


def test_the_allowed_edges_have_no_circle_between_layers():
    order = list(MAY_IMPORT)
    for importer, imported in ((a, b) for a, targets in MAY_IMPORT.items() for b in targets):
        assert imported in MAY_IMPORT, f"{importer} may import {imported}, which is no layer"
        assert order.index(imported) > order.index(importer), f"{importer} -> {imported} points up the list"


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
    assert tops - {"__pycache__"} == set(MAY_IMPORT)


def _doc_edges() -> dict[str, tuple[str, ...]]:
    rows = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"\| `(\w+)` \| (.*) \|", line.strip())
        if match and match.group(1) in MAY_IMPORT and "`" in match.group(2) + "`":
            cells = match.group(2).split(" | ")[0]
            rows[match.group(1)] = tuple(re.findall(r"`(\w+)`", cells))
    return rows


def test_the_architecture_page_states_the_same_edges():
    assert _doc_edges() == MAY_IMPORT, "the 'may import' table of docs/architecture.md differs from MAY_IMPORT"


def test_the_architecture_page_lists_every_module_with_its_docstrings_first_line():
    from tools.docs.architecture import module_tree, tree_in

    assert tree_in(ARCHITECTURE.read_text(encoding="utf-8")) == module_tree(), \
        "docs/architecture.md's module tree differs from the code: python -m tools.docs.architecture rewrites it"
