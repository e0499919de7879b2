"""tools/scaling: the emulated card's size from the pilot, and summary.json from what the study
brings back: measured counts, efficiency per count, 4 and 6 GPUs predicted with intervals, and the
predecessor's question answered."""
import json

import pytest

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.record.store import save_result
from tools.scaling import card_size, collate


def record(gpus, step, memory, model="vulberta_mlp", group="sc02", batch=1):
    return {"case_id": f"{group}-{model}-gpus{gpus}", "design": "scaling", "mode": "scaling", "fg_model": model,
            "fg_hparams": {"batch_size": batch}, "gpus": gpus, "per_gpu_batch": batch, "step_time_s": step,
            "step_time_ci": [step * 0.98, step * 1.02], "step_time_blocks": 10, "peak_memory_fraction": memory,
            "card_memory_mb": 5120.0, "comm_share": 0.2 if gpus > 1 else 0.0, "comm_share_ci": [0.15, 0.25],
            "device": "NVIDIA H200", "failure": None, "oom": False}


def test_the_card_is_what_the_pilots_fullest_gpu_fills_to_the_predecessors_share(tmp_path, capsys):
    data = record(2, 0.04, memory=0.5)
    assert card_size.card_mb(data) == 2752  # 2560 MB in use / 0.935 = 2738, up to 64 MB
    assert card_size.card_mb({**data, "peak_memory_fraction": None}) is None
    save_result(tmp_path / data["case_id"], data)
    assert card_size.main([str(tmp_path)]) == 0 and capsys.readouterr().out.strip() == "2752"
    assert card_size.main([str(tmp_path), "--case", "nope"]) == 1
    assert "nope: no such case" in capsys.readouterr().err


@pytest.fixture
def study(tmp_path, capsys):
    """The folder run_on_gpu.sh leaves: gpu-pairs scale's three JSON outputs and the run's facts."""
    results = tmp_path / "results"
    for data in (record(1, 0.040, 0.90), record(2, 0.046, 0.935), record(1, 0.010, 0.2, "resnet20", "sc01", 128),
                 record(2, 0.011, 0.21, "resnet20", "sc01", 128)):
        save_result(results / data["case_id"], data)
    folder = tmp_path / "scaling"
    folder.mkdir()
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


def test_main_writes_summary_and_readme(study, tmp_path, capsys):
    out = tmp_path / "reference"
    assert collate.main([str(study), "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["measured_gpus"] == [1, 2]
    readme = (out / "README.md").read_text()
    assert "Commit abc123" in readme and "bash tools/scaling/run_on_gpu.sh" in readme
    assert "| sc02-vulberta_mlp | 6 | predicted (ring) |" in readme
    assert "with the predecessor's thresholds: **stay**" in readme


def test_the_readme_points_to_hand_written_notes_only_where_they_exist(study, tmp_path):
    out = tmp_path / "reference"
    assert collate.main([str(study), "--out", str(out)]) == 0
    assert "notes.md" not in (out / "README.md").read_text()
    (out / "notes.md").write_text("what one measurement means\n")
    assert collate.main([str(study), "--out", str(out)]) == 0
    assert "do not cover: `notes.md`" in (out / "README.md").read_text()


def test_a_missing_input_is_one_line(tmp_path, capsys):
    assert collate.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(f"collate: {tmp_path / 'scale.json'}: expected the JSON")
