"""The faster-together probe's collate: a slowdown interval wholly below 1 reads as a speed-up, each
phase kind's SM clock is averaged over the rounds, and a folder not yet measured says so."""
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import DATA

from pytest_gpu_pairs.studies.collates.hp_study_faster_together import (
    link_states,
    pace_verdict,
    pair_phase_s,
    phase_clocks,
    summarize,
    table,
    verdict,
)


@given(st.floats(0.1, 3.0), st.floats(0.0, 1.0))
def test_the_verdict_follows_the_interval_alone(low, width):
    high = low + width
    said = verdict([low, high])
    assert said == ("faster" if high < 1 else "slower" if low > 1 else "no change")


@given(st.floats(0.1, 3.0), st.floats(0.0, 1.0))
def test_a_progress_interval_wholly_above_1_reads_as_faster(low, width):
    high = low + width
    assert pace_verdict([low, high]) == ("faster" if low > 1 else "slower" if high < 1 else "no change")


@pytest.mark.parametrize("ci", [None, [], [0.9], [None, 0.95], "0.9,0.95", [False, True]])
def test_an_interval_that_is_not_two_numbers_reads_as_nothing(ci):
    assert verdict(ci) is None and pace_verdict(ci) is None


def test_the_pair_phase_length_is_the_mean_over_the_rounds_pair_phases_alone():
    record = {"rounds": [{"phases": [{"name": "fg", "start": 0.0, "end": 9.0}, {"name": "pair", "start": 10.0, "end": 40.0}]},
                         {"phases": [{"name": "pair", "start": 50.0, "end": 82.0}, {"name": "pair", "start": True, "end": 3.0}]},
                         "not a round"]}
    assert pair_phase_s(record) == pytest.approx(31.0)
    assert pair_phase_s({}) is None


def test_each_phase_kinds_clock_is_the_mean_over_the_rounds_and_unreadable_phases_are_left_out():
    record = {"rounds": [{"phases": [{"name": "fg", "sm_clock_mhz": 1100.0}, {"name": "pair", "sm_clock_mhz": 1980.0}]},
                         {"phases": [{"name": "fg", "sm_clock_mhz": 1300.0}, {"name": "pair", "sm_clock_mhz": None},
                                     {"name": "bg", "sm_clock_mhz": True}, "not a phase"]},
                         "not a round"]}
    assert phase_clocks(record) == {"fg": pytest.approx(1200.0), "bg": None, "pair": pytest.approx(1980.0)}
    assert phase_clocks({}) == {"fg": None, "bg": None, "pair": None}


def test_a_folder_not_measured_yet_says_so_and_how_to_measure_it(tmp_path):
    summary = summarize(tmp_path, tmp_path)
    assert summary["measured"] is False
    assert "gpu-pairs study run hp_study_faster_together" in table(summary)


def test_a_results_folder_of_interleaved_cases_is_tabled_case_by_case(tmp_path):
    shutil.copytree(DATA / "cpu_first_run" / "session-1", tmp_path / "probe")
    summary = summarize(tmp_path, tmp_path)
    assert summary["measured"] and set(summary["cases"]) == {"g01-mnist_ff+resnet20-default-concurrent",
                                                              "g03-mnist+siamese-default-concurrent"}
    text = table(summary)
    assert "| g01 mnist_ff + resnet20 |" in text and "none (ran on the CPU" in text
    for case in summary["cases"].values():
        assert case["verdict"] == verdict(case["fg_slowdown_ci"])


def test_the_long_phase_variants_cases_join_the_table(tmp_path):
    shutil.copytree(DATA / "cpu_first_run" / "session-1", tmp_path / "long-phases")
    summary = summarize(tmp_path, tmp_path)
    assert summary["measured"] and len(summary["cases"]) == 2
    assert all(case["pair_phase_s"] is not None for case in summary["cases"].values())
    assert "Backgrounds that stepped faster beside the foreground, beyond the interval: " in table(summary)


def test_the_slowest_state_and_link_alone_and_together_are_read_from_the_phases():
    record = {"rounds": [{"phases": [{"name": "fg", "pstate_max": 2, "pcie_gen_min": 3},
                                     {"name": "bg", "pstate_max": 0, "pcie_gen_min": 5},
                                     {"name": "pair", "pstate_max": 0, "pcie_gen_min": 5}]},
                         {"phases": [{"name": "pair", "pstate_max": True, "pcie_gen_min": None}, "not a phase"]}]}
    assert link_states(record) == {"alone": {"pstate": 2, "pcie_gen": 3}, "together": {"pstate": 0, "pcie_gen": 5}}
    assert link_states({}) == {"alone": {"pstate": None, "pcie_gen": None},
                               "together": {"pstate": None, "pcie_gen": None}}
