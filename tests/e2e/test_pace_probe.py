"""The pace probe on the CPU: two jobs timed alone and together, with and without CPU burners,
a row per condition, and no job or burner left running afterwards. Short windows and settling
times keep its load on CI's two cores brief, as other tests time cases beside it."""
import json
import subprocess
import sys

import psutil
import pytest
from support.helpers import REPO

pytest.importorskip("torch")


def probe_processes() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if ("--scale 100" in line and "pytest_gpu_pairs.workloads" in line) or "while True: pass" in line:
            found.append(process)
    return found


def test_the_probe_writes_a_row_per_condition_and_ends_every_process(tmp_path):
    out = tmp_path / "pace.jsonl"
    done = subprocess.run([sys.executable, "-m", "tools.default_method.pace_probe", "--models", "mnist_ff", "mnist_ff",
                           "--cpus", "0", "0", "--window", "0.5", "--settle", "0.2", "--repeats", "1", "--device", "cpu",
                           "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["condition"] for row in rows] == ["host pace", "CPU burner on each job's CPU"]
    for row in rows:
        assert row["efficiency"] > 0 and row["bound_2_over_u_sum"] is None
        assert set(row["alone"]) == {"mnist_ff-0", "mnist_ff-1"}
    assert probe_processes() == []
