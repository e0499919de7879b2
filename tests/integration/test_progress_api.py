"""``pytest_gpu_pairs.progress`` in a real job process: what importing it costs, and a script that
uses it read through the protocol by the harness."""
import json
import os
import subprocess
import sys

from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec

HEAVY = ("torch", "numpy", "pydantic", "psutil", "re2", "pytest", "pandas", "scipy", "pynvml")

SCRIPT = """
import time
from pytest_gpu_pairs import progress
for step in range(1, 31):
    time.sleep(0.02)
    progress.step(step, epoch=step / 30)
print("Accuracy: 0.5", flush=True)
progress.result({"accuracy": 0.5})
"""


def test_importing_the_api_loads_the_standard_library_the_protocol_and_its_input_checks_only():
    code = "import json, sys; import pytest_gpu_pairs.progress; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    loaded = json.loads(done.stdout)
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]
    assert sorted(m for m in loaded if m.startswith("pytest_gpu_pairs")) == \
        ["pytest_gpu_pairs", "pytest_gpu_pairs.inputs", "pytest_gpu_pairs.progress", "pytest_gpu_pairs.protocol"]


def test_a_script_using_the_api_is_read_through_the_protocol(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    spec = JobSpec("bg", "script", [sys.executable, "train.py"], {**os.environ, "PYTHONUNBUFFERED": "1"},
                   str(tmp_path), 120.0, progress_pattern=r"never printed (?P<step>\d+)")
    outcome = JobProcess(spec, tmp_path / "bg.log", tmp_path / "bg.progress.jsonl").run()
    assert outcome.completed and outcome.progress.source == "protocol"
    assert outcome.progress.total_steps == 30 and outcome.metrics == {"accuracy": 0.5}
    assert outcome.duration_basis == "training"
