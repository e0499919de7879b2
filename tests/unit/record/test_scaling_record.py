"""A scaling case's record from plain measurements: step time at the slowest rank with a batch-means
interval, the all-reduce's share from the no-sync probe, efficiency against the one-GPU record,
GPU figures per card, and null figures with their reasons."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import Case, JobConfig, ScalingPlan
from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record.measurement import JobOutcome
from pytest_gpu_pairs.record.model import built
from pytest_gpu_pairs.record.scaling import (
    BLOCKS,
    Estimate,
    GpuTrace,
    ScalingMeasurement,
    block_estimate,
    estimate_from_interval,
    ratio,
    report_spans,
    scaling_record,
    slowest_rank_steps,
)
from pytest_gpu_pairs.record.store import typed

PLAN = ScalingPlan(gpus=2, warmup_steps=2, steps=20, comm_probe_steps=10)


def case(plan=PLAN):
    job = JobConfig("resnet20", (("batch_size", 16), ("seed", 1)))
    return Case(id=f"s01-resnet20-gpus{plan.gpus}", experiment="x", design="scaling", group="s01",
                variant=f"gpus{plan.gpus}", mode="scaling", fg=job, bg=None, vram_budget_mb=7500.0, min_efficiency=0.0,
                runs_per_config=1, restart_delay_s=0.0, timeout_s=60.0, method="steps", scaling=plan)


def rank(role, result, returncode=0, steps=()):
    progress = Progress(result={"event": "result", "steps": 32, **result} if result is not None else None,
                        steps=list(steps))
    return JobOutcome(role, "resnet20", [], "rank.log", "rank.jsonl", 0.0, 10.0, returncode, progress=progress)


def builtin_ranks(step=0.1, probe=0.08, window=(100.0, 102.0), slow_rank_extra=0.0):
    return [rank(f"rank{r}", {"step_times_s": [step + (slow_rank_extra if r == 1 else 0.0) + 0.001 * (i % 3)
                                               for i in range(PLAN.steps)],
                              "probe_times_s": [probe + 0.001 * (i % 2) for i in range(PLAN.comm_probe_steps)],
                              "window": list(window), "peak_mem_reserved_mb": 500.0 + r, "backend": "nccl",
                              "per_gpu_batch": 16}) for r in range(2)]


def gpu(index, used_mb=(20_000.0, 30_000.0), job_mb=6_000.0, card_mb=40_000.0, ballast_mb=None):
    samples = []
    for i, t in enumerate((99.0, 100.5, 101.5, 103.0)):
        sample = GpuSample(t=t, energy_mj=1_000.0 * 300 * (t - 99.0), util_pct=90.0, mem_used_mb=used_mb[i % 2])
        sample.proc_mem_mb = {10 + index: job_mb, 99: 500.0}
        sample.roles = {10 + index: f"rank{index}", 99: "ballast" if ballast_mb else "other"}
        samples.append(sample)
    return GpuTrace(index, samples, card_mb, ballast_mb)


def measurement(ranks, gpus=(), plan=PLAN, **extra):
    return ScalingMeasurement(plan, "nccl", list(ranks), list(gpus), "--gpu-pairs-device cpu: no GPU" if not gpus else None,
                              per_gpu_batch=16, sample_hz=10.0, **extra)


def test_each_step_is_taken_at_its_slowest_rank():
    assert slowest_rank_steps([[1.0, 2.0, 3.0], [1.5, 1.0, 3.5, 9.0]]) == [(1.5, 1.0), (2.0, 1.0), (3.5, 1.0)]


def test_batch_means_give_an_interval_around_the_overall_mean():
    spans = [(0.1 + 0.01 * (i % 4), 1.0) for i in range(40)]
    estimate, blocks = block_estimate(spans)
    assert blocks == BLOCKS
    assert estimate.mean == pytest.approx(sum(s for s, _ in spans) / 40)
    low, high = estimate.interval()
    assert low < estimate.mean < high


def test_a_single_step_has_a_mean_and_no_interval():
    estimate, blocks = block_estimate([(0.5, 1.0)])
    assert (estimate.mean, estimate.interval(), blocks) == (0.5, None, 1)
    assert block_estimate([]) is None


@given(st.lists(st.tuples(st.floats(1e-4, 100.0), st.floats(1.0, 50.0)), min_size=2, max_size=200))
def test_a_step_time_interval_holds_its_mean(spans):
    estimate, _ = block_estimate(spans)
    low, high = estimate.interval()
    assert low <= estimate.mean <= high


@given(st.floats(0.01, 10.0), st.floats(0.0, 0.5), st.floats(0.01, 10.0), st.floats(0.0, 0.5), st.integers(1, 40), st.integers(1, 40))
def test_a_ratio_interval_holds_its_value(a, ra, b, rb, da, db):
    estimate = ratio(Estimate(a, a * ra, float(da)), Estimate(b, b * rb, float(db)))
    low, high = estimate.interval()
    assert low <= a / b <= high


def test_an_interval_read_back_gives_the_same_interval():
    original = Estimate(2.0, 0.1, 9.0)
    again = estimate_from_interval(2.0, original.interval(), 10)
    assert again.interval() == pytest.approx(original.interval())


def test_spans_between_reports_start_after_the_warm_up():
    progress = Progress(steps=[(0.0, 1), (1.0, 2), (2.0, 4), (3.0, 6), (3.5, 6), (5.0, 9)])
    assert report_spans(progress, 2) == [(1.0, 2.0, 2.0), (2.0, 3.0, 2.0), (3.5, 5.0, 3.0)]


def test_a_built_in_case_on_two_gpus_has_every_figure():
    one = built({"step_time_s": 0.05, "step_time_ci": [0.049, 0.051], "step_time_blocks": 10})
    record = scaling_record(case(), measurement(builtin_ranks(slow_rank_extra=0.01), [gpu(0), gpu(1)]), "NVIDIA H200",
                            1.0, baseline=one)
    typed(record)
    assert record["gpus"] == 2 and record["global_batch"] == 32 and record["measured_steps"] == PLAN.steps
    assert record["step_time_s"] == pytest.approx(0.111, abs=0.001)  # rank 1's steps, 0.01 s slower
    assert record["step_time_ci"][0] < record["step_time_s"] < record["step_time_ci"][1]
    assert record["samples_per_s"] == pytest.approx(32 / record["step_time_s"])
    assert record["scaling_efficiency"] == pytest.approx(0.05 / record["step_time_s"])
    assert record["comm_share"] == pytest.approx(1 - record["no_sync_step_time_s"] / record["step_time_s"])
    assert record["peak_vram_per_gpu_mb"] == [6_000.0, 6_000.0] and record["peak_vram_mb"] == 6_000.0
    assert record["peak_memory_fraction"] == pytest.approx(30_000 / 40_000)
    assert record["memory_headroom_mb"] == pytest.approx(10_000.0)
    assert record["gpus_energy_j"] == pytest.approx(2 * 300 * 2.0)
    assert record["energy_per_sample_j"] == pytest.approx(1_200.0 / (32 * PLAN.steps))
    assert record["peak_mem_reserved_per_gpu_mb"] == [500.0, 501.0]
    assert record["failure"] is None and record["oom"] is False


def test_an_emulated_card_leaves_the_ballast_out_of_the_memory_in_use():
    record = scaling_record(case(), measurement(builtin_ranks(), [gpu(0, card_mb=10_000.0, ballast_mb=25_000.0),
                                                                  gpu(1, card_mb=10_000.0, ballast_mb=25_000.0)]),
                            "NVIDIA H200", 1.0)
    assert record["card_memory_mb"] == 10_000.0
    assert record["peak_memory_fraction"] == pytest.approx(0.5)
    assert record["ballast_held_mb"] == 25_000.0


def test_on_the_cpu_gpu_figures_are_null_with_the_reason():
    record = scaling_record(case(), measurement(builtin_ranks()), "cpu", 1.0)
    typed(record)
    for key in ("peak_vram_mb", "peak_memory_fraction", "gpus_energy_j", "energy_per_sample_j", "gpu_util_avg_pct"):
        assert record[key] is None and "no GPU" in record["notes"][key]
    assert record["scaling_efficiency"] is None  # no one-GPU record in this session
    assert "one-GPU case" in record["notes"]["scaling_efficiency"]
    assert record["step_time_s"] is not None and record["comm_share"] is not None
    assert "says nothing of GPUs" in record["notes"]["comm_share"]


def test_the_one_gpu_case_is_its_own_baseline():
    plan = ScalingPlan(1, 2, 20, 10)
    record = scaling_record(case(plan), measurement(builtin_ranks()[:1], plan=plan), "cpu", 1.0)
    assert record["scaling_efficiency"] == 1.0 and record["scaling_efficiency_ci"] == [1.0, 1.0]
    assert "no peer" in record["notes"]["comm_share"]


def test_a_command_workloads_steps_come_from_its_reports_and_its_share_is_null():
    reports = [(10.0 + 0.5 * i, 2 * i) for i in range(15)]
    ranks = [rank(f"rank{r}", None, returncode=-15, steps=reports) for r in range(2)]
    ranks = [r.__class__(**{**r.__dict__, "stopped_by_harness": True}) for r in ranks]
    record = scaling_record(case(), measurement(ranks), "cpu", 1.0)
    assert record["step_time_s"] == pytest.approx(0.25)
    assert record["measured_steps"] == 26 and record["failure"] is None
    assert record["comm_share"] is None and "no_sync() probe" in record["notes"]["comm_share"]
    assert "progress reports" in record["step_time_method"]


@pytest.mark.parametrize("change, expected", [
    ({"start_error": "No such file or directory (python9)"}, "rank1 could not start"),
    ({"oom": True, "oom_message": "CUDA out of memory"}, "rank1 ran out of memory: CUDA out of memory"),
    ({"returncode": 1}, "rank1 exited with code 1"),
])
def test_a_failed_rank_is_the_cases_failure(change, expected):
    ranks = builtin_ranks()
    ranks[1] = ranks[1].__class__(**{**ranks[1].__dict__, **change})
    record = scaling_record(case(), measurement(ranks), "cpu", 1.0)
    assert expected in record["failure"]


def test_the_harness_stopping_the_job_is_the_cases_failure():
    record = scaling_record(case(), measurement(builtin_ranks(), stopped_because="the case's timeout of 60 s passed"),
                            "cpu", 1.0)
    assert record["failure"] == "stopped: the case's timeout of 60 s passed"


def test_no_step_at_all_leaves_every_figure_null_with_a_reason():
    record = scaling_record(case(), measurement([rank("rank0", None), rank("rank1", None)]), "cpu", 1.0)
    typed(record)
    assert record["step_time_s"] is None and "no rank reported" in record["notes"]["step_time_s"]
    assert record["samples_per_s"] is None and math.isfinite(record["vram_budget_mb"])


def test_the_longest_stretches_a_rank_may_time_fit_in_one_protocol_line():
    """Every timed step travels in the rank's result event; the protocol reader refuses longer lines."""
    import json

    from pytest_gpu_pairs.experiment.schema import MAX_SCALING_STEPS
    from pytest_gpu_pairs.protocol import MAX_LINE_BYTES, parse_event
    from pytest_gpu_pairs.workloads.data_parallel import DIGITS

    times = [round(123.4567891234, DIGITS)] * MAX_SCALING_STEPS
    line = json.dumps({"event": "result", "t": 1.0, "metrics": {}, "steps": 3 * MAX_SCALING_STEPS,
                       "warmup_times_s": times, "step_times_s": times, "probe_times_s": times, "window": [0.0, 1.0]})
    assert len(line.encode()) < MAX_LINE_BYTES
    assert parse_event(line.encode() + b"\n")[1] is None


def stretch_ranks():
    """Two ranks that report their data waits, a validation and each stretch's allocator peaks."""
    ranks = builtin_ranks()
    for r, outcome in enumerate(ranks):
        outcome.progress.result.update(data_times_s=[0.02 + 0.01 * r + 0.001 * (i % 2) for i in range(PLAN.steps)],
                                       val_time_s=0.5 + 0.1 * r, val_samples=8)
        outcome.progress.memory = [{"phase": p, "peak_allocated_mb": mb + r, "peak_reserved_mb": 3000.0, "reserved_mb": 0.0}
                                   for p, mb in (("start", 2400.0), ("train", 2300.0), ("eval", 1300.0), ("train", 2350.0))]
    return ranks


def test_the_data_wait_is_taken_at_the_slowest_rank_and_as_a_share_of_the_step():
    record = typed(scaling_record(case(), measurement(stretch_ranks()), "cuda", 1.0))
    assert record.data_time_s == pytest.approx(0.03 + 0.0005)
    assert record.data_share == pytest.approx(record.data_time_s / record.step_time_s)


def test_validation_time_is_the_slowest_ranks_and_per_sample_per_gpu():
    record = typed(scaling_record(case(), measurement(stretch_ranks()), "cuda", 1.0))
    assert record.val_samples == 16 and record.val_time_s == pytest.approx(0.6)
    assert record.val_s_per_sample == pytest.approx(0.6 * 2 / 16)


def test_each_stretch_keeps_its_largest_ranks_allocator_peak_and_the_highest_is_named():
    record = typed(scaling_record(case(), measurement(stretch_ranks()), "cuda", 1.0))
    assert record.peak_mem_allocated_by_phase_mb == {"start": 2401.0, "train": 2301.0, "eval": 1301.0,
                                                     "after_eval": 2351.0}
    assert record.peak_mem_phase == "start"


def test_ranks_of_an_earlier_version_leave_the_new_figures_null_with_reasons():
    record = typed(scaling_record(case(), measurement(builtin_ranks()), "cuda", 1.0))
    assert record.data_time_s is None and record.val_time_s is None and record.peak_mem_phase is None
    assert {"data_time_s", "val_time_s", "peak_mem_allocated_by_phase_mb"} <= set(record.notes)
