"""A user's own repository, described by a seed-style models_config.json, runs as a pair in a real
pytest session (command workloads: no torch)."""
import json

from support.helpers import SUITE, jobs_started_under, pair

TRAIN_SCRIPT = """#!/usr/bin/env python3
import argparse, time
p = argparse.ArgumentParser()
p.add_argument("-n"); p.add_argument("-e", type=int, default=1); p.add_argument("--lr", type=float)
a = p.parse_args()
for epoch in range(a.e):
    print(f"Epoch {epoch + 1}", flush=True)
    time.sleep(1.0)
print(f"Test Accuracy: {90 + a.e}.5%", flush=True)
"""


def test_a_users_repository_from_a_seed_style_models_config_runs_as_a_pair(pytester):
    repo = pytester.path / "repos" / "toy"
    repo.mkdir(parents=True)
    script = repo / "train.sh"
    script.write_text(TRAIN_SCRIPT)
    script.chmod(0o755)
    (pytester.path / "models_config.json").write_text(json.dumps({"models": {"toy": {
        "path": "repos/toy", "train_script": "./train.sh", "models": ["small"], "model_flag": "-n",
        "supported_hyperparams": {"epochs": {"flag": "-e", "type": "int", "default": 2},
                                  "learning_rate": {"flag": "--lr", "type": "float", "default": 0.1}},
        "performance_metrics": {"log_patterns": {"test_accuracy": "Test Accuracy[:\\s]+([0-9.]+)"}},
        "progress_pattern": "^Epoch (?P<epoch>\\d+)"}}}))
    settings = pytester.path / "exp.json"
    settings.write_text(json.dumps({"name": "exp", "workloads_file": "models_config.json",
                                    "defaults": {"method": "epoch", "restart_delay_s": 0.2, "timeout_s": 60},
                                    "pairs": [pair("g01", "toy_small", "toy_small", {"epochs": 3}, {"epochs": 5})]}))
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "results"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "--benchmark-json", pytester.path / "b.json")
    result.assert_outcomes(passed=1)
    info = json.loads((pytester.path / "b.json").read_text())["benchmarks"][0]["extra_info"]
    assert info["perf"]["test_accuracy"] == 93.5
    assert info["fg_model"] == "toy_small" and info["bg_runs"] >= 1
    assert info["concurrency_efficiency"] is not None and info["bg_progress_source"] == "log"  # its epochs, read
    assert jobs_started_under(out) == []
