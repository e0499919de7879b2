"""The teardown study's step without a GPU: its readings over a fake NVML have the committed
evidence's shapes, the wait for idle polls until the card is idle or the time is up, a live job
process keeps the card from idle and is named, the step refuses in one line without a GPU, and a
SIGTERM to the step ends the pytest it started (counted)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
from support.helpers import wait_for

from pytest_gpu_pairs.cli import main as cli
from pytest_gpu_pairs.devices.nvml import NvmlUnavailable
from pytest_gpu_pairs.run import cardstate
from pytest_gpu_pairs.run.proctree import JOB_TAG_VAR
from pytest_gpu_pairs.studies.collates import teardown as collate
from pytest_gpu_pairs.studies.steps import teardown

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = [json.loads(line) for line in (ROOT / "reports" / "reference" / "teardown" / "evidence.jsonl")
             .read_text().splitlines()]


class FakeCard:
    """NVML's memory in use and compute processes, one scripted reading after another (the last kept)."""

    def __init__(self, *readings: tuple[float, list[tuple[int, float | None]]]):
        self.readings = list(readings)

    def _next(self):
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def memory_used_mb(self):
        self.now = self._next()
        return self.now[0]

    def compute_processes(self):
        return self.now[1]


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds


def _shapes(lines):
    return [(line["label"], sorted(line)) for line in lines]


def test_the_evidence_has_the_committed_lines_and_collates_the_same_way(tmp_path, monkeypatch):
    card = FakeCard((480.0, []), (480.0, []), (40918.4, [(823, 24308.0), (894, None)]), (480.0, []))
    monkeypatch.setattr(cardstate, "job_processes", lambda: [])

    def leaves_record(argv, index):
        """What pytest leaves of the case: its record, as the committed run's was."""
        case_id, record = teardown.CASES[index], COMMITTED[-2 + index]
        folder = Path(argv[argv.index("--gpu-pairs-out") + 1]) / case_id
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"case_id": case_id, **{k: v for k, v in record.items()
                                                                                if k != "label"}}))

    def part1(argv, root, log, box_s):
        assert argv[argv.index("-k") + 1] == "t01" and box_s == teardown.PART1_BOX_S
        leaves_record(argv, 0)
        return 1

    def part2(argv, root, log, ready, during):
        assert argv[argv.index("-k") + 1] == "t02" and ready.name == "fg.progress.jsonl"
        leaves_record(argv, 1)
        return during(), 2

    monkeypatch.setattr(teardown, "boxed", part1)
    monkeypatch.setattr(teardown, "stopped_mid_case", part2)
    evidence = teardown.measure(card, tmp_path, ROOT, "benchmarks")
    assert _shapes(evidence) == _shapes(COMMITTED)
    assert evidence[3]["compute_processes"] == [[823, 24308.0], [894, 0]]
    assert evidence[-2:] == COMMITTED[-2:]
    settings = json.loads((tmp_path / "teardown.json").read_text())
    assert [p["group"] for p in settings["pairs"]] == ["t01", "t02"]
    assert settings["workloads"]["hog"]["command"] == [sys.executable, "-m", "pytest_gpu_pairs.workloads.gpu_hog"]
    (tmp_path / "evidence.jsonl").write_text("".join(json.dumps(line) + "\n" for line in evidence))
    assert "| after_sigterm | 2 | 0 | 480 | 0 | OK, idle after " in collate.write(tmp_path, ROOT)


def test_a_case_that_left_no_record_is_missing(tmp_path):
    assert teardown.outcome(tmp_path, "t01-x") == {"label": "result_t01-x", "missing": True}


def test_the_wait_for_idle_polls_until_the_memory_is_back(monkeypatch):
    clock = Clock()
    card = FakeCard((30000.0, [(9, 30000.0)]), (9000.0, []), (500.0, []))
    found = cardstate.wait_for_idle(card, 544.0, 15.0, jobs=lambda: [], clock=clock, sleep=clock.sleep)
    assert found["idle_reached"] is True and found["mem_used_mb"] == 500.0 and found["waited_s"] == 0.5


def test_a_card_that_stays_busy_is_not_idle_when_the_time_is_up():
    clock = Clock()
    card = FakeCard((480.0, []))
    found = cardstate.wait_for_idle(card, 544.0, 2.0, jobs=lambda: [4242], clock=clock, sleep=clock.sleep)
    assert found["idle_reached"] is False and found["job_processes"] == [4242] and found["waited_s"] >= 2.0


def _tagged(pid: int) -> bool:
    """Whether the process runs with its job tag: until its exec, a child shows its parent's environment."""
    with contextlib.suppress(psutil.Error):
        return JOB_TAG_VAR in psutil.Process(pid).environ()
    return False


def test_a_leftover_job_process_is_named_and_keeps_the_card_from_idle():
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                           env={**os.environ, JOB_TAG_VAR: "999999999:leftover"}, start_new_session=True)
    try:
        wait_for(lambda: _tagged(job.pid), timeout_s=30, what="the leftover job's exec")
        clock = Clock()
        found = cardstate.wait_for_idle(FakeCard((480.0, [])), 544.0, 1.0, clock=clock, sleep=clock.sleep)
        assert job.pid in found["job_processes"] and found["idle_reached"] is False
    finally:
        job.kill()
        job.wait()


def test_without_a_gpu_the_step_refuses_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    def no_gpu():
        raise NvmlUnavailable("NVML could not start: NVML Shared Library Not Found")

    monkeypatch.setattr(cardstate, "open_card", no_gpu)
    assert teardown.main(["--out", str(tmp_path / "out"), "--root", str(ROOT)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("teardown: needs an NVIDIA GPU") and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_runner_skips_the_step_on_the_cpu_with_the_reason(tmp_path, capsys):
    assert cli(["study", "run", "teardown", "--device", "cpu", "--root", str(ROOT), "--out", str(tmp_path)]) == 0
    assert "step faults: not run on the CPU (it reads the card's memory" in capsys.readouterr().out
    assert not (tmp_path / "evidence.jsonl").exists()


STEP = textwrap.dedent("""
    import sys
    from pytest_gpu_pairs.run import cardstate
    from pytest_gpu_pairs.studies.steps import teardown

    class Idle:
        def memory_used_mb(self):
            return 480.0

        def compute_processes(self):
            return []

    cardstate.open_card = Idle
    sys.exit(teardown.main(["--out", sys.argv[1], "--root", sys.argv[2], "--suite", "sleepy"]))
""")


def _pytest_child(step: subprocess.Popen, limit_s: float = 30.0) -> psutil.Process:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and step.poll() is None:
        for child in psutil.Process(step.pid).children(recursive=True):
            try:
                if "pytest" in child.cmdline()[1:3]:
                    return child
            except psutil.Error:
                continue
        time.sleep(0.05)
    raise AssertionError("the step started no pytest")


def test_sigterm_to_the_step_ends_its_pytest(tmp_path):
    (tmp_path / "sleepy").mkdir()
    (tmp_path / "sleepy" / "test_sleepy.py").write_text("import time\n\n\ndef test_t01():\n    time.sleep(60)\n")
    out = tmp_path / "out"
    step = subprocess.Popen([sys.executable, "-c", STEP, str(out), str(tmp_path)], start_new_session=True)
    child = None
    try:
        child = _pytest_child(step)
        step.send_signal(signal.SIGTERM)
        code = step.wait(timeout=30)
        _, alive = psutil.wait_procs([child], timeout=5)
        assert not alive, f"pytest {child.pid} outlived the step"
        assert code == 130 and not (out / "evidence.jsonl").exists() and (out / "logs" / "part1_fg_oom.log").exists()
    finally:
        for process in ([child] if child is not None else []):
            with contextlib.suppress(psutil.Error):
                process.kill()
        if step.poll() is None:
            os.killpg(step.pid, signal.SIGKILL)
            step.wait()
