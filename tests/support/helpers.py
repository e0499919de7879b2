"""Shared helpers of the plugin's own tests: paths, settings builders, and process checks.

Imported as ``support.helpers`` by tests at every level (tests/ is on ``sys.path`` through pytest's
rootdir-relative ``prepend`` import of tests/conftest.py and of the test packages below tests/).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DATA = TESTS / "data"
H100_DATA = DATA / "h100"  # copies of real H100 records, the first device run
PREDECESSOR_DATA = DATA / "predecessor"  # the predecessor's seed files the tests read, copied as they were

DESIGN_KEYS = ["case_id", "design", "variant", "mode", "fg_model", "bg_model", "fg_hparams", "bg_hparams", "fg_duration_s", "fg_solo_duration_s", "fg_slowdown", "bg_progress_ratio", "concurrency_efficiency", "gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "energy_split_method", "cpu_energy_j", "cpu_energy_method", "gpu_power_avg_w", "gpu_power_max_w", "gpu_util_avg_pct", "gpu_temp_max_c", "peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb", "oom", "fg_exit_code", "bg_runs", "bg_failures", "bg_coverage", "perf", "device", "sharing", "sample_hz", "notes"]

# The pytest sessions the tests start (conftest's standalone_pytest) leave out Hypothesis's plugin,
# which imports all of Hypothesis in each session's terminal summary, and the variables of the
# pytest-xdist worker that may run the test, which would turn pytest-benchmark off in them
WITHOUT_HYPOTHESIS = "-p no:hypothesispytest"
XDIST_WORKER_VARS = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")

SUITE = "def test_pair(gpu_pair_case, pair_run):\n    pair_run().check()\n"

FAKE_JOB = TESTS / "support" / "fake_job.py"
LOG_JOB = TESTS / "support" / "log_job.py"  # prints a real tool's log format (tests/data/logformats)
LOG_FORMATS = DATA / "logformats"
FAKE_MPS_CONTROL = TESTS / "support" / "fake_mps_control.py"


def write_settings(path: Path, pairs, **top) -> Path:
    data = {"name": top.pop("name", "t"), "pairs": pairs, **top}
    path.write_text(json.dumps(data))
    return path


def pair(group="g01", fg="mnist_ff", bg="resnet20", fg_hp=None, bg_hp=None, **extra):
    return {"group": group, "foreground": {"model": fg, "hyperparameters": fg_hp or {"epochs": 1}},
            "background": {"model": bg, "hyperparameters": bg_hp or {"epochs": 1}}, **extra}


def descendants_of_this_process() -> list[int]:
    return [p.pid for p in psutil.Process(os.getpid()).children(recursive=True)]


def jobs_started_under(directory) -> list[psutil.Process]:
    """Live job processes whose progress file lies under ``directory`` (leaked ones included)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("GPU_PAIRS_PROGRESS", "").startswith(str(directory)) \
                    and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def mps_processes(pipe_dir) -> list[psutil.Process]:
    """Live (non-zombie) processes bound to the MPS pipe directory ``pipe_dir``: daemon and servers."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and \
                    process.environ().get("CUDA_MPS_PIPE_DIRECTORY") == str(pipe_dir):
                found.append(process)
        except psutil.Error:
            continue
    return found


def alive_pids(folder) -> list[int]:
    """Pids written by the processes of fake jobs (tests/support/fake_job.py) that still live."""
    alive = []
    for pid_file in sorted(Path(folder).glob("*")) if Path(folder).is_dir() else []:
        try:
            if psutil.Process(int(pid_file.read_text())).status() != psutil.STATUS_ZOMBIE:
                alive.append(int(pid_file.read_text()))
        except (psutil.Error, ValueError):
            continue
    return alive


def wait_for(condition, timeout_s: float = 120.0, what: str = "condition"):
    """Poll ``condition`` until it is truthy; generous, because CI machines are slow and shared."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def with_rounds(record: dict, keys, n: int = 5, spread: float = 0.01) -> dict:
    """The record as if measured in ``n`` rounds around its values (+-spread, symmetric, so the mean
    stays the value): what a comparison needs to tell a change from noise."""
    offsets = [spread * (2 * i / (n - 1) - 1) for i in range(n)]
    rounds = [{key: record[key] * (1 + o) for key in keys if isinstance(record.get(key), (int, float))} for o in offsets]
    return {**record, "rounds": rounds, "repeats": n}


def with_peak_allocation(read):
    """``read()``'s value and the peak bytes Python allocated while it ran (tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        value = read()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
