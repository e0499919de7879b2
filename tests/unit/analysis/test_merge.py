"""`gpu-pairs merge` on real H100 records: disjoint shards join, and every refusal is one line with
nothing written (same case with different records, another scale or device, not a results
folder, an output folder in use)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.helpers import H100_DATA

from pytest_gpu_pairs.analysis.merge import MergeError, merge
from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.record.store import load_run

RUN = H100_DATA / "run"
G01, S01 = "g01-mnist_ff+resnet20-default-concurrent", "s01-mnist+resnet20-default-concurrent"


def shard(tmp_path: Path, name: str, *cases: str, session_changes=None, record_changes=None) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    session = {**json.loads((RUN / "session.json").read_text()), **(session_changes or {})}
    (folder / "session.json").write_text(json.dumps(session))
    for case in cases:
        shutil.copytree(RUN / case, folder / case)
        if record_changes:
            path = folder / case / "result.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), **record_changes}))
    return folder


def test_disjoint_shards_join_into_the_unsharded_run(tmp_path):
    merged = merge([shard(tmp_path, "a", G01), shard(tmp_path, "b", S01)], tmp_path / "out")
    assert sorted(merged.cases) == [G01, S01]
    assert load_run(tmp_path / "out").records == load_run(RUN).records
    assert json.loads((tmp_path / "out" / "session.json").read_text())["merged_from"] == [
        str(tmp_path / "a"), str(tmp_path / "b")]


def test_the_same_record_twice_is_kept_once(tmp_path):
    a = shard(tmp_path, "a", G01, S01)
    assert sorted(merge([a, a], tmp_path / "out").cases) == [G01, S01]


@pytest.mark.parametrize("make, message", [
    (lambda t: [shard(t, "a", G01), shard(t, "b", G01, record_changes={"fg_duration_s": 1.0})],
     f"case {G01} has different records in"),
    (lambda t: [shard(t, "a", G01), shard(t, "b", S01, session_changes={"scale": 0.5})],
     "scale 0.5 differs from"),
    (lambda t: [shard(t, "a", G01), shard(t, "b", S01, session_changes={"device": "cpu"})],
     "device 'cpu' differs from"),
    (lambda t: [shard(t, "a", G01), t / "missing"], "expected a gpu-pairs results folder"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path, capsys, make, message):
    folders = make(tmp_path)
    assert gpu_pairs(["merge", *map(str, folders), "-o", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: ") and message in out and out.count("\n") == 1
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.merging-*"))


def test_an_output_folder_with_files_in_it_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(MergeError, match="expected a new or empty folder"):
        merge([shard(tmp_path, "a", G01)], tmp_path / "out")
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_an_unreadable_record_is_one_line_naming_the_file(tmp_path, capsys):
    a = shard(tmp_path, "a", G01)
    (a / G01 / "result.json").write_text("{not json")
    assert gpu_pairs(["merge", str(a), "-o", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"error: {a / G01 / 'result.json'}: $: expected gpu-pairs result.json, got invalid JSON")
    assert not (tmp_path / "out").exists()


def test_a_link_in_a_case_folder_is_skipped_with_a_note_and_its_target_never_copied(tmp_path, capsys):
    a = shard(tmp_path, "a", G01, S01)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any results\n")
    (a / G01 / "stolen.txt").symlink_to(secret)
    (a / G01 / "zeros.log").symlink_to("/dev/zero")
    assert gpu_pairs(["merge", str(a), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert f"note: skipped {a / G01 / 'stolen.txt'}: a symbolic link" in out
    assert f"note: skipped {a / G01 / 'zeros.log'}: a symbolic link" in out
    copied = {p.name for p in (tmp_path / "out" / G01).iterdir()}
    assert "stolen.txt" not in copied and "zeros.log" not in copied and "result.json" in copied


def test_a_case_folder_or_record_that_is_a_link_is_skipped_with_a_note(tmp_path, capsys):
    a = shard(tmp_path, "a", G01)
    outside = shard(tmp_path, "outside", S01)
    (a / S01).symlink_to(outside / S01)
    merged = merge([a], tmp_path / "out")
    assert sorted(merged.cases) == [G01]
    assert merged.notes == [f"skipped {a / S01}: a symbolic link (merge copies no link and nothing it points to)"]


def test_a_fifo_in_a_case_folder_refuses_the_merge_in_one_line_writing_nothing(tmp_path, capsys):
    a = shard(tmp_path, "a", G01)
    os.mkfifo(a / G01 / "bg.log")
    assert gpu_pairs(["merge", str(a), "-o", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().out
    assert out == (f"error: {a / G01 / 'bg.log'}: expected regular files and folders in a case folder, got a FIFO, "
                   "device or socket; remove it and merge again\n")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.merging-*"))


@pytest.mark.parametrize("where", ["inside", "inside through a link"])
def test_an_output_folder_inside_an_input_is_refused(tmp_path, capsys, where):
    a = shard(tmp_path, "a", G01)
    target = a / "merged"
    if where == "inside through a link":
        (tmp_path / "link").symlink_to(a)
        target = tmp_path / "link" / "merged"
    assert gpu_pairs(["merge", str(a), "-o", str(target)]) == 2
    assert f"-o {target}: expected a folder outside the folders being merged, and it overlaps {a}" in \
        capsys.readouterr().out
    assert sorted(p.name for p in a.iterdir()) == [G01, "session.json"]
