"""The many-GPU study's collate: speedup, agreement of every case's figures by overlapping intervals,
and the planner's error, from what the two-GPU check brings back."""
import json
import shutil
from pathlib import Path

from pytest_gpu_pairs.studies.collates import many_gpus as collate

RUN = Path(__file__).parents[2] / "data/h100/run"
CASE = "g01-mnist_ff+resnet20-default-concurrent"


def _with_interval(path: Path, shift: float = 0.0, **changes) -> None:
    """An interleaved case's 95 % interval on its efficiency, as the H100 epoch records have none."""
    record = json.loads(path.read_text())
    value = record["concurrency_efficiency"] + shift
    path.write_text(json.dumps({**record, "concurrency_efficiency": value,
                                "concurrency_efficiency_ci": [value - 0.05, value + 0.05], **changes}))


def _folder(tmp_path, two_changes=None, one_s=1000.0, two_s=520.0, planned_two=500.0):
    for run in ("one", "two"):
        shutil.copytree(RUN, tmp_path / run)
        _with_interval(tmp_path / run / CASE / "result.json")
        (tmp_path / f"wall-{run}.json").write_text(json.dumps({"run": run, "exit": 0,
                                                               "wall_s": one_s if run == "one" else two_s}))
    if two_changes is not None:
        _with_interval(tmp_path / "two" / CASE / "result.json", **two_changes)
    (tmp_path / "plan.json").write_text(json.dumps({"predictions": [{"gpus": 1, "makespan_s": 990.0},
                                                                   {"gpus": 2, "makespan_s": planned_two}]}))
    return tmp_path


def test_speedup_plan_error_and_agreement(tmp_path):
    result = collate.collate(_folder(tmp_path))
    assert result["speedup"] == 1000.0 / 520.0 and result["plan_error_two"] == (500.0 - 520.0) / 520.0
    assert result["figures_judged"] > 0 and result["figures_agreeing"] == result["figures_judged"]
    assert "speedup: 1.92x" in collate.markdown(result)


def test_intervals_apart_disagree_and_a_missing_figure_is_not_judged(tmp_path):
    result = collate.collate(_folder(tmp_path, {"shift": 0.2, "gpu_power_avg_w": None}))
    figures = result["cases"][CASE]
    assert figures["concurrency_efficiency"]["agree"] is False
    assert figures["gpu_power_avg_w"]["agree"] is None and figures["fg_steps_per_s"]["agree"] is None
    assert result["figures_agreeing"] < result["figures_judged"]


def test_a_run_stopped_at_its_limit_has_no_wall_time(tmp_path):
    folder = _folder(tmp_path)
    (folder / "wall-two.json").write_text(json.dumps({"run": "two", "exit": 124, "wall_s": 560.0}))
    result = collate.collate(folder)
    assert result["two_gpus_s"] is None and result["speedup"] is None and result["plan_error_two"] is None
