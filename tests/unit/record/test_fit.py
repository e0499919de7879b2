"""Whole-run fit profiles and the pair's memory verdict: arithmetic on what was measured."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.record.checks import CaseResult
from pytest_gpu_pairs.record.fit import (
    FIT_SOURCE,
    SAMPLED_SOURCE,
    FitProfile,
    FitStart,
    allocator_start,
    fit_record,
    nvml_phase,
    nvml_start,
    pair_fit,
)

CARD = 10240.0


def memory_events(start=7000.0, train=3000.0, evaluation=6000.0, checkpoint=1900.0, reserved=1200.0):
    return [{"phase": phase, "t": float(t), "peak_reserved_mb": mb, "peak_allocated_mb": mb * 0.8,
             "reserved_mb": reserved}
            for t, (phase, mb) in enumerate([("setup", 100.0), ("start", start), ("train", train),
                                            ("eval", evaluation), ("checkpoint", checkpoint)])]


def profile(workload="hrnet18", starts=None, basis="allocator", card=CARD) -> FitProfile:
    if starts is None:
        starts = [allocator_start(memory_events(), lambda t: 1970.0, 7526.0, 0, False, None, 30.0)] * 2
    return FitProfile(key=f"{workload}-k", workload=workload, builtin=True, device_name="H100", card_mb=card,
                      basis=basis, starts=starts)


def test_a_builtins_parts_add_the_context_nvml_shows_beyond_the_allocator_at_the_end():
    start = allocator_start(memory_events(), lambda t: 1970.0, 7526.0, 0, False, None, 30.0)
    assert start.context_mb == pytest.approx(770.0)  # 1970 seen by NVML - 1200 the allocator held
    assert start.phases["start"] == pytest.approx(7770.0) and start.phases["train"] == pytest.approx(3770.0)
    assert start.peak == ("start", pytest.approx(7770.0))


def test_the_need_is_the_most_of_any_start_and_names_its_part_and_the_steady_need_beside_it():
    low = allocator_start(memory_events(start=5000.0), lambda t: 1970.0, None, 0, False, None, 20.0)
    high = allocator_start(memory_events(start=9000.0), lambda t: 1970.0, None, 0, False, None, 20.0)
    fit = profile(starts=[low, high])
    assert fit.need_mb == pytest.approx(9770.0) and fit.peak_phase == "start"
    assert fit.steady_mb == pytest.approx(3770.0)
    assert fit.start_spread_mb == pytest.approx(3000.0)  # the low start peaked evaluating (6770)


def test_a_run_that_did_not_finish_gives_no_need_and_a_cpu_job_needs_nothing():
    cut = allocator_start(memory_events()[:3], lambda t: 1970.0, None, None, False, "timed out", 300.0)
    assert profile(starts=[cut]).need_mb is None
    cpu = FitProfile(key="b-k", workload="bug_localization", builtin=True, device_name="H100", basis="cpu")
    assert cpu.need_mb == 0.0 and cpu.steady_mb == 0.0 and not cpu.on_gpu


def test_without_nvml_seeing_the_process_the_context_is_unknown_and_so_is_the_need():
    start = allocator_start(memory_events(), lambda t: None, None, 0, False, None, 30.0)
    assert start.context_mb is None and profile(starts=[start]).need_mb is None


def test_a_command_workloads_readings_fall_in_the_parts_its_step_reports_mark():
    steps = [(10.0, 1), (11.0, 20), (12.0, 40), (20.0, 60), (21.0, 80)]  # a silence of 8 s: evaluating
    assert nvml_phase(5.0, steps, 3.0) == "start" and nvml_phase(11.5, steps, 3.0) == "train"
    assert nvml_phase(15.0, steps, 3.0) == "gap" and nvml_phase(30.0, steps, 3.0) == "end"
    start = nvml_start([(5.0, 900.0), (11.5, 2000.0), (15.0, 3500.0), (30.0, 1000.0)], steps, 3.0, 0, False, None, 40)
    assert start.phases == {"start": 900.0, "train": 2000.0, "gap": 3500.0, "end": 1000.0}
    assert start.peak == ("gap", 3500.0)


def test_the_pairs_need_adds_both_jobs_and_what_running_together_costs():
    small = profile("resnet20", [allocator_start(memory_events(1248, 1250, 2378, 2378, 1000), lambda t: 1758.0,
                                                 None, 0, False, None, 10.0)])
    figures = pair_fit(profile(), small, 12.0, 7500.0)
    assert figures["vram_fit_mb"] == pytest.approx(7770.0 + small.need_mb + 12.0)
    assert figures["vram_steady_mb"] == pytest.approx(3770.0 + small.steady_mb + 12.0)
    assert figures["vram_peak_phase"].startswith("fg hrnet18: start-up")
    assert figures["vram_verdict"] == "over budget" and figures["vram_card_mb"] == CARD


def test_a_job_out_of_memory_alone_on_the_card_is_no_fit_and_the_check_says_so():
    oom = profile(starts=[FitStart(oom=True, exit_code=3, failure="out of memory")])
    figures, notes = fit_record({"fg": oom, "bg": profile("resnet20")}, 0.0, 7500.0, None, 12.0)
    assert figures["vram_verdict"] == "no fit" and figures["vram_fit_mb"] is None
    assert figures["vram_budget_source"] == SAMPLED_SOURCE and "out of memory" in notes["vram_fit_mb"]


def test_the_budget_is_checked_against_the_whole_run_need_and_the_failure_names_its_part():
    from types import SimpleNamespace

    case = SimpleNamespace(id="g06", mode="concurrent", min_efficiency=1.0, vram_budget_mb=7500.0,
                           fg=SimpleNamespace(model="a", is_builtin=True), bg=SimpleNamespace(model="b", is_builtin=True))
    figures, _ = fit_record({"fg": profile(), "bg": profile("mnist_rnn")}, 0.0, 7500.0, None, 0.0)
    record = {"concurrency_efficiency": 1.9, "fg_slowdown": 1.05, "bg_progress_ratio": 0.95, "peak_vram_mb": 4000.0,
              "device": "H100", "failure": None, "oom": False, "notes": {}, **figures}
    problems = CaseResult(case, record, enforce_vram=True).problems()
    assert figures["vram_budget_source"] == FIT_SOURCE
    assert len(problems) == 1 and "whole-run VRAM need" in problems[0] and "start-up" in problems[0]
    sampled = {**record, "vram_budget_source": SAMPLED_SOURCE, "vram_fit_mb": None}
    assert CaseResult(case, sampled, enforce_vram=True).problems() == []  # 4000 MB sampled: within the budget


def test_without_a_gpu_the_reason_is_said_once_for_both_jobs():
    figures, notes = fit_record({"fg": None, "bg": None}, 0.0, 7500.0, "memory is measured on a GPU only (cpu)", 0.0)
    assert figures["vram_fit_mb"] is None and notes["vram_fit_mb"] == "memory is measured on a GPU only (cpu)"


MB = st.floats(0.0, 40000.0)


@given(MB, MB, MB, MB, st.floats(0.0, 500.0), st.floats(1.0, 80000.0))
def test_the_need_holds_the_steady_need_and_more_budget_never_turns_a_fit_away(start, train, evaluation, other,
                                                                             together, budget):
    fg = profile(starts=[allocator_start(memory_events(start, train, evaluation), lambda t: 1500.0, None, 0, False,
                                         None, 1.0)], card=None)
    bg = profile("b", [allocator_start(memory_events(other, other / 2), lambda t: 1500.0, None, 0, False, None, 1.0)],
                 card=None)
    figures = pair_fit(fg, bg, together, budget)
    assert figures["vram_fit_mb"] >= figures["vram_steady_mb"] and figures["vram_transient_mb"] >= 0
    if figures["vram_verdict"] == "fits":
        assert pair_fit(fg, bg, together, budget * 2)["vram_verdict"] == "fits"
    assert (figures["vram_verdict"] == "fits") == (figures["vram_fit_mb"] <= budget)
