"""The scaling study's collate: summary.json and the README from the raw results its run leaves in
run/: the measured counts, bounds on 6 GPUs, the predecessor's criteria with its values and the
measured ones, the alternatives, energy to solution and the convergence branches; an unusable
input is one line and nothing is written."""
import json

import pytest

from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.store import StoreError, save_result
from pytest_gpu_pairs.studies.collates import scaling as collate

STEPS = {"sc01": {1: 0.070, 2: 0.083, 4: 0.103}, "sc02": {1: 0.066, 2: 0.070, 4: 0.081}}


def record(group, gpus, step, workers):
    return {"case_id": f"{group}-dense_aspp-gpus{gpus}", "design": "scaling", "mode": "scaling", "fg_model": "dense_aspp",
            "fg_hparams": {"batch_size": 1, "loader_workers": workers}, "gpus": gpus, "per_gpu_batch": 1,
            "step_time_s": step, "step_time_ci": [step * 0.97, step * 1.03], "step_time_blocks": 10,
            "no_sync_step_time_s": step * 0.9, "data_share": 0.37 if not workers else 0.006,
            "peak_memory_fraction": 0.134 if gpus == 1 else 0.145, "card_memory_mb": 32768.0,
            "gpu_util_avg_pct": 40.0, "energy_per_sample_j": 13.0 + 2 * gpus, "val_s_per_sample": 0.03,
            "peak_mem_allocated_by_phase_mb": {"start": 2384.0, "train": 2383.0, "eval": 1368.0, "after_eval": 2383.0},
            "peak_mem_phase": "start", "comm_share": 0.1, "comm_share_ci": [0.05, 0.15], "device": "NVIDIA H200",
            "failure": None, "oom": False}


def branch(folder, rule, batch, seed, losses, lr):
    curve = [[96 * i, {"eval_loss": loss, "miou": 0.3}] for i, loss in enumerate(losses)]
    (folder / f"{rule}_b{batch}_s{seed}.json").write_text(json.dumps(
        {"global_batch": batch, "seed": seed, "learning_rate": lr, "curve": curve, "train": []}))


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "scaling" / "run"
    for group, steps in STEPS.items():
        for gpus, step in steps.items():
            data = record(group, gpus, step, 0 if group == "sc01" else 1)
            save_result(folder / "results" / data["case_id"], data)
    (folder / "bandwidth.json").write_text(json.dumps({"bytes": 234511652, "counts": {
        "2": {"busbw_gb_s": 279.0, "median_s": 0.00084}, "4": {"busbw_gb_s": 310.0, "median_s": 0.0011}}}))
    (folder / "convergence").mkdir()
    branches = []
    for seed in (1, 2, 3):
        for rule, batch, lr, shift in (("current", 4, 1e-4, 0.0), ("linear", 6, 1.5e-4, 0.01 * seed),
                                       ("square_root", 6, 1.22e-4, 0.05 + 0.001 * seed)):
            branch(folder / "convergence", rule, batch, seed, [0.33, 0.30 + shift, 0.25 + shift], lr)
            branches.append({"rule": rule, "global_batch": batch, "seed": seed})
    (folder / "convergence.json").write_text(json.dumps({"plan": {"checkpoint_samples": 400, "current_batch": 4,
                                                                  "branch_samples": 192, "eval_every": 96,
                                                                  "eval_samples": 16, "seeds": [1, 2, 3]},
                                                         "branches": branches}))
    (folder / "commit.txt").write_text("abc1234\n")
    (folder / "gpu.txt").write_text("NVIDIA H200, GPU-1\nNVIDIA H200, GPU-2\n")
    return folder


def test_the_decision_rests_on_bounds_from_the_largest_measured_counts(run):
    summary = collate.collate(run)
    bounds = summary["decision"]["bounds"]
    worst_per_gpu = (0.103 * 1.03 - 0.083 * 0.97) / 2
    assert bounds["step_ratio"][0] == pytest.approx(1.0)
    assert bounds["step_ratio"][1] == pytest.approx((0.103 * 1.03 + 2 * worst_per_gpu) / 0.103)
    assert summary["decision"]["with_the_predecessors_thresholds"] == "stay"
    assert summary["measured_gpus"] == [1, 2, 4] and summary["commit"] == "abc1234"
    saved = next(c for c in summary["criteria"] if c["criterion"] == "time saved vs restart")
    low, high = saved["measured"]["saved_h"]
    assert high == pytest.approx(216 * (1 - 4 / 6)) and low == pytest.approx(216 * (1 - 4 / 6 * bounds["step_ratio"][1]))
    assert saved["verdict"] == "pass"


def test_every_criterion_of_the_predecessor_is_shown_with_its_own_value(run):
    rows = {c["criterion"]: c for c in collate.collate(run)["criteria"]}
    assert set(rows) == {"memory per GPU", "iterations done", "global batch", "GPU utilisation", "training stability",
                         "time saved vs restart"}
    assert rows["memory per GPU"]["predecessor"] == 0.935 and rows["memory per GPU"]["verdict"] == "fail"
    assert rows["memory per GPU"]["measured"]["change_2_to_4"] == pytest.approx(0.0)
    assert rows["iterations done"]["predecessor"] == 350 and rows["global batch"]["verdict"] == "fail"
    assert rows["GPU utilisation"]["measured"]["stand_in_on_4_pct"] == 40.0


def test_the_alternatives_and_energy_come_from_the_measured_cases(run):
    summary = collate.collate(run)
    worker = summary["alternatives"]["loader_worker"]["measured_step_saved"]["4"]
    assert worker["value"] == pytest.approx(1 - 0.081 / 0.103)
    assert worker["ci"][0] < worker["value"] < worker["ci"][1]
    switch = {s["when"]: s for s in summary["alternatives"]["switch"]}
    assert switch["now"]["lost_h"] == pytest.approx(350 * 2.6 / 3600)
    assert switch["after epoch 1, from its checkpoint"]["lost_h"] == 0.0
    energy = summary["energy_to_solution"]
    samples = 216 * 3600 / 2.6 * 4
    assert energy["kwh"]["4"] == pytest.approx(samples * 21.0 / 3.6e6)
    assert energy["kwh"]["6"][0] == pytest.approx(energy["kwh"]["4"])


def test_the_convergence_rules_are_compared_with_the_current_batch_paired_by_seed(run):
    rules = collate.collate(run)["convergence"]["rules"]
    assert rules["current"]["final_loss"]["mean"] == pytest.approx(0.25)
    square = rules["square_root"]["final_loss_minus_current"]
    assert square["mean"] == pytest.approx(0.052) and square["verdict"] == "higher than at the current batch"
    linear = rules["linear"]["final_loss_minus_current"]
    assert linear["ci"][0] < 0.02 < linear["ci"][1] and "no difference" in linear["verdict"]


def test_collect_writes_summary_and_readme(run):
    out = run.parent
    collate.write(out, out)
    assert json.loads((out / "summary.json").read_text())["measured_gpus"] == [1, 2, 4]
    readme = (out / "README.md").read_text()
    assert "Commit abc1234" in readme and "gpu-pairs study run scaling" in readme and "tools/" not in readme
    assert "**By its own thresholds: stay**" in readme and "| square_root | 6 |" in readme


@pytest.mark.parametrize("breaks, error, where", [
    (lambda run: (run / "bandwidth.json").write_text('{"bytes": 0, "counts": {}}'), SettingsError, "$.bytes"),
    (lambda run: (run / "convergence" / "linear_b6_s2.json").write_text('{"seed": 2, "global_batch": 6, '
                                                                         '"learning_rate": 1, "curve": [[0, {}]]}'),
     SettingsError, "$.curve"),
    (lambda run: (run / "convergence.json").write_text('{"branches": []}'), SettingsError, "$.branches"),
    (lambda run: (run / "results" / "sc01-dense_aspp-gpus4" / "result.json").write_text("{"), StoreError, "result.json"),
])
def test_an_unusable_input_is_one_line_and_nothing_is_written(run, breaks, error, where):
    breaks(run)
    with pytest.raises(error) as raised:
        collate.write(run.parent, run.parent)
    assert where in str(raised.value) and len(str(raised.value).splitlines()) == 1
    assert not (run.parent / "summary.json").exists()
