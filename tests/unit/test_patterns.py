"""Patterns from settings run on RE2: catastrophic backtracking cannot happen, unsupported syntax
is refused in one line."""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.patterns import PatternError, compile_pattern


def test_a_backtracking_bomb_answers_at_once():
    assert compile_pattern(r"(a+)+$").search("a" * 40 + "!") is None


def test_named_groups_work():
    match = compile_pattern(r"\|\s*epoch\s+(?P<epoch>\d+)\s*\|\s*(?P<batch>\d+)/\s*(?P<batches>\d+) batches").search(
        "| epoch   1 |   200/ 2646 batches | lr 20.00 | ms/batch  6.09")
    assert match.groupdict() == {"epoch": "1", "batch": "200", "batches": "2646"}


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)b", "(unclosed"])
def test_unsupported_or_broken_syntax_is_one_line(pattern, capfd):
    with pytest.raises(PatternError) as info:
        compile_pattern(pattern)
    assert "\n" not in str(info.value) and "RE2 syntax" in str(info.value)
    assert capfd.readouterr().err == ""
