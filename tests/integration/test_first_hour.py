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
        "name": name, "defaults": {"phase_s": 0.5, "settle_s": 0.1, "warmup_s": 0.3, "min_efficiency": 0.0},
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
