"""The scaling study's collate: summary.json and the README from what its run leaves in run/: measured
counts, efficiency per count, 4 and 6 GPUs predicted with intervals, and the predecessor's question answered."""
import json

import pytest

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.store import save_result
from pytest_gpu_pairs.studies.collates import scaling as collate


def record(gpus, step, memory, model="vulberta_mlp", group="sc02", batch=1):
    return {"case_id": f"{group}-{model}-gpus{gpus}", "design": "scaling", "mode": "scaling", "fg_model": model,
            "fg_hparams": {"batch_size": batch}, "gpus": gpus, "per_gpu_batch": batch, "step_time_s": step,
            "step_time_ci": [step * 0.98, step * 1.02], "step_time_blocks": 10, "peak_memory_fraction": memory,
            "card_memory_mb": 5120.0, "comm_share": 0.2 if gpus > 1 else 0.0, "comm_share_ci": [0.15, 0.25],
            "device": "NVIDIA H200", "failure": None, "oom": False}


@pytest.fixture
def study(tmp_path, capsys):
    """The run/ folder `gpu-pairs study run scaling` leaves: gpu-pairs scale's three JSON outputs and the run's facts."""
    results = tmp_path / "results"
    for data in (record(1, 0.040, 0.90), record(2, 0.046, 0.935), record(1, 0.010, 0.2, "resnet20", "sc01", 128),
                 record(2, 0.011, 0.21, "resnet20", "sc01", 128)):
        save_result(results / data["case_id"], data)
    folder = tmp_path / "scaling" / "run"
    folder.mkdir(parents=True)
    predecessor = ["--current-gpus", "4", "--gpus", "6", "--remaining-hours", "216", "--step-time-s", "2.6",
                   "--memory-fraction", "0.935", "--restart-cost-min", "30", "--json"]
    for name, args in (("scale", ["--gpus", "4,6", "--json"]), ("predecessor", predecessor),
                       ("predecessor_fits", [*predecessor, "--memory-threshold", "1.0"])):
        assert cli.main(["scale", str(results), *args]) == 0
        (folder / f"{name}.json").write_text(capsys.readouterr().out)
    for name, text in (("commit", "abc123"), ("device", "0, NVIDIA H200, 143771 MiB"), ("card", "5120"),
                       ("restart_min", "30")):
        (folder / f"{name}.txt").write_text(text + "\n")
    return folder


def test_the_summary_has_every_figure_the_study_promises(study):
    summary = collate.collate(study)
    assert summary["measured_gpus"] == [1, 2] and summary["commit"] == "abc123" and summary["emulated_card_mb"] == 5120
    big = summary["workloads"]["sc02-vulberta_mlp"]
    assert big["scaling_efficiency"]["2"]["value"] == pytest.approx(0.040 / 0.046)
    assert big["scaling_efficiency"]["2"]["ci"][0] < big["scaling_efficiency"]["2"]["value"]
    for count in ("4", "6"):
        predicted = big["predicted"][count]
        low, high = predicted["scaling_efficiency"]["ci"]
        assert low < predicted["scaling_efficiency"]["value"] < high and predicted["basis"] == "predicted (ring)"
        assert set(predicted["other_models_step_time_s"]) == {"log2", "linear"}
    assert big["predicted"]["6"]["step_time_s"]["value"] == pytest.approx(0.040 + 0.006 * 5 / 3)
    rec = summary["recommendation"]
    assert rec["workload"] == "sc02-vulberta_mlp"
    assert rec["with_the_predecessors_thresholds"] == "stay" and "memory per GPU on 6" in rec["reasons"][0]
    assert rec["with_memory_at_the_whole_card"] == "switch"
    assert rec["time_saved_h"]["value"] == pytest.approx(216 * (1 - 4 / 6 * (0.040 + 0.006 * 5 / 3) / (0.040 + 0.006 * 1.5)))
    assert set(summary["predecessor"]["answers_with_its_thresholds"]) == {"sc01-resnet20", "sc02-vulberta_mlp"}


def test_collect_writes_summary_and_readme(study):
    out = study.parent
    collate.write(out, out)
    assert json.loads((out / "summary.json").read_text())["measured_gpus"] == [1, 2]
    readme = (out / "README.md").read_text()
    assert "Commit abc123" in readme and "gpu-pairs study run scaling" in readme and "tools/" not in readme
    assert "| sc02-vulberta_mlp | 6 | predicted (ring) |" in readme
    assert "with the predecessor's thresholds: **stay**" in readme


def test_the_readme_points_to_hand_written_notes_only_where_they_exist(study):
    out = study.parent
    collate.write(out, out)
    assert "notes.md" not in (out / "README.md").read_text()
    (out / "notes.md").write_text("what one measurement means\n")
    collate.write(out, out)
    assert "do not cover: `notes.md`" in (out / "README.md").read_text()


def test_a_missing_input_is_one_line(tmp_path):
    with pytest.raises(SettingsError, match=r"scale.json: \$: expected a readable JSON file"):
        collate.write(tmp_path, tmp_path)
    assert not (tmp_path / "summary.json").exists()
