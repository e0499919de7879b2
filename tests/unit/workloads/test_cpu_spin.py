"""The CPU spinner: a command workload that keeps one CPU busy, reports its steps through the
progress protocol, ends after its steps, and never imports torch (so it opens no CUDA context)."""
import os
import subprocess
import sys

import pytest

from pytest_gpu_pairs.protocol import Progress

SPIN = ("import sys; from pytest_gpu_pairs.workloads.cpu_spin import main; code = main(sys.argv[1:]); "
        "print('torch' in sys.modules); sys.exit(code)")


def test_it_reports_every_step_and_its_end_without_torch(tmp_path):
    progress = tmp_path / "p.jsonl"
    done = subprocess.run([sys.executable, "-c", SPIN, "--steps", "30", "--step-s", "0.002"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "GPU_PAIRS_PROGRESS": str(progress)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Epoch 1", "False"]
    read = Progress.read(progress)
    assert read.ready_t is not None and read.total_steps == 30 and read.result["steps"] == 30


@pytest.mark.parametrize("args", [["--steps", "0"], ["--step-s", "0"], ["--step-s", "nan"]])
def test_a_run_of_no_steps_or_no_work_is_refused(args):
    done = subprocess.run([sys.executable, "-m", "pytest_gpu_pairs.workloads.cpu_spin", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--steps must be at least 1" in done.stderr
