"""The run-spread collation: whether runs of one pair agree within their intervals, and what three
sessions' agreement takes."""
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from tools.default_method import run_spread

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
    assert run_spread.range_within(limit, sd, n=2) == pytest.approx(exact, abs=1e-6)


def test_three_sessions_fall_within_the_limit_as_often_as_simulated():
    draws = stats.norm.rvs(size=(200_000, 3), random_state=1)
    simulated = ((draws.max(axis=1) - draws.min(axis=1)) <= 2.0).mean()
    assert run_spread.range_within(2.0, 1.0) == pytest.approx(simulated, abs=0.005)


def test_the_committed_probes_show_runs_differing_by_more_than_their_intervals(tmp_path):
    folders = sorted(p for p in PROBES.iterdir() if p.is_dir())
    assert run_spread.main([*map(str, folders), "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary == json.loads((PROBES / "summary.json").read_text())
    for machine in summary["machines"].values():
        assert machine["spread"]["p"] < 0.01 and machine["spread"]["between_run_sd"] > 0.02


def test_a_machine_with_one_run_is_one_line_naming_its_folder(tmp_path, capsys):
    folder = tmp_path / "one"
    folder.mkdir()
    source = next(p for p in PROBES.iterdir() if p.is_dir())
    shutil.copy(next(source.glob("run*.json")), folder / "run1.json")
    assert run_spread.main([str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(folder) in err and "at least two" in err
    assert not (tmp_path / "out").exists()
