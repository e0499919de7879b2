"""The teardown study's step: two faults on a GPU, and the card read from NVML before, during and
after each, to show that no process of the case is left and the memory goes back to idle.

    python -m pytest_gpu_pairs.studies.steps.teardown --out OUT --root ROOT

Part 1 (t01): a foreground that runs out of CUDA memory beside a background holding 60 % of the card,
in a pytest session with a time box (SIGTERM after ``PART1_BOX_S``, exit recorded as 124, as
``timeout`` does). Part 2 (t02): pytest is started, the card read once the case's foreground is
ready, then pytest alone gets SIGTERM mid-case, as a user's kill would reach it. After each part the
card is polled until idle (``run.cardstate``). The jobs are ``workloads.gpu_hog``; a job's second
invocation (the first is its solo baseline) holds on until it is killed.

It writes ``teardown.json`` (the settings), ``results/`` (both sessions), ``logs/part*.log`` and
last, whole, ``evidence.jsonl``: one observation a line, which ``gpu-pairs study collect teardown``
turns into ``teardown.md``. Every pytest it starts is ended however it returns; a SIGTERM to the
step ends its pytest first. Job processes the harness left in ``results/`` are ended at the end and
named on standard output (the evidence already counts them).
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record.store import RESULT, StoreError, atomic_write_text, read_record
from pytest_gpu_pairs.run import cardstate
from pytest_gpu_pairs.run.proctree import reap_orphans
from pytest_gpu_pairs.studies.runner import end_session

SETTINGS, EVIDENCE, RESULTS, STATE, LOGS = "teardown.json", "evidence.jsonl", "results", "state", "logs"
HOG = "pytest_gpu_pairs.workloads.gpu_hog"
CASES = ("t01-hog+hog-default-concurrent", "t02-hog+hog-default-concurrent")
IDLE_MARGIN_MB = 64.0  # above the idle card's memory in use: still idle (the driver's own share moves a little)
IDLE_WAIT_S = 15.0
PART1_BOX_S = 55.0
READY_BOX_S = 45.0
SIGTERM_WAIT_S = 90.0  # pytest's own teardown after SIGTERM; after it its session is ended outright
TIMED_OUT = 124


def settings(state: Path) -> dict[str, Any]:
    """Two pairs of hogs: t01's jobs each fit alone and not together, so the foreground (the second to
    allocate) runs out of memory; t02's fit together and train until pytest is stopped."""
    hyperparameters = {"mem_frac": {"type": "float", "flag": "--mem-frac"}, "steps": {"type": "int"},
                       "step_s": {"type": "float", "flag": "--step-s"},
                       "hang_run": {"type": "int", "flag": "--hang-run"}, "state": {"type": "str"}}

    def job(frac: float, tag: str, **extra: int) -> dict[str, Any]:
        return {"model": "hog", "hyperparameters": {"mem_frac": frac, "steps": 20, "state": str(state / tag), **extra}}

    return {"name": "teardown", "defaults": {"restart_delay_s": 0.5, "timeout_s": 90, "ready_timeout_s": 60},
            "workloads": {"hog": {"command": [sys.executable, "-m", HOG], "hyperparameters": hyperparameters}},
            "pairs": [{"group": "t01", "foreground": job(0.45, "t01-fg"), "background": job(0.6, "t01-bg", hang_run=2)},
                      {"group": "t02", "foreground": job(0.2, "t02-fg", hang_run=2),
                       "background": job(0.3, "t02-bg", hang_run=2)}]}


def pytest_argv(suite: str, settings_path: Path, results: Path, select: str) -> list[str]:
    return [sys.executable, "-m", "pytest", suite, "--gpu-pairs-settings", str(settings_path),
            "--gpu-pairs-device", "cuda", "--gpu-pairs-out", str(results), "-p", "no:cacheprovider", "-rA",
            "-k", select]


STARTED: list[subprocess.Popen] = []  # every pytest this step started: ended on the way out, whatever happens


class _Stop:
    """A stop that arrives while a pytest is being started waits until it is registered."""

    starting = False
    asked: Optional[int] = None


def start(argv: list[str], root: Path, log: Path) -> subprocess.Popen:
    """``argv`` in a process session of its own (``end_session`` ends all of it), output in ``log``.
    A stop that arrives while the process is started and registered is raised once it is registered:
    raised between the two, it would leave a pytest nobody knows to end. (Blocking the signal instead
    would hand the blocked mask on to pytest, which would then ignore its own SIGTERM.)"""
    log.parent.mkdir(parents=True, exist_ok=True)
    _Stop.starting = True
    try:
        with open(log, "wb") as handle:
            process = subprocess.Popen(argv, cwd=root, stdout=handle, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        STARTED.append(process)
    finally:
        _Stop.starting = False
    if _Stop.asked is not None:
        raise KeyboardInterrupt(f"signal {_Stop.asked}")
    return process


def stop(process: subprocess.Popen, wait_s: float = SIGTERM_WAIT_S) -> int:
    """SIGTERM to pytest alone, as a user's kill reaches it; its exit status once it ended."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        end_session(process)
        return process.wait()


def boxed(argv: list[str], root: Path, log: Path, box_s: float) -> int:
    """pytest's exit status, or 124 where it ran past ``box_s`` and was stopped."""
    process = start(argv, root, log)
    try:
        return process.wait(timeout=box_s)
    except subprocess.TimeoutExpired:
        stop(process)
        return TIMED_OUT
    finally:
        end_session(process)


def stopped_mid_case(argv: list[str], root: Path, log: Path, ready: Path, during: Callable[[], dict[str, Any]],
                     box_s: float = READY_BOX_S, poll_s: float = 0.2) -> tuple[dict[str, Any], int]:
    """pytest started, the card read (``during``) once the progress file ``ready`` says the job
    trains (or pytest ended, or ``box_s`` passed), then SIGTERM; the reading and pytest's exit status."""
    process = start(argv, root, log)
    try:
        deadline = time.monotonic() + box_s
        while process.poll() is None and time.monotonic() < deadline and not _is_ready(ready):
            time.sleep(poll_s)
        state = during()
        return state, stop(process)
    finally:
        end_session(process)


def _is_ready(progress: Path) -> bool:
    return progress.is_file() and Progress.read(progress, until_ready=True).ready_t is not None


def outcome(results: Path, case_id: str) -> dict[str, Any]:
    """The case's record as the evidence keeps it, or ``missing`` where it left none that reads."""
    label = f"result_{case_id}"
    try:
        record = read_record(results / case_id / RESULT)
    except StoreError:
        return {"label": label, "missing": True}
    return {"label": label, "complete": record.complete, "oom": record.oom, "failure": record.failure,
            "interrupted": record.interrupted}


def measure(card: cardstate.Card, out: Path, root: Path, suite: str) -> list[dict[str, Any]]:
    """Both parts, in order; the evidence lines."""
    results, settings_path = out / RESULTS, out / SETTINGS
    for folder in (results, out / STATE):
        shutil.rmtree(folder, ignore_errors=True)  # a run stopped short leaves invocation counts behind
    atomic_write_text(settings_path, json.dumps(settings(out / STATE), indent=1))
    idle = {"label": "idle_before", **cardstate.reading(card)}
    idle_mb = idle["mem_used_mb"] + IDLE_MARGIN_MB
    evidence = [idle]
    code = boxed(pytest_argv(suite, settings_path, results, "t01"), root, out / LOGS / "part1_fg_oom.log", PART1_BOX_S)
    evidence += [{"label": "pytest_exit_part1", "exit": code},
                 {"label": "after_fg_oom", **cardstate.wait_for_idle(card, idle_mb, IDLE_WAIT_S)}]
    ready = results / CASES[1] / "fg.progress.jsonl"
    during, code = stopped_mid_case(pytest_argv(suite, settings_path, results, "t02"), root,
                                    out / LOGS / "part2_sigterm.log", ready,
                                    lambda: {"label": "during_case_t02", **cardstate.reading(card)})
    evidence += [during, {"label": "pytest_exit_part2", "exit": code},
                 {"label": "after_sigterm", **cardstate.wait_for_idle(card, idle_mb, IDLE_WAIT_S)}]
    return evidence + [outcome(results, case_id) for case_id in CASES]


def _stop(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop: the pytest being ended is not interrupted twice
    _Stop.asked = signum
    if not _Stop.starting:
        raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the study's folder")
    parser.add_argument("--root", type=Path, required=True, help="the checkout whose suite runs the cases")
    parser.add_argument("--suite", default="benchmarks", help="the suite, relative to --root")
    args = parser.parse_args(argv)
    try:
        card = cardstate.open_card()
    except cardstate.NvmlUnavailable as exc:
        print(f"teardown: needs an NVIDIA GPU, and NVML has none here ({exc}); "
              "`gpu-pairs study run teardown --device cpu` skips this step", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop)
    out, root = args.out.resolve(), args.root.resolve()
    try:
        evidence = measure(card, out, root, args.suite)
    except KeyboardInterrupt as stopped:
        print(f"teardown: stopped ({stopped}); its pytest ended, no evidence written", file=sys.stderr)
        return 130
    finally:
        for process in STARTED:
            end_session(process)
        for pid in reap_orphans(out / RESULTS):
            print(f"teardown: job process {pid} was left behind by the harness; ended now", flush=True)
    text = "".join(json.dumps(line) + "\n" for line in evidence)
    atomic_write_text(out / EVIDENCE, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
