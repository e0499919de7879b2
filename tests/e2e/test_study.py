"""The study's designs run for real on the CPU: solo cases feeding the baselines, repeats on record."""
import json

import pytest
from support.helpers import SUITE, jobs_started_under

SCALE = "0.003"


def _write(path, data):
    path.write_text(json.dumps(data))
    return path


def test_a_study_pair_and_a_repeated_case_run_on_cpu(pytester):
    """One pair of the study (one varied hyperparameter: 7 runs), and a pairs case with two repeats
    whose foreground baseline no solo case measured, so it lands under _solo/. The study's background
    trains six times the foreground's steps a run, so that under load no restart falls inside a
    foreground run (a run it covered less than 95 % of would be refused)."""
    pytester.makepyfile(test_suite=SUITE)
    defaults = {"restart_delay_s": 0.5, "timeout_s": 300}
    study = _write(pytester.path / "study.json", {
        "name": "study", "design": "hp_study", "defaults": defaults, "vary": {"learning_rate": [0.2, 5.0]},
        "pairs": [{"group": "s1", "foreground": {"model": "mnist_ff", "hyperparameters": {"epochs": 2}},
                   "background": {"model": "mnist", "hyperparameters": {"epochs": 12}}}]})
    repeated = _write(pytester.path / "repeated.json", {
        "name": "repeated", "defaults": {**defaults, "method": "epoch", "runs_per_config": 2},
        "pairs": [{"group": "r1", "foreground": {"model": "mnist_ff", "hyperparameters": {"epochs": 1}},
                   "background": {"model": "mnist", "hyperparameters": {"epochs": 12}}}]})
    out = pytester.path / "results"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", study, "--gpu-pairs-settings", repeated,
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-scale", SCALE,
                                           "--gpu-pairs-out", out, "--gpu-pairs-min-efficiency", "0",
                                           "--benchmark-json", pytester.path / "bench.json")
    result.assert_outcomes(passed=8)
    infos = {b["extra_info"]["case_id"]: b["extra_info"] for b in json.loads((pytester.path / "bench.json").read_text())["benchmarks"]}
    assert len(infos) == 8

    solo_ids = ["s1-mnist+none-default-solo", "s1-mnist_ff+none-default-solo", "s1-mnist_ff+none-lr_min-solo",
                "s1-mnist_ff+none-lr_max-solo"]
    for variant in ("default", "lr_min", "lr_max"):
        concurrent = infos[f"s1-mnist_ff+mnist-{variant}-concurrent"]
        solo = infos[f"s1-mnist_ff+none-{variant}-solo"]
        assert solo["mode"] == "solo" and solo["fg_hparams"] == concurrent["fg_hparams"]
        assert concurrent["fg_solo_duration_s"] == solo["fg_duration_s"]  # the solo case is the baseline
        assert concurrent["concurrent_overhead"] == pytest.approx(concurrent["fg_slowdown"] - 1)
        assert concurrent["perf_metric"] == "test_accuracy" and concurrent["interference"] is not None
        assert concurrent["sharing_energy_saved_j"] is None and "sharing_energy_saved_j" in concurrent["notes"]
        assert concurrent["bg_solo_steps_per_s"] is not None
    assert infos["s1-mnist_ff+mnist-lr_max-concurrent"]["fg_hparams"]["learning_rate"] == 0.05
    assert all((out / case_id / "result.json").exists() for case_id in solo_ids)

    repeated_info = infos["r1-mnist_ff+mnist-default-concurrent"]
    assert repeated_info["repeats"] == 2 and len(repeated_info["rounds"]) == 2
    assert "fg_duration_s_std" in repeated_info and "concurrent_overhead_std" in repeated_info
    rounds = [json.loads((out / "r1-mnist_ff+mnist-default-concurrent" / f"round-0{i}" / "result.json").read_text())
              for i in (1, 2)]
    assert [r["fg_duration_s"] for r in rounds] == [r["fg_duration_s"] for r in repeated_info["rounds"]]
    baselines = [json.loads(p.read_text()) for p in (out / "_solo").glob("*/result.json")]
    assert [(b["mode"], b["fg_model"], b["fg_hparams"]["epochs"]) for b in baselines] == [("solo", "mnist_ff", 1)]
    assert jobs_started_under(out) == []
