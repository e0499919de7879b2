"""The feasibility study is made from the committed records: the default-method sessions judged by the
predecessor's rule (each miss with the job and phase that set its peak), every reading above 2 carrying
its record's flag or refused, the CPU background named from the catalog, and the interleaved history
kept, a reading above 2 never reaching its table as a figure."""
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.record.store import case_records
from pytest_gpu_pairs.studies.collates.feasibility_10g import cpu_jobs, success_rule, summarize
from pytest_gpu_pairs.studies.collates.feasibility_10g_history import markdown

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "reports/reference/feasibility_10g"
SUMMARY_FILES = ("summary.json", "table.md", "README.md")


@pytest.fixture(scope="module")
def summary():
    return summarize(FOLDER, ROOT)


def test_every_group_was_measured_in_three_default_method_sessions(summary):
    assert [g["group"] for g in summary["groups"]] == [f"g{i:02d}" for i in range(1, 13)]
    assert summary["sessions"] == ["default-1", "default-2", "default-3"]
    assert summary["sessions_per_group"] == 3


def test_the_success_rule_counts_groups_within_the_budget_in_every_session(summary):
    within = [g["group"] for g in summary["groups"] if g["within_budget_every_session"]]
    assert summary["success_rule_groups_within_budget"] == len(within) == 6
    assert summary["success_rule_share"] == 0.5 and summary["success_rule_met"] is False
    for g in summary["groups"]:
        needs = [row["need_mb"] for row in g["sessions"].values()]
        assert g["within_budget_every_session"] == all(need <= 7500 for need in needs)


def test_each_miss_names_the_job_and_phase_that_set_its_peak(summary):
    misses = {m["group"]: m for m in summary["success_rule_misses"]}
    assert sorted(misses) == ["g04", "g06", "g08", "g09", "g11", "g12"]
    assert (misses["g04"]["job"], misses["g04"]["phase"]) == ("bg pcb", "start")
    assert (misses["g06"]["job"], misses["g06"]["phase"]) == ("bg hrnet18", "start")
    g12 = misses["g12"]
    assert g12["need_mb"] == g12["steady_mb"] + g12["transient_mb"] and g12["over_by_mb"] == 30
    assert g12["steady_within_budget"] and not misses["g09"]["steady_within_budget"]


def test_every_reading_above_two_is_listed_with_its_records_flag(summary):
    above = summary["efficiency_above_bound"]
    readings = [(g["group"], s) for g in summary["groups"] for s, row in g["sessions"].items() if row["efficiency"] > 2]
    assert [(a["group"], a["session"]) for a in above] == readings and readings
    assert all(a["flag"].startswith("suspect") for a in above)


def test_the_cpu_background_is_decided_from_the_catalog(summary):
    assert summary["cpu_background_groups"] == ["g11"]
    records = {r.case_id[:3]: r for _, r in case_records(FOLDER / "default-1")[0]}
    assert cpu_jobs(records["g11"]) == ["bg bug_localization"]
    assert all(cpu_jobs(r) == [] for group, r in records.items() if group != "g11")


def test_between_sessions_every_two_intervals_overlap_and_the_spread_is_named(summary):
    assert summary["interval_covers_sessions"] is True
    spreads = {g["group"]: g["efficiency_spread"] for g in summary["groups"]}
    assert summary["efficiency_spread_max"] == max(spreads.values())
    assert summary["efficiency_spread_max_group"] == max(spreads, key=lambda g: spreads[g])


def test_the_sources_come_from_each_sessions_sources_json(summary):
    assert set(summary["sources"]) == {f"g{i:02d}" for i in range(1, 13)}
    assert all(set(by_session) == {"default-1", "default-2", "default-3"} for by_session in summary["sources"].values())


def test_the_readme_carries_table_md_and_the_answer():
    readme = (FOLDER / "README.md").read_text()
    assert (FOLDER / "table.md").read_text().rstrip("\n") in readme
    assert "6 of 12 groups stay within the 7500 MB budget" in readme
    assert "GPU-5781e816-1c5b-172d-99bc-11c7c6b7c5b4" in readme and "CPU background" in readme


def _group(within):
    return {"group": "g", "within_budget_every_session": within, "sessions": {}}


@given(st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=30))
def test_the_rule_is_met_only_when_unmeasured_groups_could_not_change_it(states):
    rule = success_rule([_group(s) for s in states])
    within, unknown, n = states.count(True), states.count(None), len(states)
    assert rule["success_rule_groups_within_budget"] == within
    if within / n >= 0.95:
        assert rule["success_rule_met"] is True
    elif (within + unknown) / n < 0.95:
        assert rule["success_rule_met"] is False
    else:
        assert rule["success_rule_met"] is None
    assert len(rule["success_rule_misses"]) == n - within


def _copy(tmp_path):
    copy = tmp_path / "feasibility_10g"
    shutil.copytree(FOLDER, copy, ignore=shutil.ignore_patterns(*SUMMARY_FILES))
    return copy


def test_a_reading_above_two_without_a_flag_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys):
    copy = _copy(tmp_path)
    path = next(copy.glob("default-1/g03-*/result.json"))
    record = json.loads(path.read_text())
    assert record["concurrency_efficiency"] > 2
    del record["notes"]["concurrency_efficiency"]
    path.write_text(json.dumps(record))
    assert main(["study", "collect", "feasibility_10g", "--out", str(copy), "--root", str(ROOT)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(path) in err and "$.notes.concurrency_efficiency" in err and "suspect flag" in err
    assert not any((copy / name).exists() for name in SUMMARY_FILES)


def test_a_sources_file_of_the_wrong_shape_is_refused_in_one_line(tmp_path, capsys):
    copy = _copy(tmp_path)
    (copy / "default-2" / "sources.json").write_text('{"g01": {"run": "x", "commit": 7, "gpu": "g", "date": "d"}}')
    assert main(["study", "collect", "feasibility_10g", "--out", str(copy), "--root", str(ROOT)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "default-2/sources.json" in err and "commit" in err
    assert not any((copy / name).exists() for name in SUMMARY_FILES)


def test_the_history_keeps_every_interleaved_group_and_its_budget_figures(summary):
    history = summary["history"]
    assert [g["group"] for g in history["groups"]] == [f"g{i:02d}" for i in range(1, 13)]
    assert history["measured"]["timeslice"] == 12
    rows = {g["group"]: g for g in history["groups"]}
    assert rows["g09"]["timeslice"]["within_budget"] is False
    assert rows["g12"]["timeslice"]["within_budget"] is True


def test_a_history_reading_above_two_is_not_printed_as_a_figure(summary):
    history = summary["history"]
    table = markdown(history)
    above = [g for g in history["groups"] if g["timeslice"]["efficiency"]["above_bound"]]
    assert above
    for group in above:
        row = next(line for line in table.splitlines() if line.startswith(f"| {group['group']} "))
        assert "about 2 (read" in row


def test_each_group_says_how_far_the_h100_moves_the_slowdown_the_rtx3080_measured(summary):
    groups = {g["group"]: g for g in summary["groups"]}
    swapped = groups["g01"]["against_rtx3080"]
    assert swapped["rtx3080"]["roles"] == "swapped" and swapped["job"] == "bg"
    rows = groups["g01"]["sessions"].values()
    ours = sum(r["bg_slowdown"] for r in rows) / len(rows)
    assert swapped["h100_slowdown"] == pytest.approx(ours)
    assert swapped["gap"] == pytest.approx(ours - swapped["rtx3080"]["fg_slowdown_median"])
    assert groups["g07"]["against_rtx3080"]["gap"] is None
    assert summary["rtx3080_groups_compared"] == sum(g["against_rtx3080"]["gap"] is not None for g in groups.values())
    assert "What the card emulates" in (FOLDER / "table.md").read_text()
