"""Three reference studies run end to end on the CPU through ``gpu-pairs study``, small (one
case, one session, epoch method): run, status, collect, and a second run that finds them done,
with no job left behind."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support.helpers import REPO, XDIST_WORKER_VARS, jobs_started_under

from pytest_gpu_pairs.studies.declaration import find_study

SCALE = "0.004"  # every job 0.4 % of its epochs: the flow is under test, not the figures
SMALL = {  # study -> (a -k expression of one small case, the variant to run: None for all)
    "verdicts": ("g01", None),
    "feasibility_10g": ("g01", "default_method"),
    "command_workloads": ("c03", "epoch"),
}


def _study(*args, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in XDIST_WORKER_VARS}
    return subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.cli", "study", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_reference_study_runs_end_to_end_on_the_cpu(name, tmp_path):
    select, variant = SMALL[name]
    out = tmp_path / name
    narrowing = ["-k", select, "--sessions", "1", *(["--variant", variant] if variant else [])]
    ran = _study("run", name, "--device", "cpu", "--scale", SCALE, *narrowing, "--out", out,
                 "--pytest-arg=--gpu-pairs-method=epoch")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    runs = json.loads((out / "runs.json").read_text())
    assert runs and all(attempts[-1]["exit"] in (0, 1) for attempts in runs.values())
    assert jobs_started_under(out) == []

    status = _study("status", name, "--device", "cpu", *narrowing, "--out", out)
    assert status.returncode == 0 and "0 left" in status.stdout, status.stdout

    collected = _study("collect", name, "--out", out)
    assert collected.returncode == 0, collected.stderr
    json_name, table_name = find_study(name).summary_files[:2]
    summary = json.loads((out / json_name).read_text())
    assert summary and (out / table_name).read_text() == collected.stdout

    again = _study("run", name, "--device", "cpu", "--scale", SCALE, *narrowing, "--out", out)
    assert again.returncode == 0 and "done earlier, skipped" in again.stdout and "pytest started" not in again.stdout
