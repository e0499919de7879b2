"""The run-spread study's collate: whether runs of one pair agree within their intervals, what three
sessions' agreement takes, and a runner's folder read as the committed one is."""
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from pytest_gpu_pairs.record.store import StoreError
from pytest_gpu_pairs.studies.collates import default_method_run_spread as run_spread

ROOT = Path(__file__).resolve().parents[3]
PROBES = ROOT / "reports" / "reference" / "default_method" / "run-spread"


def runs(means, errors):
    return [{"efficiency": m, "standard_error": e} for m, e in zip(means, errors)]


@given(st.lists(st.floats(1.0, 2.0), min_size=2, max_size=10), st.floats(0.001, 0.1))
def test_runs_that_agree_exactly_leave_nothing_between_them(values, error):
    same = runs([values[0]] * len(values), [error] * len(values))
    spread = run_spread.heterogeneity(same)
    assert spread["q"] == pytest.approx(0.0, abs=1e-9) and spread["between_run_sd"] == 0.0 and spread["p"] == pytest.approx(1.0)


@given(st.lists(st.floats(1.0, 2.0), min_size=3, max_size=10, unique=True), st.floats(0.001, 0.05))
def test_the_between_run_part_is_what_the_intervals_leave_of_the_spread(means, error):
    spread = run_spread.heterogeneity(runs(means, [error] * len(means)))
    assert spread["between_run_sd"] <= spread["sd_of_run_means"] + 1e-12
    if spread["q"] <= spread["df"]:
        assert spread["between_run_sd"] == 0.0
    else:  # equal errors: the method of moments gives the spread less the error, exactly
        assert spread["between_run_sd"] ** 2 == pytest.approx(spread["sd_of_run_means"] ** 2 - error ** 2, rel=1e-9)


@given(st.floats(0.001, 0.2), st.floats(0.005, 0.1))
def test_two_sessions_fall_within_the_limit_as_their_difference_does(limit, sd):
    exact = 2.0 * stats.norm.cdf(limit / (sd * math.sqrt(2.0))) - 1.0
    # numerical integration over the real line: good to about 1e-5 where the limit is small against sd
    assert run_spread.range_within(limit, sd, n=2) == pytest.approx(exact, abs=1e-5)


def test_three_sessions_fall_within_the_limit_as_often_as_simulated():
    draws = stats.norm.rvs(size=(200_000, 3), random_state=1)
    simulated = ((draws.max(axis=1) - draws.min(axis=1)) <= 2.0).mean()
    assert run_spread.range_within(2.0, 1.0) == pytest.approx(simulated, abs=0.005)


@pytest.fixture(scope="module")
def probes_summary():
    return run_spread.summarize(PROBES, ROOT)


def test_the_committed_probes_show_runs_differing_by_more_than_their_intervals(probes_summary):
    summary = probes_summary
    assert list(summary["machines"]) == ["h100-ed8b9922", "h100-233f5a6c"]  # in the order they were measured
    for machine in summary["machines"].values():
        assert machine["spread"]["p"] < 0.01 and machine["spread"]["between_run_sd"] > 0.02


def test_a_runners_results_folders_are_read_as_the_benchmark_files_are(tmp_path, probes_summary):
    """``gpu-pairs study run`` leaves each run's results folder, no gpu.txt: same figures, the card
    from the records."""
    machine_folder = PROBES / "h100-ed8b9922"
    runner = tmp_path / "phases"
    for bench in sorted(machine_folder.glob("run*.json")):
        record = json.loads(bench.read_text())["benchmarks"][0]["extra_info"]
        case = runner / bench.stem / record["case_id"]
        case.mkdir(parents=True)
        (case / "result.json").write_text(json.dumps(record))
    (tmp_path / "logs").mkdir()
    ran = run_spread.summarize(tmp_path, ROOT)["machines"]["phases"]
    kept = probes_summary["machines"]["h100-ed8b9922"]
    assert ran["runs"] == kept["runs"] and ran["spread"] == kept["spread"]


def test_a_machine_with_one_run_is_one_line_naming_its_folder(tmp_path):
    folder = tmp_path / "one"
    folder.mkdir()
    source = next(p for p in PROBES.iterdir() if p.is_dir())
    shutil.copy(next(source.glob("run*.json")), folder / "run1.json")
    with pytest.raises(StoreError, match="at least two") as raised:
        run_spread.summarize(tmp_path, ROOT)
    assert len(str(raised.value).splitlines()) == 1 and str(folder) in str(raised.value)


def test_a_folder_without_runs_is_one_line_naming_it(tmp_path):
    with pytest.raises(StoreError, match="not a run-spread study"):
        run_spread.summarize(tmp_path, ROOT)
