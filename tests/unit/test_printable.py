"""A job's text shown to a person: every control character escaped, nothing else changed."""
from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.inputs import printable


def harmful(char: str) -> bool:
    return char not in "\t\n" and unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in (
        "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_no_control_character_survives_and_plain_text_is_left_as_it_is(text):
    shown = printable(text)
    assert not any(harmful(c) for c in shown)
    if not any(harmful(c) or unicodedata.category(c) == "Cf" for c in text):
        assert shown == text


def test_terminal_escape_sequences_are_written_out():
    assert printable("\x1b]0;title\x07\x1b[2J\x9b1m\u202eoom\r") == r"\x1b]0;title\x07\x1b[2J\x9b1m\u202eoom\r"
    assert printable("tab\tand\nnewline") == "tab\tand\nnewline"
