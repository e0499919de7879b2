"""The command-workload study's collation: headline figures with their basis, and every null one
named with the record's reason, so a closing note cannot miss a figure that is missing."""
import json

from pytest_gpu_pairs.studies.collates.command_workloads import summarize, table

MEASURED = {"concurrency_efficiency": 1.35, "fg_slowdown": 1.4, "bg_progress_ratio": 0.64, "fg_duration_s": 40.0,
            "gpu_energy_j": 9000.0, "fg_gpu_energy_j": 3000.0, "bg_gpu_energy_j": 2500.0,
            "energy_saved_vs_serial": 0.2, "peak_vram_mb": 3000.0, "fg_peak_vram_mb": 1500.0,
            "bg_peak_vram_mb": 1500.0, "method": "epoch", "fg_progress_source": "log",
            "bg_progress_source": "protocol", "duration_basis": "training", "energy_split_method": "sm_util",
            "vram_budget_source": "nvml_process_memory", "repeats": 1, "failure": None, "notes": {}}


def run_dir(root, records):
    for case_id, record in records.items():
        (root / case_id).mkdir(parents=True)
        (root / case_id / "result.json").write_text(json.dumps({"case_id": case_id, **record}))
    return root


def test_every_headline_measured_is_tabled_with_its_basis(tmp_path):
    run = run_dir(tmp_path / "epoch", {"c01-lstm_lm_script+resnet20-default-concurrent": MEASURED})
    summary = summarize(run.parent, tmp_path)
    entry = summary["runs"]["epoch"]["c01-lstm_lm_script+resnet20-default-concurrent"]
    assert entry["figures"]["concurrency_efficiency"] == 1.35 and entry["unmeasured"] == {}
    assert entry["basis"]["fg_progress_source"] == "log"
    text = table(summary)
    assert "| 1.350 |" in text and "log / protocol" in text and "every headline figure was measured" in text


def test_a_null_headline_is_named_with_its_reason(tmp_path):
    why = "the background job reports no steps: give lstm_lm_script a progress_pattern"
    record = {**MEASURED, "bg_progress_ratio": None, "concurrency_efficiency": None, "bg_progress_source": None,
              "notes": {"bg_progress_ratio": why}}
    run = run_dir(tmp_path / "epoch", {"c02-resnet20+lstm_lm_script-default-concurrent": record})
    text = table(summarize(run.parent, tmp_path))
    assert f"`bg_progress_ratio` is null: {why}" in text
    assert "`concurrency_efficiency` is null: no reason recorded" in text
