"""Shared helpers of the plugin's own tests: paths, settings builders, and process checks.

Imported as ``support.helpers`` by tests at every level (tests/ is on ``sys.path`` through pytest's
rootdir-relative ``prepend`` import of tests/conftest.py and of the test packages below tests/).
"""
from __future__ import annotations

import base64
import io
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Optional

import psutil

from pytest_gpu_pairs.record.store import save_result

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


def descendants_of_this_process() -> list[str]:
    """Every process below this one but its own multiprocessing helpers, each as its pid, status and
    command line: a test that finds one it did not start says which (an xdist worker once saw an
    unknown pid here: multiprocessing's resource tracker, which another test in the same worker had
    started and which lives as long as the worker)."""
    return [_described(p) for p in children_of_this_process()]


def children_of_this_process() -> list[psutil.Process]:
    """Every process below this one but its own multiprocessing resource tracker."""
    own = _multiprocessing_helpers()
    return [p for p in psutil.Process(os.getpid()).children(recursive=True) if p.pid not in own]


def _multiprocessing_helpers() -> set[int]:
    """The resource tracker Python starts for this process once any code uses a shared semaphore or
    memory, and keeps for the process's life: this process's own, not a job the test started."""
    from multiprocessing import resource_tracker

    pid = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {pid} if isinstance(pid, int) else set()


def _described(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {process.status()} {' '.join(process.cmdline()[:6])}"
    except psutil.Error:
        return f"{process.pid} (gone while listed)"


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


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
EMBEDDED_TEXT = re.compile(r"data:text/[\w.+-]+(?:;charset=[\w-]+)?;base64,([A-Za-z0-9+/=]+)")  # a report's download links
EMBEDDED_IMAGE = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")
LAST_DIGITS = {"rel_tol": 1e-9, "abs_tol": 1e-12}  # what a numpy or scipy release moves in a float64
ANTI_ALIASING = 0.1  # the most a pixel's channel (0-1) moves when a line's end moves by a float's last digits
MOVED_PIXELS = 0.01  # the share of an image's pixels that may move that little


def differs_beyond_last_digits(made: Path, committed: Path) -> Optional[str]:
    """Where a rebuilt summary differs from the committed one, None where it does not: a text's
    words between numbers must be identical and each number equal to within the last digits a
    float64 keeps (a numpy or scipy release moves the seventeenth), an image's pixels equal but for
    the anti-aliasing such a digit moves, so that the test tells a changed analysis from a changed
    arithmetic or drawing library."""
    if committed.suffix == ".png":
        return _images_differ(made.read_bytes(), committed.read_bytes(), committed.name)
    ours, theirs = made.read_text(), committed.read_text()
    our_images, their_images = EMBEDDED_IMAGE.findall(ours), EMBEDDED_IMAGE.findall(theirs)
    if len(our_images) != len(their_images):
        return f"{committed.name}: {len(our_images)} embedded images, committed {len(their_images)}"
    for index, (a, b) in enumerate(zip(our_images, their_images)):
        if difference := _images_differ(base64.b64decode(a), base64.b64decode(b), f"{committed.name} image {index}"):
            return difference
    ours, theirs = (_with_embedded_text_decoded(EMBEDDED_IMAGE.sub("data:image/png", t)) for t in (ours, theirs))
    our_numbers, their_numbers = NUMBER.findall(ours), NUMBER.findall(theirs)
    if NUMBER.split(ours) != NUMBER.split(theirs) or len(our_numbers) != len(their_numbers):
        return f"{committed.name}: the text differs beyond its numbers"
    for index, (a, b) in enumerate(zip(our_numbers, their_numbers)):
        if a != b and not math.isclose(float(a), float(b), **LAST_DIGITS):
            return f"{committed.name}: number {index} is {a}, committed {b}"
    return None


def _with_embedded_text_decoded(text: str) -> str:
    return EMBEDDED_TEXT.sub(lambda m: base64.b64decode(m.group(1)).decode(), text)


def _images_differ(made: bytes, committed: bytes, name: str) -> Optional[str]:
    if made == committed:
        return None
    import matplotlib.image  # the report extra's, as the summaries it compares
    import numpy

    ours, theirs = (matplotlib.image.imread(io.BytesIO(png), format="png") for png in (made, committed))
    if ours.shape != theirs.shape:
        return f"{name}: {ours.shape} pixels, committed {theirs.shape}"
    moved = numpy.abs(ours - theirs).max(axis=-1)
    if moved.max() > ANTI_ALIASING or (moved > 0).mean() > MOVED_PIXELS:
        return f"{name}: {(moved > 0).mean():.2%} of its pixels moved, by up to {moved.max():.2f}"
    return None


def save_measured_case(session: Path, record: dict, gpu: str = "NVIDIA H200") -> None:
    """A case's record in a session folder whose ``session.json`` names the GPU it ran on, as the
    blind studies' collates read a measured pair: through the store, with the card's facts beside."""
    save_result(session / record["case_id"], record)
    (session / "session.json").write_text(json.dumps({"device": gpu, "idle_power_w": 80.0, "gpu": {
        "name": gpu, "memory_total_mb": 143_771.0, "power_limit_w": 700.0}}))
