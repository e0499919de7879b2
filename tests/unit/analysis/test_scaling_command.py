"""`gpu-pairs scale` on stored records: the table and its JSON, the predecessor's question
answered, and records that cannot be trusted refused in one line."""
import json

import pytest

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.record.store import save_result


def record(gpus, step, half=0.002, memory=0.5, model="vulberta_mlp", group="sc02", **extra):
    return {"case_id": f"{group}-{model}-gpus{gpus}", "design": "scaling", "mode": "scaling", "variant": f"gpus{gpus}",
            "fg_model": model, "fg_hparams": {"batch_size": 1}, "gpus": gpus, "per_gpu_batch": 1,
            "step_time_s": step, "step_time_ci": [step - half, step + half], "step_time_blocks": 10,
            "peak_memory_fraction": memory, "card_memory_mb": 5000.0, "memory_headroom_mb": 5000.0 * (1 - memory),
            "gpu_util_avg_pct": 95.0, "comm_share": 0.1 if gpus > 1 else 0.0, "device": "NVIDIA H200",
            "failure": None, "oom": False, **extra}


@pytest.fixture
def results(tmp_path):
    out = tmp_path / "out"
    for data in (record(1, 0.040, memory=0.90), record(2, 0.044, memory=0.935)):
        save_result(out / data["case_id"], data)
    return out


def scale(capsys, *args):
    code = cli.main(["scale", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_two_measured_counts_give_bounds_beyond_them_and_no_fitted_prediction(results, capsys):
    code, out, _ = scale(capsys, results, "--current-gpus", "4", "--gpus", "6", "--remaining-hours", "216",
                         "--step-time-s", "2.6", "--memory-fraction", "0.935", "--restart-cost-min", "30")
    assert code == 0
    assert "sc02-vulberta_mlp: vulberta_mlp, per-GPU batch 1, measured on NVIDIA H200 at 1, 2 GPU(s)" in out
    lines = out.splitlines()
    assert any(line.split()[:3] == ["6", "bounded", "(two"] for line in lines)
    assert not any(line.split()[:2] == ["6", "predicted"] for line in lines)
    assert "decision: 4 -> 6 GPUs (predicted)" in out and "beyond the measured counts: step time x" in out
    assert "no fitted step time (two counts)" in out
    assert "global batch 4 -> 6 (x1.5)" in out
    criteria = {name: next(line for line in lines if line.startswith(f"    {name}  "))
                for name in ("memory per GPU on 6", "time saved vs restart cost", "global batch on 4")}
    assert " fail " in criteria["memory per GPU on 6"] and " fail " in criteria["global batch on 4"]
    assert "bounded: worst case to best case" in criteria["time saved vs restart cost"]
    assert "recommendation: stay on 4 GPU(s) (fails: memory per GPU on 6, global batch on 4)" in out


def test_three_measured_counts_give_a_fitted_prediction_beside_the_bounds(results, capsys):
    data = record(4, 0.046, memory=0.935)
    save_result(results / data["case_id"], data)
    code, out, _ = scale(capsys, results, "--current-gpus", "4", "--gpus", "6", "--remaining-hours", "216",
                         "--memory-threshold", "1.0", "--util-threshold", "1.0", "--max-global-batch", "8")
    lines = out.splitlines()
    row = next(line for line in lines if line.split()[:2] == ["6", "predicted"])
    assert "0.04667" in row and " to " in row  # the ring's 0.040 + 0.004 x 5/3, and the bounds beside
    assert "(1 degree(s) of freedom)" in out
    assert " pass " in next(line for line in lines if line.startswith("    time saved vs restart cost  "))
    assert "recommendation: switch to 6 GPUs" in out


def test_the_json_holds_every_figure_with_its_interval(results, capsys):
    data = record(4, 0.046, memory=0.935)
    save_result(results / data["case_id"], data)
    code, out, _ = scale(capsys, results, "--current-gpus", "4", "--gpus", "4,6", "--remaining-hours", "216",
                         "--memory-threshold", "1.0", "--util-threshold", "1.0", "--max-global-batch", "8", "--json")
    data = json.loads(out)
    workload = data["workloads"][0]
    assert code == 0 and workload["measured_gpus"] == [1, 2, 4]
    rows = {row["gpus"]: row for row in workload["rows"]}
    assert rows[2]["scaling_efficiency"] == pytest.approx(0.040 / 0.044)
    assert rows[6]["basis"] == "predicted (ring)"
    assert rows[6]["step_time_s"] == pytest.approx(0.040 + 0.004 * 5 / 3)
    low, high = rows[6]["step_time_ci"]
    assert low < rows[6]["step_time_s"] < high
    assert set(rows[6]["alternatives_step_time_s"]) == {"log2", "linear"}
    assert rows[6]["bounds"]["best_s"] == pytest.approx(0.046) and rows[6]["bounds"]["worst_s"] > 0.046
    decision = workload["decisions"][0]
    assert decision["target_gpus"] == 6 and decision["recommendation"] == "switch"
    assert decision["memory_fraction"] == pytest.approx(0.935)  # measured on 4: the same per GPU
    assert decision["bounds"]["step_ratio"][0] == pytest.approx(1.0)


def test_the_hosts_all_reduce_can_set_the_worst_case(results, capsys, tmp_path):
    """A slow link: the step without its all-reduce plus a ring all-reduce of 1 GB at 1 GB/s."""
    data = record(2, 0.044, no_sync_step_time_s=0.040)
    save_result(results / data["case_id"], data)
    bandwidth = tmp_path / "bandwidth.json"
    bandwidth.write_text(json.dumps({"bytes": 1e9, "counts": {"2": {"busbw_gb_s": 1.0}}}))
    code, out, _ = scale(capsys, results, "--gpus", "4", "--bandwidth", bandwidth, "--json")
    row = next(r for r in json.loads(out)["workloads"][0]["rows"] if r["gpus"] == 4)
    assert code == 0 and row["bounds"]["worst_s"] == pytest.approx(0.040 + 1.5 * 1.0)
    assert "ring all-reduce of 1000 MB at 1 GB/s" in row["bounds"]["worst_basis"]
    bandwidth.write_text(json.dumps({"bytes": 1e9, "counts": {"2": {"busbw_gb_s": -1}}}))
    code, _, err = scale(capsys, results, "--gpus", "4", "--bandwidth", bandwidth)
    assert code == 2 and f"{bandwidth}: $.counts.2.busbw_gb_s: expected the bus bandwidth" in err


def test_one_measured_count_gives_measurements_and_says_why_there_is_no_prediction(tmp_path, capsys):
    data = record(1, 0.04)
    save_result(tmp_path / data["case_id"], data)
    code, out, _ = scale(capsys, tmp_path)
    assert code == 0 and "no prediction: expected step times at two GPU counts or more" in out


def test_failed_and_other_designs_records_are_left_out(results, capsys):
    failed = record(4, 0.05, failure="rank1 ran out of memory: CUDA out of memory")
    save_result(results / failed["case_id"], failed)
    save_result(results / "g01-mnist+resnet20-default-concurrent",
                {"case_id": "g01-mnist+resnet20-default-concurrent", "design": "pairs", "mode": "concurrent"})
    code, out, _ = scale(capsys, results)
    assert code == 0 and "left out: 1 failed or incomplete scaling record(s)" in out
    assert "at 1, 2 GPU(s)" in out


@pytest.mark.parametrize("change, expected", [
    ({"step_time_s": -1.0}, "$.step_time_s: expected a step time in seconds above 0"),
    ({"step_time_ci": [0.05, 0.06]}, "$.step_time_ci: expected [low, high] holding step_time_s"),
    ({"step_time_blocks": 1}, "$.step_time_blocks: expected the number of batch means"),
    ({"gpus": 0}, "$.gpus: expected the case's GPU count"),
])
def test_an_untrustworthy_record_is_one_line_naming_the_file_and_key(results, capsys, change, expected):
    data = {**record(2, 0.044), **change}
    save_result(results / data["case_id"], data)
    code, out, err = scale(capsys, results)
    assert code == 2 and out == ""
    assert err.startswith(f"gpu-pairs scale: {results / data['case_id'] / 'result.json'}: {expected}")
    assert len(err.strip().splitlines()) == 1


def test_an_unknown_workload_is_named_with_those_there(results, capsys):
    code, _, err = scale(capsys, results, "--workload", "resnet20")
    assert code == 2 and "no workload 'resnet20' in the results (there: sc02-vulberta_mlp)" in err


@pytest.mark.parametrize("args, expected", [
    (["--gpus", "4,x"], "expected GPU counts such as 4,6"),
    (["--memory-threshold", "85"], "expected a fraction such as 0.85"),
    (["--remaining-steps", "10", "--remaining-hours", "2"], "not allowed with argument"),
    (["--restart-cost-min", "-5"], "expected a number above 0"),
])
def test_bad_options_are_usage_errors(results, capsys, args, expected):
    with pytest.raises(SystemExit) as info:
        cli.main(["scale", str(results), *args])
    assert info.value.code == 2 and expected in capsys.readouterr().err


def test_a_second_gpu_that_made_steps_shorter_gives_no_impossible_prediction(tmp_path, capsys):
    """A disturbed one-GPU run (3.8 s) beside an undisturbed two-GPU run (0.84 s): a free fit would
    give a negative all-reduce cost and negative step times beyond two GPUs; the cost is held at 0."""
    for data in (record(1, 3.787, half=0.6), record(2, 0.842, half=0.15)):
        save_result(tmp_path / data["case_id"], data)
    code, out, _ = scale(capsys, tmp_path, "--current-gpus", "4", "--gpus", "6", "--remaining-hours", "216", "--json")
    workload = json.loads(out)["workloads"][0]
    assert code == 0 and workload["fit"]["c_s"] == 0.0 and workload["fit"]["c_held_at_zero"]
    bounds = next(r for r in workload["rows"] if r["gpus"] == 6)["bounds"]
    assert bounds["best_s"] == pytest.approx(0.842) and bounds["worst_s"] == pytest.approx(0.842 + 0.15)
    decision = workload["decisions"][0]
    assert decision["step_ratio"] is None and decision["time_target_h"] is None  # two counts: nothing fitted beyond
    assert 0 < decision["bounds"]["step_ratio"][0] <= decision["bounds"]["step_ratio"][1]


def test_a_negative_communication_share_within_noise_is_shown_as_zero_with_its_reading():
    from pytest_gpu_pairs.analysis.scaling.command import _comm

    assert _comm(-0.008, [-0.044, 0.028]) == "0 (read -0.8% [-4.4%, 2.8%])"
    assert _comm(-0.2, [-0.3, -0.1]).endswith("! (below 0)")
    assert _comm(0.092, [0.027, 0.156]) == "9.2%"
    assert _comm(None, None) == "-"
