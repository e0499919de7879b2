"""Real training scripts as command workloads on the CPU, tiny: the H100 study's script
(settings/command_workloads/word_language_model.py, read through its progress_pattern) and the
complete example of docs/progress.md (through ``pytest_gpu_pairs.progress``), paired."""
import json
import re
import subprocess
import sys

from support.helpers import REPO, SUITE, jobs_started_under

from pytest_gpu_pairs.experiment.load import load_workloads_file
from pytest_gpu_pairs.run.joblog import parse_log_metrics
from pytest_gpu_pairs.run.logprogress import LogProgress

TOOL = REPO / "settings" / "command_workloads"
SMALL_BATCHES, SMALL_INTERVAL = 11, 2  # --small: 8000 tokens / 20 / 35 bptt, a line every 2 batches


def docs_example() -> str:
    """The first Python block of docs/progress.md: the complete example script."""
    text = (REPO / "docs" / "progress.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_study_script_prints_lines_its_progress_pattern_reads(tmp_path):
    log = tmp_path / "script.log"
    with open(log, "w") as handle:
        done = subprocess.run([sys.executable, str(TOOL / "word_language_model.py"), "--small", "--epochs", "2"],
                              stdout=handle, stderr=subprocess.STDOUT, timeout=600, check=False)
    assert done.returncode == 0, log.read_text()
    workload = load_workloads_file(TOOL / "workloads.json")["lstm_lm_script"]
    parser = LogProgress(workload.progress_regex)
    for t, line in enumerate(log.read_text().splitlines()):
        parser.feed(line, float(t))
    per_epoch = list(range(SMALL_INTERVAL, SMALL_BATCHES, SMALL_INTERVAL))
    assert [s for _, s in parser.progress().steps] == per_epoch + [SMALL_BATCHES + b for b in per_epoch]
    assert set(parse_log_metrics(str(log), workload.log_patterns)) == {"test_loss", "test_ppl"}


def test_the_study_script_and_the_docs_example_measured_as_a_pair_on_the_cpu(pytester):
    """The script that only prints in the foreground, the docs' example (the progress API) in the
    background: both jobs' steps are read, the efficiency is computed."""
    (pytester.path / "train.py").write_text(docs_example())
    settings = {"name": "scripts", "workloads_file": str(TOOL / "workloads.json"),
                "workloads": {"classifier": {"command": [sys.executable, "train.py"],
                                             "log_patterns": {"accuracy": r"Accuracy: ([0-9.]+)"},
                                             "hyperparameters": {"epochs": {"flag": "--epochs", "type": "int",
                                                                            "default": 3}}}},
                "defaults": {"method": "epoch", "restart_delay_s": 0.5, "timeout_s": 600},
                "pairs": [{"group": "c01",
                           "foreground": {"model": "lstm_lm_script",
                                          "hyperparameters": {"cuda": False, "small": True, "epochs": 1}},
                           "background": {"model": "classifier", "hyperparameters": {"epochs": 40}}}]}
    path = pytester.path / "s.json"
    path.write_text(json.dumps(settings))
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", path, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "--min-efficiency", "0", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / "c01-lstm_lm_script+classifier-default-concurrent" / "result.json").read_text())
    assert record["fg_progress_source"] == "log" and record["bg_progress_source"] == "protocol"
    assert record["duration_basis"] == "training" and record["concurrency_efficiency"] is not None
    assert set(record["perf"]) == {"test_loss", "test_ppl"}
    assert jobs_started_under(out) == []
