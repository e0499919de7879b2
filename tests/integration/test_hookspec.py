"""Other plugins add to what gpu-pairs records through its hooks, and cannot overwrite a figure."""
import json
import sys

from support.helpers import FAKE_JOB, SUITE

PLUGIN = """
def pytest_gpu_pairs_record(case, record):
    return {"cluster_node": "node-7", "fg_model": "overwritten", "seen_case": case.id}

def pytest_gpu_pairs_machine_info(config, machine_info):
    machine_info["gpu_pairs"]["rack"] = "r12"
"""


def _settings(path):
    job = {"command": [sys.executable, str(FAKE_JOB)],
           "hyperparameters": {"steps": {"type": "int", "flag": "--steps"}, "protocol": {"type": "bool", "flag": "--protocol"}}}
    path.write_text(json.dumps({
        "name": "hooks", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 120},
        "workloads": {"trainer": job, "loader": job},
        "pairs": [{"group": "h1", "foreground": {"model": "trainer", "hyperparameters": {"steps": 3, "protocol": True}},
                   "background": {"model": "loader", "hyperparameters": {"steps": 40, "protocol": True}}}]}))
    return path


def test_a_plugin_adds_record_keys_and_machine_info_but_keeps_ours(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest(PLUGIN)
    settings = _settings(pytester.path / "hooks.json")
    out, bench = pytester.path / "out", pytester.path / "bench.json"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "--benchmark-json", bench, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / "h1-trainer+loader-default-concurrent" / "result.json").read_text())
    assert record["cluster_node"] == "node-7" and record["seen_case"] == "h1-trainer+loader-default-concurrent"
    assert record["fg_model"] == "trainer" and record["plugin_keys"] == ["cluster_node", "seen_case"]
    saved = json.loads(bench.read_text())
    assert saved["benchmarks"][0]["extra_info"]["cluster_node"] == "node-7"
    assert saved["machine_info"]["gpu_pairs"]["rack"] == "r12"
