"""The documentation agrees with the product where a test can tell: the options page lists exactly
the parser's pytest options, ini keys and ``gpu-pairs`` subcommands, and no page (the generated
result-keys page and the README included) loses a ``<placeholder>`` to the Markdown renderer,
which takes it for an HTML tag and drops it (``mkdocs build --strict`` does not notice)."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from support.helpers import REPO

from pytest_gpu_pairs.cli import SUBCOMMANDS
from pytest_gpu_pairs.plugin import options
from pytest_gpu_pairs.record.keys import markdown_table

DOCS = REPO / "docs"
OPTIONS_PAGE = DOCS / "options.md"
HTML_TAGS = {"a", "blockquote", "br", "code", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "img", "li", "ol",
             "p", "pre", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"}


class _Recorder:
    """Stands in for pytest's parser: the options and ini keys the plugin adds, by their first name."""

    def __init__(self):
        self.options: list[SimpleNamespace] = []
        self.ini: list[str] = []

    def getgroup(self, *_, **__):
        return self

    def addoption(self, *names, **kwargs):
        dest = kwargs.get("dest") or names[0].lstrip("-").replace("-", "_")
        self.options.append(SimpleNamespace(name=names[0], dest=dest, default=kwargs.get("default")))

    def addini(self, name, *_, **__):
        self.ini.append(name)


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a level-2 heading) up to the next level-2 heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def first_cells(text: str) -> list[str]:
    """The first cell of every table row, header and rule rows left out."""
    cells = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    return [cell for cell in cells if cell not in {"option", "ini key", "subcommand", "variable"} and cell.strip("-")]


def test_the_options_page_lists_exactly_the_parser_s_pytest_options():
    parser = _Recorder()
    options.add_options(parser)
    page = OPTIONS_PAGE.read_text(encoding="utf-8")
    documented = {re.match(r"`(--[a-z-]+)", cell).group(1) for cell in first_cells(section(page, "pytest options"))}
    assert documented == {option.name for option in parser.options}


def test_the_options_page_lists_exactly_the_ini_keys():
    parser = _Recorder()
    options.add_options(parser)
    page = OPTIONS_PAGE.read_text(encoding="utf-8")
    assert {cell.strip("`") for cell in first_cells(section(page, "ini options"))} == set(parser.ini)


def test_the_options_page_lists_exactly_the_gpu_pairs_subcommands():
    page = OPTIONS_PAGE.read_text(encoding="utf-8")
    rows = first_cells(section(page, "The `gpu-pairs` command"))
    assert {re.match(r"`gpu-pairs ([a-z-]+)", cell).group(1) for cell in rows} == set(SUBCOMMANDS)


def pages() -> dict[str, str]:
    """Every page as the site renders it (the result-keys page from its generator), and the README."""
    found = {path.name: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md"))}
    found["record-keys.md"] = markdown_table()
    found["README.md"] = (REPO / "README.md").read_text(encoding="utf-8")
    return found


def render(text: str) -> str:
    """Markdown to HTML with the site's extensions (mkdocs.yml)."""
    markdown = pytest.importorskip("markdown", reason="the docs extra renders the pages")
    yaml = pytest.importorskip("yaml")
    extensions = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["markdown_extensions"]
    names = [e if isinstance(e, str) else next(iter(e)) for e in extensions]
    configs = {next(iter(e)): next(iter(e.values())) for e in extensions if isinstance(e, dict)}
    return markdown.markdown(text, extensions=names, extension_configs=configs)


@pytest.mark.parametrize("name", sorted(pages()))
def test_no_placeholder_is_taken_for_an_html_tag(name):
    html = render(pages()[name])
    eaten = sorted({tag for tag in re.findall(r"</?([A-Za-z][\w-]*)", html) if tag.lower() not in HTML_TAGS})
    assert eaten == [], f"{name}: <{'>, <'.join(eaten)}> rendered as HTML tags; put them in backticks"


def test_the_check_finds_a_placeholder_outside_backticks():
    assert "group" in re.findall(r"</?([A-Za-z][\w-]*)", render("stable id: <group>-<fg>"))
