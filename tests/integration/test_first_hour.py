"""A newcomer's first hour on a small machine, in real pytest sessions (pytester): what
pytest-benchmark's table says of an interleaved case, which results a folder keeps, and which ids
two experiments' cases get. Nothing here asserts a duration."""
from __future__ import annotations

import json
import sys

from support.helpers import FAKE_JOB, SUITE, jobs_started_under


def _job(step_s: float) -> dict:
    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "100000", "--step-s", str(step_s)]}


def _settings(path, name="quick", group="p1"):
    path.write_text(json.dumps({
        "name": name, "defaults": {"phase_s": 0.3, "settle_s": 0.05, "warmup_s": 0.3, "min_efficiency": 0.0},
        "workloads": {"trainer": _job(0.01), "loader": _job(0.02)},
        "pairs": [{"group": group, "foreground": {"model": "trainer"}, "background": {"model": "loader"}}]}))
    return path


def _run(pytester, *args):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", pytester.path / "out",
                                         "-p", "no:cacheprovider", *args)


def test_pytest_benchmarks_table_names_the_round_figure_and_its_unit_and_drops_ops(pytester):
    result = _run(pytester, "--gpu-pairs-settings", _settings(pytester.path / "s.json"))
    result.assert_outcomes(passed=1)
    [header] = [line for line in result.stdout.lines if line.startswith("Name (")]
    assert header.startswith("Name (time in pair-s per solo-s)") and "OPS" not in header
    [row] = [line for line in result.stdout.lines if line.startswith("test_pair[")]
    assert float(row.split()[1].replace(",", "")) < 2.0  # 1 / a round's efficiency, unscaled: no "500.0 ms"
    result.stdout.fnmatch_lines(["pytest-benchmark's table above: one value per complete round of pair_s_per_solo_s*"])
    assert jobs_started_under(pytester.path / "out") == []


def test_asked_for_explicitly_the_ops_column_stays(pytester):
    result = _run(pytester, "--gpu-pairs-settings", _settings(pytester.path / "s.json"),
                  "--benchmark-columns", "mean,ops,rounds")
    result.assert_outcomes(passed=1)
    [header] = [line for line in result.stdout.lines if line.startswith("Name (")]
    assert "OPS" in header and "Mean" in header


def test_another_experiments_case_never_takes_the_suites_id_and_summary_csv_keeps_the_folder(pytester):
    """The project's suite (the ini's gpu_pairs_settings) ran into the results folder; then a
    settings file of one's own reuses its group: its case is named after its experiment, the
    suite's result stays, and summary.csv lists both, each with the session that measured it."""
    out = pytester.path / "out"
    _settings(pytester.path / "suite.json", name="suite")
    pytester.makeini("[pytest]\ngpu_pairs_settings = suite.json\n")
    first = _run(pytester)
    first.assert_outcomes(passed=1)
    suite_result = out / "p1-trainer+loader-default-concurrent" / "result.json"
    measured = suite_result.read_text()

    listed = pytester.runpytest_subprocess("--gpu-pairs-settings", "suite.json", "--gpu-pairs-settings",
                                           _settings(pytester.path / "mine.json", name="mine"), "--collect-only", "-q")
    listed.stdout.fnmatch_lines(["*test_pair[[]p1-trainer+loader-default-concurrent[]]",
                                 "*test_pair[[]mine.p1-trainer+loader-default-concurrent[]]"])
    mine = _run(pytester, "--gpu-pairs-settings", "mine.json", "-k", "p1")
    mine.assert_outcomes(passed=1)
    assert suite_result.read_text() == measured
    assert json.loads((out / "mine.p1-trainer+loader-default-concurrent" / "result.json").read_text())["failure"] is None
    rows = [line.split(",") for line in (out / "summary.csv").read_text().splitlines()]
    assert rows[0][0] == "case_id" and rows[0][-1] == "session"
    assert [(row[0], row[1], row[-1]) for row in rows[1:]] == [("mine.p1-trainer+loader-default-concurrent", "passed", "this"),
                                                              ("p1-trainer+loader-default-concurrent", "passed", "earlier")]
    assert jobs_started_under(out) == []
