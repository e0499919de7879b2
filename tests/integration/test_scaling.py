"""Scaling cases in real pytest sessions on the CPU: a built-in trained data-parallel by one and by
two gloo processes, a command workload started by torchrun, the records they leave, the decision
table of ``gpu-pairs scale`` read from them, and every rank process ended whatever happens."""
import json
import subprocess
import sys
import time

import pytest
from support.helpers import SUITE, TESTS, descendants_of_this_process, jobs_started_under

from pytest_gpu_pairs.experiment.cases import JobConfig, ScalingPlan
from pytest_gpu_pairs.run import dataparallel
from pytest_gpu_pairs.run.dataparallel import DataParallelJob, RankSetup

DDP_JOB = TESTS / "support" / "ddp_job.py"


def _settings(pytester, entries, workloads=None):
    path = pytester.path / "scaling.json"
    path.write_text(json.dumps({"name": "sc", "design": "scaling", "scaling": entries, "workloads": workloads or {},
                                "defaults": {"timeout_s": 300}}))
    return path


def _run(pytester, settings, *args):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                         "--gpu-pairs-out", "out", "-p", "no:cacheprovider", *args)


def _record(pytester, case_id):
    return json.loads((pytester.path / "out" / case_id / "result.json").read_text())


def test_a_built_in_at_one_and_two_gloo_processes_records_its_scaling_and_scale_prints_the_decision(pytester):
    entry = {"group": "s01", "workload": {"model": "mnist", "hyperparameters": {"batch_size": 8}}, "gpus": [1, 2],
             "warmup_steps": 2, "steps": 8, "comm_probe_steps": 4}
    pytester.makeconftest("import sys\n"
                          "def pytest_sessionfinish(session):\n"
                          "    print('TORCH-LOADED', 'torch' in sys.modules)\n")
    result = _run(pytester, _settings(pytester, [entry]), "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*TORCH-LOADED False*"])
    assert jobs_started_under(pytester.path / "out") == []
    one, two = _record(pytester, "s01-mnist-gpus1"), _record(pytester, "s01-mnist-gpus2")
    for record, gpus in ((one, 1), (two, 2)):
        assert record["design"] == "scaling" and record["gpus"] == gpus and record["backend"] == "gloo"
        assert record["measured_steps"] == 8 and record["global_batch"] == 8 * gpus and record["failure"] is None
        low, high = record["step_time_ci"]
        assert 0 < low <= record["step_time_s"] <= high and record["step_time_blocks"] == 8
        assert record["samples_per_s"] == pytest.approx(8 * gpus / record["step_time_s"])
        assert record["no_sync_step_time_s"] > 0 and record["comm_share"] is not None
        assert record["peak_vram_mb"] is None and "jobs train on the CPU" in record["notes"]["peak_vram_mb"]
        assert record["gpus_energy_j"] is None and record["energy_per_sample_j"] is None
        phases = record["timeline"]["rounds"][0]  # what gpu-pairs dead-time reads
        assert phases["fg_start_t"] < phases["fg_train_start_t"] < phases["fg_train_end_t"] <= phases["fg_end_t"]
    assert two["scaling_efficiency"] == pytest.approx(one["step_time_s"] / two["step_time_s"])
    assert two["scaling_efficiency_ci"][0] < two["scaling_efficiency"] < two["scaling_efficiency_ci"][1]
    case = pytester.path / "out" / "s01-mnist-gpus2"
    assert {p.name for p in case.iterdir()} >= {"rank0.log", "rank1.log", "rank0.progress.jsonl", "step_times.csv"}
    assert "rank 1 of 2, gloo on cpu" in (case / "rank1.log").read_text()

    table = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.cli", "scale", str(pytester.path / "out"),
                            "--gpus", "4,6", "--remaining-steps", "100000", "--restart-cost-min", "5"],
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    assert "s01-mnist: mnist, per-GPU batch 8, measured on cpu at 1, 2 GPU(s)" in table.stdout
    assert "decision: 1 -> 6 GPUs (predicted)" in table.stdout
    assert "time saved vs restart cost" in table.stdout and "recommendation:" in table.stdout


def test_the_stand_in_with_a_loader_worker_validates_between_its_stretches_on_two_processes(pytester):
    """The dense-prediction stand-in, small (ResNet-50 at output stride 16, 32 pixels): each step split
    into its data wait and the rest, a validation shared by the ranks, the loader worker's process
    ended with its rank."""
    small = {"image_size": 32, "backbone_depth": 50, "output_stride": 16, "loader_workers": 1}
    entry = {"group": "s02", "workload": {"model": "dense_aspp", "hyperparameters": small},
             "gpus": [2], "warmup_steps": 1, "steps": 4, "val_samples": 4, "comm_probe_steps": 2}
    result = _run(pytester, _settings(pytester, [entry]))
    result.assert_outcomes(passed=1)
    record = _record(pytester, "s02-dense_aspp-gpus2")
    assert record["failure"] is None and record["measured_steps"] == 4 and record["val_samples"] == 4
    assert 0 < record["data_time_s"] < record["step_time_s"] and record["data_share"] < 1
    assert record["val_time_s"] > 0 and record["val_s_per_sample"] == pytest.approx(record["val_time_s"] * 2 / 4)
    assert record["peak_mem_phase"] is None and "the CPU" in record["notes"]["peak_mem_allocated_by_phase_mb"]
    assert jobs_started_under(pytester.path / "out") == []


def test_k_selects_a_gpu_count(pytester):
    entry = {"group": "s01", "workload": {"model": "mnist"}, "gpus": [1, 2, 4]}
    result = _run(pytester, _settings(pytester, [entry]), "--collect-only", "-q", "-k", "gpus2")
    result.stdout.fnmatch_lines(["test_suite.py::test_pair[[]s01-mnist-gpus2[]]", "1/3 tests collected*"])


def test_a_command_workload_started_by_torchrun_is_stopped_after_its_steps(pytester):
    workloads = {"ddp": {"command": [sys.executable, str(DDP_JOB)], "hyperparameters": {"step-s": {"default": 0.05}}},
                 "ddp_print": {"command": [sys.executable, str(DDP_JOB), "--print"],
                               "hyperparameters": {"step-s": {"default": 0.05}},
                               "progress_pattern": r"^step (?P<step>\d+)$"}}
    entries = [{"group": group, "workload": {"model": model}, "gpus": [2], "warmup_steps": 3, "steps": 30,
                "comm_probe_steps": 0} for group, model in (("c01", "ddp"), ("c02", "ddp_print"))]
    result = _run(pytester, _settings(pytester, entries, workloads))
    result.assert_outcomes(passed=2)
    assert jobs_started_under(pytester.path / "out") == []
    for case_id in ("c01-ddp-gpus2", "c02-ddp_print-gpus2"):
        record = _record(pytester, case_id)
        assert record["failure"] is None and record["measured_steps"] >= 20
        assert 0.04 < record["step_time_s"] < 1.0
        assert record["comm_share"] is None and "no_sync() probe" in record["notes"]["comm_share"]
        assert record["per_gpu_batch"] is None and "batch_size" in record["notes"]["samples_per_s"]
        assert (pytester.path / "out" / case_id / "rank1.log").is_file()


@pytest.fixture
def fake_ranks(monkeypatch):
    monkeypatch.setattr(dataparallel, "RANK_MODULE", "support.fake_rank")
    monkeypatch.setattr(dataparallel, "PEER_EXIT_GRACE_S", 1.0)


def _job(tmp_path, mode, timeout_s=60.0):
    env = {"FAKE_RANK": mode, "PYTHONPATH": str(TESTS)}
    setup = RankSetup(JobConfig("mnist", (("batch_size", 8),)), ScalingPlan(3, 1, 4, 0), "cpu", 1.0, timeout_s, env)
    return DataParallelJob(setup, tmp_path / "case")


def test_a_failed_rank_brings_the_others_down_after_a_grace(tmp_path, fake_ranks):
    job = _job(tmp_path, "peer_fails").start()
    start = time.monotonic()
    job.wait()
    assert time.monotonic() - start < 30
    assert "another rank failed" in job.stopped_because
    assert [o.returncode for o in job.outcomes()][1] == 1
    assert all(o.stopped_by_harness for i, o in enumerate(job.outcomes()) if i != 1)
    assert jobs_started_under(tmp_path) == [] and descendants_of_this_process() == []


def test_the_timeout_ends_every_rank(tmp_path, fake_ranks):
    job = _job(tmp_path, "hang", timeout_s=2.0).start()
    job.wait()
    assert "timeout of 2 s" in job.stopped_because
    assert all(o.timed_out for o in job.outcomes())
    assert jobs_started_under(tmp_path) == [] and descendants_of_this_process() == []


def test_closing_a_running_job_ends_every_rank(tmp_path, fake_ranks):
    job = _job(tmp_path, "hang").start()
    assert len(job.roles()) == 3
    job.close()
    assert jobs_started_under(tmp_path) == [] and descendants_of_this_process() == []
