"""The module tree of ``docs/architecture.md``, made from the code: every module of the package with
the first line of its own docstring, folders in the order of the layers.

    python -m tools.docs.architecture      # rewrites the tree in docs/architecture.md

``tests/unit/test_layers.py`` compares the page's tree with this one, so the page cannot fall
behind a module that moves, appears or changes its first line.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gpu_pairs"
PAGE = ROOT / "docs" / "architecture.md"
TOP_ORDER = ("cli", "studies", "plugin", "planning", "analysis", "run", "record", "monitor", "devices", "experiment", "compat",
             "workloads", "inputs", "catalog", "protocol", "patterns", "progress")
START = "<!-- module tree: python -m tools.docs.architecture -->"
NAME_WIDTH = 24


def first_line(path: Path) -> str:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else "(no docstring)"


def _entry(depth: int, name: str, text: str) -> str:
    indent = "  " * depth
    return f"{indent}{name:<{NAME_WIDTH - len(indent)}}  {text}".rstrip()


def _folder(path: Path, depth: int) -> list[str]:
    lines = [_entry(depth, f"{path.name}/", first_line(path / "__init__.py"))]
    modules = sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
    lines += [_entry(depth + 1, p.name, first_line(p)) for p in modules]
    for sub in sorted(p for p in path.iterdir() if (p / "__init__.py").is_file()):
        lines += _folder(sub, depth + 1)
    return lines


def _top_names() -> list[str]:
    found = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
             if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").is_file())}
    unknown = sorted(found - set(TOP_ORDER))
    if unknown:
        raise SystemExit(f"tools/docs/architecture.py: add {unknown} to TOP_ORDER")
    return [name for name in TOP_ORDER if name in found]


def module_tree() -> str:
    lines = ["pytest_gpu_pairs/"]
    for name in _top_names():
        path = PACKAGE / name
        lines += _folder(path, 1) if path.is_dir() else [_entry(1, f"{name}.py", first_line(path.with_suffix(".py")))]
    return "\n".join(lines)


_BLOCK = re.compile(re.escape(START) + r"\n\n```\n(.*?)^```\n", re.DOTALL | re.MULTILINE)


def tree_in(page: str) -> str:
    """The fenced block after the marker line on the page ('' where there is none)."""
    match = _BLOCK.search(page)
    return match.group(1).rstrip("\n") if match else ""


def rewrite(page: str) -> str:
    if not _BLOCK.search(page):
        raise SystemExit(f"{PAGE}: no line {START!r} followed by a fenced block to put the tree in")
    return _BLOCK.sub(lambda _: f"{START}\n\n```\n{module_tree()}\n```\n", page, count=1)


def main() -> int:
    PAGE.write_text(rewrite(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the module tree of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
