"""A study is run by ``gpu-pairs study run`` and collated over typed records: the collates read
records through the store (never ``result.json`` by hand), and ``tools/`` keeps no shell script
that starts pytest beyond those of studies whose steps are not declared yet, each named below with
its study, so the list can only shrink (an entry that no longer starts pytest fails). Every study's
script has moved, so the list is empty: a new script that starts pytest fails, and the pattern that
finds one is itself tested on the ways a script starts pytest."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools"
COLLATES = ROOT / "pytest_gpu_pairs" / "studies" / "collates"
STARTS_PYTEST = re.compile(r"-m pytest(?![\w])|(^|[\s;(])pytest\s", re.MULTILINE)

NOT_MOVED_YET: dict[str, str] = {  # shell script -> the study (or tool) whose steps `gpu-pairs study run` does not take yet
}
READS_RECORDS_BY_HAND = {  # tools modules that still read result.json themselves, with their study
}


def _relative(paths) -> set[str]:
    return {str(p.relative_to(TOOLS)) for p in paths}


@pytest.mark.parametrize("line", ["python3 -m pytest benchmarks -k t01", "timeout 55 python -m pytest $ARGS",
                                  "pytest benchmarks", "(cd x; pytest -q)", "  pytest --gpu-pairs-plan"])
def test_the_pattern_finds_a_script_that_starts_pytest(line):
    assert STARTS_PYTEST.search(f"set -e\n{line}\n")


@pytest.mark.parametrize("line", ["pip install pytest-xdist", "# runs gpu-pairs study run NAME", "python -m pytest_gpu_pairs.cli",
                                  "echo pytest_exit"])
def test_the_pattern_leaves_a_script_that_does_not(line):
    assert not STARTS_PYTEST.search(f"set -e\n{line}\n")


def test_no_shell_script_in_tools_starts_pytest_but_those_not_moved_yet():
    starting = _relative(p for p in TOOLS.rglob("*.sh") if STARTS_PYTEST.search(p.read_text(encoding="utf-8")))
    assert starting - set(NOT_MOVED_YET) == set(), "run it as a declared study: gpu-pairs study run NAME"
    assert set(NOT_MOVED_YET) - starting == set(), "no longer starts pytest: take it off NOT_MOVED_YET"


@pytest.mark.parametrize("path", sorted(COLLATES.glob("*.py")), ids=lambda p: p.name)
def test_a_study_collate_reads_records_through_the_store(path):
    text = path.read_text(encoding="utf-8")
    assert "result.json" not in text and "json.load" not in text and "open(" not in text, \
        f"{path.name}: read records with record.store (case_records, load_run, read_record), files with inputs.read_json"


def test_no_tool_reads_result_json_by_hand_but_those_not_moved_yet():
    reading = _relative(p for p in TOOLS.rglob("*.py") if "result.json" in p.read_text(encoding="utf-8"))
    assert reading - set(READS_RECORDS_BY_HAND) == set(), "read records through pytest_gpu_pairs.record.store"
    assert set(READS_RECORDS_BY_HAND) - reading == set(), "reads through the store now: take it off the list"
