"""A study declaration is read like any settings file: a bad one is one line naming the file, the
JSON path and what was expected; a results folder it names never leaves the study's folder."""
from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.studies.declaration import Variant, all_studies, read_study

GOOD = {"name": "tiny", "about": "a test", "reference": "reports/reference/tiny", "settings": ["s.json"],
        "collate": "verdicts"}


def _declare(tmp_path, **changes):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**GOOD, **changes}))
    return path


@pytest.mark.parametrize("changes, where, expected", [
    ({"sesions": 2}, "$.sesions", "unexpected key"),
    ({"variants": [{"name": "a", "sessions": 2, "folder": "one"}]}, "$.variants[0]", "need '{n}'"),
    ({"variants": [{"name": "a", "folder": "../x"}]}, "$.variants[0].folder", "inside the study's output"),
    ({"variants": [{"name": "a"}, {"name": "a", "folder": "b"}]}, "$", "distinct names"),
    ({"collate": None}, "$", "not_rebuilt"),
    ({"variants": []}, "$", "at least one variant, or the steps"),
    ({"name": "other"}, "$.name", "expected the file's own name"),
])
def test_a_bad_declaration_is_one_line_naming_file_path_and_expectation(tmp_path, changes, where, expected):
    path = _declare(tmp_path, **changes)
    with pytest.raises(SettingsError) as raised:
        read_study(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: {where}") and expected in message and "\n" not in message


def test_a_declaration_that_is_not_json_is_one_line(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text("{not json")
    with pytest.raises(SettingsError, match=r"tiny\.json: \$"):
        read_study(path)


@given(st.text(alphabet="ab./{}n-_", min_size=1, max_size=12))
def test_an_accepted_folder_stays_inside_the_study_folder(folder):
    try:
        variant = Variant(name="v", folder=folder, sessions=2 if "{n}" in folder else 1)
    except ValidationError:
        return
    for name in variant.folders():
        path = PurePosixPath(name)
        assert not path.is_absolute() and ".." not in path.parts and name


def test_every_shipped_declaration_reads():
    assert len(all_studies()) >= 12


@pytest.mark.parametrize("argv, expected", [
    (["study", "run", "nope"], "expected a declared study"),
    (["study", "collect", "teardown"], "expected the teardown run's evidence"),
    (["study", "run", "predecessor"], "is not run by `gpu-pairs study run`"),
])
def test_the_command_refuses_in_one_line_with_exit_2(argv, expected, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()
