"""A case's checks: a check that applies and cannot be evaluated is not a pass."""
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.record.checks import CaseResult

SCRIPT = SimpleNamespace(model="script", is_builtin=False)
RESNET20 = SimpleNamespace(model="resnet20", is_builtin=True)
CASE = SimpleNamespace(id="c01-script+resnet20-default-concurrent", mode="concurrent", min_efficiency=1.0,
                       vram_budget_mb=7500.0, fg=SCRIPT, bg=RESNET20)


def record(**figures):
    base = {"fg_model": "script", "bg_model": "resnet20", "concurrency_efficiency": 1.2, "fg_slowdown": 1.5,
            "bg_progress_ratio": 0.53, "peak_vram_mb": 3000.0, "device": "NVIDIA H100 80GB HBM3",
            "fg_progress_source": "log", "bg_progress_source": "protocol", "failure": None, "oom": False,
            "notes": {}}
    return {**base, **figures}


def test_a_measured_case_within_its_limits_passes():
    assert CaseResult(CASE, record(), enforce_vram=True).problems() == []


@pytest.mark.parametrize("silent, named", [("bg", "resnet20"), ("fg", "script")])
def test_a_null_efficiency_fails_with_the_reason_and_names_the_job_to_give_a_progress_pattern(silent, named):
    why = "it needs bg_progress_ratio, which this round did not measure"
    r = record(concurrency_efficiency=None, bg_progress_ratio=None, **{f"{silent}_progress_source": None},
               notes={"concurrency_efficiency": why})
    [problem] = CaseResult(CASE, r).problems()
    assert "minimum efficiency 1.000 could not be checked" in problem and why in problem
    assert f"give {named} a progress_pattern" in problem


def test_a_null_efficiency_with_both_jobs_reporting_points_at_the_notes():
    [problem] = CaseResult(CASE, record(concurrency_efficiency=None)).problems()
    assert "see notes.concurrency_efficiency" in problem and "progress_pattern" not in problem


def test_where_the_minimum_does_not_apply_a_pair_that_measured_nothing_still_does_not_pass():
    why = "no round had two step reports of each job inside each of its phases"
    r = record(concurrency_efficiency=None, notes={"concurrency_efficiency": why})
    [problem] = CaseResult(CASE, r, enforce_efficiency=False).problems()
    assert problem.startswith("not measured: concurrency_efficiency is null") and why in problem
    assert "minimum" not in problem  # on the CPU the minimum is not enforced, and the message does not pretend
    solo = SimpleNamespace(**{**vars(CASE), "mode": "solo"})
    assert CaseResult(solo, record(concurrency_efficiency=None)).problems() == []


@given(efficiency=st.one_of(st.none(), st.floats(0.0, 3.0)), enforce_efficiency=st.booleans(),
       enforce_vram=st.booleans(), failure=st.sampled_from([None, "foreground script exited with code 1"]))
def test_a_concurrent_case_passes_only_with_a_measured_efficiency(efficiency, enforce_efficiency, enforce_vram, failure):
    """Whatever applies on the device, a pair case without an efficiency is never a pass."""
    r = record(concurrency_efficiency=efficiency, failure=failure)
    problems = CaseResult(CASE, r, enforce_efficiency=enforce_efficiency, enforce_vram=enforce_vram).problems()
    if efficiency is None or failure:
        assert problems
    if efficiency is None and not failure:
        assert len(problems) == 1 and "concurrency_efficiency is null" in problems[0]


def test_a_case_that_failed_says_so_once_not_also_that_its_figures_are_missing():
    r = record(concurrency_efficiency=None, peak_vram_mb=None, failure="foreground script exited with code 1")
    assert CaseResult(CASE, r, enforce_vram=True).problems() == ["foreground script exited with code 1"]


@pytest.mark.parametrize("device, fix", [("cpu", "memory is measured on a GPU only"),
                                         ("NVIDIA H100 80GB HBM3", "NVML must list the jobs' processes")])
def test_an_unmeasured_peak_vram_fails_where_the_budget_applies(device, fix):
    r = record(peak_vram_mb=None, device=device, notes={"peak_vram_mb": "NVML listed no process of this job"})
    [problem] = CaseResult(CASE, r, enforce_vram=True).problems()
    assert "VRAM budget of 7500 MB could not be checked" in problem and fix in problem
    assert "NVML listed no process" in problem
    assert CaseResult(CASE, r, enforce_vram=False).problems() == []


def test_records_written_before_the_progress_sources_existed_get_no_guessed_fix():
    r = record(concurrency_efficiency=None)
    del r["fg_progress_source"], r["bg_progress_source"]
    [problem] = CaseResult(CASE, r).problems()
    assert "progress_pattern" not in problem


def test_a_case_of_jobs_that_train_on_the_cpu_holds_its_budget_without_a_measurement():
    bug_localization = SimpleNamespace(model="bug_localization", is_builtin=True)
    solo = SimpleNamespace(**{**vars(CASE), "mode": "solo", "fg": bug_localization, "bg": None})
    assert CaseResult(solo, record(peak_vram_mb=None), enforce_vram=True).problems() == []
