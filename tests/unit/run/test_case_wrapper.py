"""The one case wrapper, with a stand-in method part: a case that cannot run here is skipped before
its folder is touched; from then on every way out (the end, a failure the part decides, an error,
Ctrl-C) leaves one result.json and stops what the part started."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from pytest_gpu_pairs.experiment.cases import expand
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import save_result, typed
from pytest_gpu_pairs.run.case import CaseContext, CaseRun
from pytest_gpu_pairs.run.outdir import OutputFolder

[CASE] = expand(parse_experiment({"name": "w", "pairs": [
    {"group": "g01", "foreground": {"model": "resnet20"}, "background": {"model": "mnist"}}]}, "w.json"))


class Part:
    """A method's part that does what a test tells it to, and says what was called."""

    def __init__(self, run: CaseRun, measure):
        self.run, self._measure, self.calls = run, measure, []

    def prepare(self):
        self.calls.append("prepare")

    def before_start(self):
        self.calls.append("before_start")

    def measure(self) -> Record:
        self.calls.append("measure")
        return self._measure(self.run)

    def completed(self, record: Record) -> Record:
        self.calls.append("completed")
        return record.updated(benchmark_figure="the stand-in's")

    def close(self):
        self.calls.append("close")


def run_of(tmp_path, measure, concluded: list) -> CaseRun:
    folder = OutputFolder(tmp_path)

    def conclude(case, record, benchmark):
        concluded.append(record)
        save_result(folder.case_dir(case), record)
        return record

    context = CaseContext(folder, SimpleNamespace(environment=lambda: SimpleNamespace(device="cpu")), None, None,
                          None, conclude, [])
    return CaseRun(CASE, context, SimpleNamespace(), lambda run: Part(run, measure))


def record(**figures) -> Record:
    return typed({"case_id": CASE.id, "failure": None, **figures})


def stored(tmp_path) -> dict:
    return json.loads((tmp_path / CASE.id / "result.json").read_text())


def test_a_case_that_runs_to_its_end_is_concluded_once_with_its_timeline_and_the_parts_figures(tmp_path):
    concluded = []
    run = run_of(tmp_path, lambda run: record(fg_steps_per_s=10.0), concluded)
    (tmp_path / CASE.id).mkdir()
    (tmp_path / CASE.id / "stale.log").write_text("a run before")
    run()
    assert run.part.calls == ["prepare", "before_start", "measure", "close", "completed"]
    [done] = concluded
    assert done.benchmark_figure == "the stand-in's" and done.fg_steps_per_s == 10.0
    assert done.timeline["case_start_t"] <= done.timeline["case_end_t"]
    assert sorted(p.name for p in (tmp_path / CASE.id).iterdir()) == ["result.json"]  # the folder was emptied


def test_a_case_skipped_by_its_part_touches_no_folder(tmp_path):
    run = run_of(tmp_path, lambda run: record(), [])
    run.part.prepare = lambda: pytest.skip("no GPU here")
    with pytest.raises(pytest.skip.Exception):
        run()
    assert not (tmp_path / CASE.id).exists()


def test_a_failure_the_part_decides_ends_the_case_once_and_is_not_marked_interrupted(tmp_path):
    concluded = []

    def failing(run):
        run.fail(record(failure="solo baseline of mnist failed: exit 1"), "solo baseline of mnist failed: exit 1")

    with pytest.raises(pytest.fail.Exception, match=f"^{re.escape(CASE.id)}: solo baseline of mnist failed: exit 1$"):
        run_of(tmp_path, failing, concluded)()
    assert len(concluded) == 1 and stored(tmp_path)["failure"] == "solo baseline of mnist failed: exit 1"
    assert "interrupted" not in stored(tmp_path)


@pytest.mark.parametrize("error, says", [(KeyboardInterrupt(), "interrupted by Ctrl-C or SIGTERM"),
                                         (RuntimeError("boom"), "the harness stopped the case: RuntimeError: boom")])
def test_an_error_or_ctrl_c_mid_case_leaves_an_incomplete_record_and_stops_the_part(tmp_path, error, says):
    def broken(run):
        raise error

    run = run_of(tmp_path, broken, concluded := [])
    with pytest.raises(type(error)):
        run()
    assert concluded == [] and run.part.calls[-1] == "close"
    left = stored(tmp_path)
    assert left["complete"] is False and says in left["interrupted"] and left["case_id"] == CASE.id
