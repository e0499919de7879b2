"""The predictions study is made from the committed records: each of the analysis's predictions and
stress tests with its measurement over the sessions and a verdict by the judge's rules, the three-job
group measured as three jobs, a reading above the job count refused without its record's flag, and the
predecessor's own RTX 3080 slowdown beside a pair it ran."""
import json
import shutil
from pathlib import Path

import pytest

from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.studies.collates.predecessor_predictions import summarize
from pytest_gpu_pairs.studies.expectations import CONFIRMED, REFUTED, judge_range

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "reports/reference/predecessor_predictions"
SUMMARY_FILES = ("summary.json", "table.md", "README.md")


@pytest.fixture(scope="module")
def summary():
    return summarize(FOLDER, ROOT)


def test_every_prediction_and_stress_test_has_a_measurement_and_a_verdict(summary):
    names = [p["name"] for p in summary["predictions"]]
    assert sorted(names) == sorted([f"predicted pair {i}" for i in (1, 2, 3)] + [f"stress test {i}" for i in (1, 2, 3)])
    for p in summary["predictions"]:
        assert p["n_sessions"] >= 2 and p["verdict"] in (CONFIRMED, REFUTED, "not decided")
        assert set(p["parts"]) == set(p["predicted"])


def test_the_verdict_follows_from_the_sessions_figures(summary):
    groups = {g["group"]: g for g in summary["groups"]}
    for p in summary["predictions"]:
        g = groups[p["group"]]
        if "efficiency" in p["predicted"]:
            expected = judge_range(g["efficiency"], tuple(g["efficiency_ci95"]), tuple(p["predicted"]["efficiency"]))
            assert p["parts"]["efficiency"] == expected
        lows = [r["efficiency_ci95"][0] for r in g["sessions"].values()]
        assert g["efficiency_ci95"][0] == min(lows)


def test_the_three_job_group_ran_three_jobs_and_its_efficiency_is_bounded_by_three(summary):
    three = next(g for g in summary["groups"] if len(g["jobs"]) == 3)
    assert three["jobs"] == ["resnet20", "resnet32", "mnist"]
    for row in three["sessions"].values():
        assert row["n_jobs"] == 3 and 1.0 < row["efficiency"] <= 3.0 and row["efficiency_bound"] <= 3.0
        assert row["need_mb"] is not None and row["vram_verdict"] is not None


def test_a_pair_the_predecessor_ran_carries_its_rtx3080_slowdown(summary):
    groups = {g["group"]: g for g in summary["groups"]}
    assert groups["pp1"]["rtx3080"]["n"] >= 1
    assert groups["st1"]["rtx3080"]["roles"] == "swapped"
    assert groups["pp3"]["rtx3080"] is None


def test_a_reading_above_the_job_count_without_a_flag_is_refused_in_one_line(tmp_path, capsys):
    copy = tmp_path / "predecessor_predictions"
    shutil.copytree(FOLDER, copy, ignore=shutil.ignore_patterns(*SUMMARY_FILES))
    path = next(copy.glob("session-1/pp1-*/result.json"))
    record = json.loads(path.read_text())
    assert record["concurrency_efficiency"] > 2
    del record["notes"]["concurrency_efficiency"]
    path.write_text(json.dumps(record))
    assert main(["study", "collect", "predecessor_predictions", "--out", str(copy), "--root", str(ROOT)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "suspect flag" in err
    assert not any((copy / name).exists() for name in SUMMARY_FILES)


def test_the_readme_holds_the_table_and_says_whose_compute_it_is():
    readme = (FOLDER / "README.md").read_text()
    assert (FOLDER / "table.md").read_text().rstrip("\n") in readme
    assert "not the RTX 3080's" in readme and "What this does not cover" in readme
