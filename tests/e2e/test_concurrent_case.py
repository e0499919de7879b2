"""A real concurrent case on the CPU under the epoch method: real training processes, real
background loop, real results."""
import json

from support.helpers import DESIGN_KEYS, SUITE, jobs_started_under, pair


def test_concurrent_case_runs_end_to_end_on_cpu(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = pytester.path / "exp.json"
    settings.write_text(json.dumps({"name": "exp", "defaults": {"method": "epoch", "restart_delay_s": 0.5, "timeout_s": 300},
                                    "pairs": [pair("g01", "mnist_ff", "mnist", {"epochs": 3}, {"epochs": 10})]}))
    out = pytester.path / "results"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-scale", "0.003", "--gpu-pairs-out", out,
                                           "--benchmark-json", pytester.path / "bench.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpu-pairs results*", "device: cpu*", "g01-mnist_ff+mnist-default-concurrent*",
                                 "not measured here *", "*GPU figures do not apply  [[]* keys: *gpu_energy_j*"])

    bench = json.loads((pytester.path / "bench.json").read_text())
    info = bench["benchmarks"][0]["extra_info"]
    assert set(DESIGN_KEYS) <= set(info)
    assert info["device"] == "cpu" and info["mode"] == "concurrent" and info["oom"] is False
    assert info["fg_duration_s"] > 0 and info["fg_solo_duration_s"] > 0 and info["fg_slowdown"] > 0
    assert info["bg_runs"] >= 1 and 0 < info["bg_coverage"] <= 1
    assert info["concurrency_efficiency"] is not None
    assert info["gpu_energy_j"] is None and "gpu_energy_j" in info["notes"]
    assert "test_accuracy" in info["perf"]
    case_dir = out / "g01-mnist_ff+mnist-default-concurrent"
    saved = json.loads((case_dir / "result.json").read_text())
    assert saved["complete"] and saved["fg_slowdown"] == info["fg_slowdown"]
    assert (case_dir / "fg.log").exists() and (case_dir / "bg-run-001.log").exists()
    assert (case_dir / "bg-runs.jsonl").read_text().count("\n") == info["bg_runs"]
    assert jobs_started_under(out) == []
