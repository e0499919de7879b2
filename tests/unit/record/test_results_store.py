"""result.json: atomic writes, complete vs interrupted, what --gpu-pairs-resume accepts; cool-down."""
import errno
import json
import os
import stat

import pytest
from support.helpers import pair

from pytest_gpu_pairs.experiment.cases import describe, expand
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.record import build as results
from pytest_gpu_pairs.record.store import StoreWriteError, load_result, save_incomplete, save_result, write_session
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.round import cool_down
from pytest_gpu_pairs.run.session import GpuPairsSession


def test_a_failed_write_leaves_the_previous_result_whole_and_no_temporary_file(tmp_path, monkeypatch):
    save_result(tmp_path, {"case_id": "c", "fg_slowdown": 1})

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        save_result(tmp_path, {"case_id": "c", "fg_slowdown": 2})
    assert json.loads((tmp_path / "result.json").read_text())["fg_slowdown"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_full_disk_is_one_line_naming_the_file_and_keeps_the_earlier_result(tmp_path, monkeypatch):
    save_result(tmp_path, {"case_id": "c", "fg_slowdown": 1})

    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(StoreWriteError) as info:
        save_result(tmp_path, {"case_id": "c", "fg_slowdown": 2})
    assert str(info.value) == (f"could not write {tmp_path / 'result.json'}: No space left on device; "
                               "the earlier file, if any, is unchanged")
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert json.loads((tmp_path / "result.json").read_text())["fg_slowdown"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_results_and_session_files_follow_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        save_result(tmp_path / "case", {"case_id": "c"})
        write_session(tmp_path, {"device": "cpu"})
    finally:
        os.umask(previous)
    for path in (tmp_path / "case" / "result.json", tmp_path / "session.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_only_a_complete_result_is_loaded(tmp_path):
    save_incomplete(tmp_path, {"case_id": "c"}, "interrupted by Ctrl-C or SIGTERM")
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["complete"] is False and saved["interrupted"].startswith("interrupted")
    assert load_result(tmp_path) is None
    save_result(tmp_path, {"case_id": "c", "complete": False, "failure": "OOM"})
    assert load_result(tmp_path)["complete"] is True  # a record cannot mark itself complete or not
    (tmp_path / "result.json").write_text('{"case_id": "c", "complete": tr')
    assert load_result(tmp_path) is None


def _session(tmp_path, resume=True, scale=0.5):
    options = GpuPairsOptions(settings=(), device="cpu", scale=scale, vram_budget_mb=None, min_efficiency=None,
                              sample_hz=10.0, out_dir=tmp_path / "out", resume=resume)
    return GpuPairsSession(options)


def _case(**fg_hp):
    return expand(parse_experiment({"name": "x", "pairs": [pair(fg_hp=fg_hp or None)]}, "s.json"))[0]


def _record(case, **extra):
    return json.loads(json.dumps({**describe(case), "scale": 0.5, "device": "cpu", "failure": None, **extra}))


def test_resume_takes_a_complete_result_of_the_same_measurement_only(tmp_path):
    case = _case(epochs=1)
    session = _session(tmp_path)
    assert session.resumable(case) is None
    save_result(session.case_dir(case), _record(case, failure="OOM: foreground ...",
                                                settings_digest=session.settings_digest(case)))
    assert session.resumable(case)["failure"] == "OOM: foreground ..."
    assert _session(tmp_path, resume=False).resumable(case) is None
    assert _session(tmp_path, scale=0.25).resumable(case) is None
    assert session.resumable(_case(epochs=2)) is None  # same id, other hyperparameters
    save_incomplete(session.case_dir(case), _record(case), "interrupted")
    assert session.resumable(case) is None


def test_a_rerun_empties_the_case_folder_so_logs_of_two_runs_never_mix(tmp_path):
    case = _case()
    session = _session(tmp_path)
    folder = session.case_dir(case)
    folder.mkdir(parents=True)
    (folder / "bg-runs.jsonl").write_text('{"run": 1}\n')
    assert list(session.folder.fresh_case_dir(case).iterdir()) == []


def test_cool_down_waits_only_for_what_is_left_of_it():
    slept = []
    assert cool_down(10.0, None, clock=lambda: 100.0, sleep=slept.append) == 0.0
    assert cool_down(0.0, 99.0, clock=lambda: 100.0, sleep=slept.append) == 0.0
    assert cool_down(10.0, 97.0, clock=lambda: 100.0, sleep=slept.append) == 7.0
    assert cool_down(10.0, 80.0, clock=lambda: 100.0, sleep=slept.append) == 0.0
    assert slept == [7.0]


def test_failed_record_says_why_and_leaves_every_figure_unmeasured():
    case = _case()

    class Env:
        device_name, scale = "cpu", 0.5

    record = results.failed_record(case, "solo baseline of mnist_ff failed: exited with code 1", Env())
    assert record["failure"].startswith("solo baseline") and record["fg_slowdown"] is None
    assert "could not be measured" in record["notes"]["fg_slowdown"]
