"""The per-case cost estimate: its arithmetic from the profiles, baselines charged once, earlier
results preferred, the stated default, the interleaved cap, and the packaged profile table kept in
step with the committed references."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import H100_DATA, pair

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import Overrides, expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.planning.estimate import (
    DEFAULT,
    DEFAULT_JOB_S,
    EARLIER,
    PROFILE,
    Estimate,
    estimate_cases,
    job_cost,
    long_cases,
    phases,
    play_rounds,
    seedless,
    standalone,
)
from pytest_gpu_pairs.planning.profiles import packaged
from pytest_gpu_pairs.run.options import GpuPairsOptions

CASE_ID = "g01-mnist_ff+resnet20-default-concurrent"


def options(tmp_path: Path, **changes) -> GpuPairsOptions:
    return GpuPairsOptions(settings=(), device="cuda", scale=changes.pop("scale", 1.0), vram_budget_mb=None,
                           min_efficiency=None, sample_hz=10.0, out_dir=tmp_path / "out", **changes)


def cases(*pairs, overrides: Overrides = Overrides(), **defaults):
    return expand_all([parse_experiment({"name": "t", "defaults": defaults, "pairs": list(pairs)}, "t.json")],
                      overrides)


def test_a_profiled_job_costs_startup_steps_times_step_time_and_finish():
    job = cases(pair())[0].fg
    row = packaged().get("mnist_ff")
    cost = job_cost(job, "cuda", 0.5)
    steps = math.ceil(1 * BUILTINS["mnist_ff"].steps_per_epoch(32) * 0.5)
    assert cost.basis == PROFILE
    assert cost.train_s == steps * row.step_time_s
    assert cost.total_s == row.startup_s + steps * row.step_time_s + row.finish_s


def test_a_larger_batch_takes_proportionally_longer_per_step():
    small = cases(pair(fg_hp={"epochs": 1, "batch_size": 32}))[0].fg
    large = cases(pair(fg_hp={"epochs": 1, "batch_size": 64}))[0].fg
    steps_small = BUILTINS["mnist_ff"].steps_per_epoch(32)
    steps_large = BUILTINS["mnist_ff"].steps_per_epoch(64)
    per_step = packaged().get("mnist_ff").step_time_s
    assert job_cost(large, "cuda", 1.0).train_s == steps_large * per_step * 2
    assert job_cost(small, "cuda", 1.0).train_s == steps_small * per_step


def test_without_a_profile_for_the_device_the_stated_default_is_used(tmp_path):
    job = cases(pair())[0].fg
    assert job_cost(job, "cpu", 1.0).basis == DEFAULT and job_cost(job, "cpu", 1.0).total_s == DEFAULT_JOB_S
    estimate = estimate_cases(cases(pair(), method="epoch"), options(tmp_path), "cpu")[0]
    assert estimate.basis == DEFAULT and f"{DEFAULT_JOB_S:g} s per job run assumed" in estimate.detail
    assert estimate.seconds == 3 * DEFAULT_JOB_S  # two solo baselines and the round


def test_a_solo_baseline_is_charged_once_to_the_first_case_that_needs_it(tmp_path):
    selected = cases(pair("g01", "mnist_ff", "resnet20"), pair("g02", "mnist", "resnet20"), method="epoch")
    first, second = estimate_cases(selected, options(tmp_path), "cuda")
    assert len(first.solo_jobs) == 2 and [j.model for j in second.solo_jobs] == ["mnist"]
    alone = standalone(selected[1], options(tmp_path), "cuda")
    assert len(alone.solo_jobs) == 2 and alone.seconds > second.seconds


@pytest.mark.parametrize("alone_s", [0.0, 20.0])
def test_a_kept_running_background_is_charged_its_reference_runs_and_its_windows_alone(tmp_path, alone_s):
    """Its solo reference: one start and each of its runs; each shared run: its first run ended, then
    the two windows alone and the settling between the foreground's exit and the second."""
    from pytest_gpu_pairs.experiment.cases import KEPT_SOLO_RUNS
    from pytest_gpu_pairs.run.round import ALONE_SETTLE_S

    [kept] = cases(pair(), method="epoch", keep_background=True, background_alone_s=alone_s)
    [plain] = cases(pair(), method="epoch")
    assert kept.bg.runs == KEPT_SOLO_RUNS
    bg = job_cost(kept.bg, "cpu", 1.0)
    extra = (KEPT_SOLO_RUNS - 1) * (bg.train_s + bg.finish_s)
    windows = bg.train_s + bg.finish_s + 2 * alone_s + ALONE_SETTLE_S if alone_s else 0.0
    assert estimate_cases([kept], options(tmp_path), "cpu")[0].seconds == pytest.approx(
        estimate_cases([plain], options(tmp_path), "cpu")[0].seconds + extra + windows)


def _phase_s(case, device="cuda"):
    jobs = (job_cost(case.fg, device, 1.0), job_cost(case.bg, device, 1.0))
    phase, settle = phases(case, jobs)
    return max(j.startup_s for j in jobs), phase + settle


def test_an_interleaved_case_always_completes_its_first_round_and_stops_at_the_next_check_past_its_cap(tmp_path):
    case = cases(pair(), overrides=Overrides(max_case_s=100.0), method="interleaved", phase_s=600)[0]
    startup, phase = _phase_s(case)
    estimate = estimate_cases([case], options(tmp_path), "cuda")[0]
    assert estimate.seconds - _fit_s(estimate) == pytest.approx(startup + case.warmup_s + 5 * phase + case.cool_down_s)
    assert "stopped by the 100 s cap" in estimate.detail and "1 rounds" in estimate.detail


def test_an_interleaved_case_on_the_cpu_counts_three_rounds(tmp_path):
    case = cases(pair(), method="interleaved")[0]
    quick = estimate_cases([case], options(tmp_path), "cpu")[0]
    assert "3 rounds" in quick.detail and "fixed" in quick.detail and quick.solo_jobs == ()
    assert quick.basis == DEFAULT and "gpu-pairs profile" in quick.detail


def test_an_interleaved_case_on_a_gpu_costs_its_cap_whatever_its_target(tmp_path):
    """The runner spreads a GPU case's rounds over the pair's starts until the cap: the target, which
    the interval over starts cannot reach within it, does not shorten the estimate."""
    for precision in (0.02, 0.2):
        case = cases(pair(), overrides=Overrides(precision=precision, max_case_s=90.0), method="interleaved")[0]
        _, phase = _phase_s(case)
        estimate = estimate_cases([case], options(tmp_path), "cuda")[0]
        assert 90.0 - 3 * phase < estimate.seconds - _fit_s(estimate) <= 90.0
        assert "90 s cap" in estimate.detail and "starts" in estimate.detail


def test_a_gpu_case_first_measures_the_fit_profiles_the_folder_lacks_each_once(tmp_path):
    first, second = cases(pair(), pair(group="g02", bg="resnet32"), overrides=Overrides(max_case_s=90.0),
                          method="interleaved")
    estimates = estimate_cases([first, second], options(tmp_path), "cuda")
    table = packaged()
    assert _fit_s(estimates[0]) == pytest.approx(table.get("mnist_ff").fit_s + table.get("resnet20").fit_s)
    assert "fit profiles of mnist_ff and resnet20" in estimates[0].detail
    assert "fit profiles of resnet32" in estimates[1].detail and "mnist_ff" not in estimates[1].detail.split("fit")[1]
    cpu = estimate_cases([first], options(tmp_path), "cpu")[0]
    assert "fit profiles" not in cpu.detail


def _fit_s(estimate) -> float:
    found = re.search(r"fit profiles of .* first \(([0-9.]+) s\)", estimate.detail)
    return float(found.group(1)) if found else 0.0


@given(st.floats(0.0, 100.0), st.floats(0.05, 50.0), st.none() | st.integers(1, 80), st.none() | st.integers(1, 80),
       st.floats(1.0, 400.0))
def test_played_rounds_never_start_a_round_past_the_cap_and_only_the_first_may_run_over(start, phase, target, most,
                                                                                         cap):
    played = play_rounds(start, phase, target, most, cap)
    assert played.count >= 1
    assert played.seconds == pytest.approx(start + (3 * played.count + 2) * phase)
    if played.count >= 2:
        assert played.seconds <= cap + 1e-6  # the check before the last round passed: it ended within the cap
    if played.count < min(n for n in (target, most, math.inf) if n is not None):
        assert played.seconds + played.round_s > cap


def _earlier_record(out: Path, scale: float) -> None:
    record = json.loads((H100_DATA / "run" / CASE_ID / "result.json").read_text())
    t0 = 1000.0
    record.update(complete=True, scale=scale, timeline={
        "solo": [{"model": "mnist_ff", "start_t": t0, "end_t": t0 + 20.0},
                 {"model": "resnet20", "start_t": t0 + 20.0, "end_t": t0 + 35.0}],
        "rounds": [], "case_start_t": t0, "case_end_t": t0 + 57.0})
    (out / CASE_ID).mkdir(parents=True)
    (out / CASE_ID / "result.json").write_text(json.dumps(record))


def test_earlier_results_of_the_same_scale_and_device_are_preferred(tmp_path):
    _earlier_record(tmp_path / "out", 1.0)
    estimate = estimate_cases(cases(pair(fg_hp={"epochs": 1, "learning_rate": 0.01, "batch_size": 32, "seed": 1334},
                                         bg_hp={"epochs": 1, "learning_rate": 0.1, "seed": 1334}), method="epoch"),
                              options(tmp_path), "cuda")[0]
    assert estimate.basis == EARLIER and estimate.seconds == 57.0 and estimate.solo_s == 35.0


def test_earlier_results_of_another_scale_are_not_used(tmp_path):
    _earlier_record(tmp_path / "out", 0.01)
    assert estimate_cases(cases(pair()), options(tmp_path), "cuda")[0].basis == PROFILE


@given(st.lists(st.floats(min_value=1.0, max_value=1e5), min_size=2, max_size=30))
def test_long_cases_are_exactly_those_far_over_the_median(seconds):
    estimates = [Estimate(f"c{i}", s, PROFILE, "") for i, s in enumerate(seconds)]
    median = sorted(seconds)[len(seconds) // 2] if len(seconds) % 2 else \
        (sorted(seconds)[len(seconds) // 2 - 1] + sorted(seconds)[len(seconds) // 2]) / 2
    flagged = {e.case_id for e in long_cases(estimates)}
    assert flagged == {e.case_id for e in estimates if e.seconds > max(3 * median, 120.0)}


def _recorded_as(out: Path, case_id: str, variant: str, case_s: float, **extra) -> None:
    record = json.loads((H100_DATA / "run" / CASE_ID / "result.json").read_text())
    record.update(complete=True, scale=1.0, case_id=case_id, variant=variant, **extra,
                  timeline={"solo": [], "rounds": [], "case_start_t": 1000.0, "case_end_t": 1000.0 + case_s})
    (out / case_id).mkdir(parents=True)
    (out / case_id / "result.json").write_text(json.dumps(record))


def _seeded_cases(seeds):
    study = parse_experiment({"name": "t", "design": "hp_study", "seeds": seeds, "vary": {"learning_rate": [0.2, 5.0]},
                              "pairs": [{"group": "hp01", "foreground": {"model": "densenet121"},
                                         "background": {"model": "mnist"}}]}, "s.json")
    return expand_all([study], Overrides())


def test_a_replicated_case_is_estimated_from_the_same_case_of_another_seed(tmp_path):
    """Each seed trains the same steps: a block measured for one seed times the next seed's."""
    first, second = _seeded_cases([1, 2])[:7], _seeded_cases([1, 2])[7:14]
    for case, seconds in zip(first, (30.0, 146.0, 184.0, 128.0, 172.0, 125.0, 168.0)):
        _recorded_as(tmp_path / "out", case.id, case.variant, seconds)
    estimates = estimate_cases(second, options(tmp_path), "cuda")
    assert [e.basis for e in estimates] == [EARLIER] * 7
    assert [e.seconds for e in estimates] == [30.0, 146.0, 184.0, 128.0, 172.0, 125.0, 168.0]
    assert all("another seed" in e.detail for e in estimates)


def test_a_solo_run_reused_from_another_case_does_not_time_another_seed(tmp_path):
    first, second = _seeded_cases([1, 2])[0], _seeded_cases([1, 2])[7]
    _recorded_as(tmp_path / "out", first.id, first.variant, 0.0, reused_measurement="_solo/x")
    assert estimate_cases([second], options(tmp_path), "cuda")[0].basis == PROFILE


@given(st.sampled_from(["default", "lr_min", "epochs_max", "default_lr", "bg_default_epochs"]), st.integers(0, 9999))
def test_seedless_takes_out_exactly_the_seed_of_the_variant(variant, seed):
    seeded = f"hp01-densenet121+mnist-{variant}_s{seed}-concurrent"
    assert seedless(seeded, f"{variant}_s{seed}") == f"hp01-densenet121+mnist-{variant}-concurrent"
    assert seedless(f"hp01-densenet121+mnist-{variant}-concurrent", variant) is None
