"""The split-candidates table: CV across sessions of each normalisation of the per-job energy split."""
import json

import pytest

from tools.reproducibility.split_candidates import cv_table, main


def _round(fg_j, bg_j, fg_rate, bg_rate):
    return {"fg_gpu_energy_j": fg_j, "bg_gpu_energy_j": bg_j, "gpu_energy_above_idle_j": fg_j + bg_j,
            "fg_gpu_energy_per_step_j": fg_j / (fg_rate * 0.5), "bg_gpu_energy_per_step_j": bg_j / (bg_rate * 0.5),
            "fg_steps_per_s": fg_rate, "bg_steps_per_s": bg_rate, "fg_solo_steps_per_s": fg_rate,
            "bg_solo_steps_per_s": bg_rate, "window_s": 0.5}


def _session(folder, n, pace):
    """A host-bound fg (constant power) and a GPU-bound bg (energy per step constant) at a host pace."""
    rounds = [_round(15.0, 3.0 * 20 * pace * 0.5, 200 * pace, 20 * pace) for _ in range(4)]
    record = {"case_id": "g10-mnist_ff+densenet121-default-concurrent", "rounds": rounds}
    (folder / f"session-{n}.json").write_text(json.dumps({"benchmarks": [{"extra_info": record}]}))


def test_a_pace_change_moves_the_host_bound_jobs_steps_and_the_gpu_bound_jobs_phases(tmp_path):
    for n, pace in ((1, 1.0), (2, 1.2), (3, 1.4)):
        _session(tmp_path, n, pace)
    row = cv_table(tmp_path)["g10-mnist_ff+densenet121-default-concurrent"]
    assert row["fg per phase"] == pytest.approx(0.0) and row["bg per step"] == pytest.approx(0.0)
    assert row["fg per step"] > 0.15 and row["bg per phase"] > 0.15


def test_the_table_is_written_where_asked(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    for n in (1, 2):
        _session(study, n, 1.0)
    assert main([str(study), "--out", str(tmp_path / "t.md")]) == 0
    assert "| study | g10 | 0.0% |" in (tmp_path / "t.md").read_text()
