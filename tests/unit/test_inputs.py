"""The bounded readers every file the suite reads back goes through: special files refused before a
byte is read, sizes capped, JSON nesting and numbers checked, and what is written never a bare
``Infinity``. Property-based over the numbers a file can hold."""
from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.inputs import (
    MAX_JSON_DEPTH,
    JsonProblem,
    NotARegularFile,
    SettingsError,
    finite_or_none,
    is_finite_number,
    open_regular,
    parse_json,
    read_capped,
    read_json,
)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "result.json"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_without_waiting_for_a_writer(fifo):
    with pytest.raises(NotARegularFile, match="expected a regular file, got a FIFO"):
        open_regular(fifo)


def test_a_link_to_a_device_is_refused_before_it_is_read(tmp_path):
    link = tmp_path / "session.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(NotARegularFile, match="got a character device"):
        read_capped(link)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(NotARegularFile, match="got a folder"):
        read_capped(tmp_path)


def test_a_link_to_a_regular_file_is_read_and_capped(tmp_path):
    target = tmp_path / "big.json"
    target.write_bytes(b"x" * 100)
    (tmp_path / "link.json").symlink_to(target)
    assert read_capped(tmp_path / "link.json", limit=10) == b"x" * 11


def test_settings_in_a_fifo_are_one_line(fifo):
    with pytest.raises(SettingsError, match=r": \$: expected a readable JSON file \(expected a regular file, got a FIFO\)"):
        read_json(fifo)


@pytest.mark.parametrize("text, where, expected", [
    ('{"a": 1e400}', "$.a", "expected a finite number, got inf"),
    ('{"a": [NaN]}', "$.a[0]", "expected a finite number, got nan"),
    ('{"a": {"b": -Infinity}}', "$.a.b", "expected a finite number, got -inf"),
    ('{"a": ' + "1" * 400 + "}", "$.a", "an integer of 400 digits"),
    ('{"a": ' + "1" * 5000 + "}", "$", "expected valid JSON"),
    ("[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5), "$", f"nested at most {MAX_JSON_DEPTH} levels deep"),
    ("[" * 100_000 + "]" * 100_000, "$", f"nested at most {MAX_JSON_DEPTH} levels deep"),
])
def test_what_no_reader_can_use_is_named_by_its_path(text, where, expected):
    with pytest.raises(JsonProblem) as info:
        parse_json(text.encode())
    assert info.value.path.startswith(where) and expected in info.value.reason


numbers = (st.integers() | st.integers(min_value=10**300, max_value=10**1000) | st.floats(allow_nan=True)
           | st.just(2**1030) | st.just(-(2**1030)))


@given(numbers)
def test_a_number_is_usable_exactly_when_float_arithmetic_takes_it(value):
    usable = is_finite_number(value)
    try:
        as_float = float(value)
    except OverflowError:
        assert not usable
    else:
        assert usable == math.isfinite(as_float)


json_data = st.recursive(st.none() | st.booleans() | numbers | st.text(max_size=3),
                         lambda children: st.lists(children, max_size=3)
                         | st.dictionaries(st.text(max_size=3), children, max_size=3), max_leaves=10)


@given(json_data)
def test_what_is_written_is_valid_json_that_reads_back(data):
    clean, replaced = finite_or_none(data)
    text = json.dumps(clean, allow_nan=False)  # never a bare NaN or Infinity
    assert parse_json(text.encode()) == json.loads(text)
    assert all(not is_finite_number(value) for _, value in replaced)


@given(json_data)
def test_parsing_any_file_gives_data_or_one_problem(data):
    raw = json.dumps(data).encode()  # Python writes NaN, Infinity and huge integers as they are
    try:
        parsed = parse_json(raw)
    except JsonProblem as problem:
        assert "\n" not in str(problem) and problem.path.startswith("$")
    else:
        assert finite_or_none(parsed)[1] == []


@given(st.sampled_from(["foreground", "background"]), st.data())
def test_a_misspelt_required_key_is_named_with_the_key_it_meant(key, data):
    """One letter dropped, doubled or swapped: the error names the key written and the one meant,
    not only that a required key is missing."""
    from pytest_gpu_pairs.experiment.load import parse_experiment

    i = data.draw(st.integers(1, len(key) - 2))
    typo = data.draw(st.sampled_from([key[:i] + key[i + 1:], key[:i] + key[i] + key[i:],
                                      key[:i] + key[i + 1] + key[i] + key[i + 2:]]))
    if typo == key:
        return
    job = {"model": "mnist_ff"}
    pair = {"group": "g01", "foreground": job, "background": job}
    del pair[key]
    pair[typo] = job
    with pytest.raises(SettingsError) as caught:
        parse_experiment({"name": "my_experiment", "pairs": [pair]}, "my_experiment.json")
    assert str(caught.value) == (f"my_experiment.json: $.pairs[0].{typo}: unexpected key {typo!r}; did you mean "
                                 f"{key!r}? (a required key, missing here)")
