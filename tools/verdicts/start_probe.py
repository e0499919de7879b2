"""What moves a start? One built-in started alone many times, each start's steady pace read in short
windows, under conditions that each remove one suspect.

The verdicts study found a pair's efficiency landing at an offset of its own on every start and
keeping it (``reports/reference/verdicts``; ``default_method/run-spread``). Jobs are already
pinned to CPUs of their own, and the SM clock read 1980 MHz in every round, so the suspects left
are the cuDNN autotuner's algorithm choice (``GPU_PAIRS_CUDNN_BENCHMARK=0`` takes the heuristic
choice instead), Python's per-process hash seed (``PYTHONHASHSEED=0``) and which CPUs a start
lands on (``--cpus`` the same every start, or ``rotate`` to move along the cores). A condition
that removes the cause shows a between-start spread near the within-start one.

Each start's steady pace is read from its progress file over ``--windows`` windows of
``--window`` seconds after ``--warmup`` seconds of training; the card's SM clock and temperature
are read at each window. Every process started is ended on the way out.

    python -m tools.verdicts.start_probe --model pcb --starts 4 --conditions default cudnn_heuristic --out starts.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.protocol import ProgressReader

CONDITIONS = {
    "default": {},
    "cudnn_heuristic": {"GPU_PAIRS_CUDNN_BENCHMARK": "0"},
    "hash_seed_fixed": {"PYTHONHASHSEED": "0"},
}


class Card:
    """The card's SM clock and temperature; None without NVML (the probe still runs on a CPU)."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 - any NVML failure means: no card readings here
            self._nvml = self._handle = None

    def state(self) -> dict[str, Optional[int]]:
        if self._nvml is None:
            return {"sm_mhz": None, "temp_c": None}
        return {"sm_mhz": self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM),
                "temp_c": self._nvml.nvmlDeviceGetTemperature(self._handle, self._nvml.NVML_TEMPERATURE_GPU)}


def start_job(model: str, cpus: str, env_extra: dict[str, str], progress: Path, device: str) -> subprocess.Popen:
    env = {**os.environ, "GPU_PAIRS_PROGRESS": str(progress), "GPU_PAIRS_STEADY_STATE": "1", **env_extra}
    command = ["taskset", "-c", cpus, sys.executable, "-m", "pytest_gpu_pairs.workloads", model,
               "--device", device, "--scale", "100", "--epochs=1"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_until_training(reader: ProgressReader, timeout_s: float) -> float:
    start = time.monotonic()
    while reader.read().total_steps < 20:
        if time.monotonic() - start > timeout_s:
            raise RuntimeError(f"{reader.path}: no training within {timeout_s:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - start


def read_windows(reader: ProgressReader, card: Card, windows: int, window_s: float) -> list[dict]:
    rows = []
    for _ in range(windows):
        begin = time.time()
        time.sleep(window_s)
        end = time.time()
        rows.append({"steps_per_s": reader.read().steps_between(begin, end) / (end - begin), **card.state()})
    return rows


def end_job(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def one_start(args: argparse.Namespace, condition: str, number: int, card: Card, folder: Path) -> dict:
    cores = sorted(os.sched_getaffinity(0))
    cpus = args.cpus if args.cpus != "rotate" else ",".join(str(cores[(2 * number + k) % len(cores)]) for k in (0, 1))
    progress = folder / f"{condition}-{number}.progress.jsonl"
    process = start_job(args.model, cpus, CONDITIONS[condition], progress, args.device)
    try:
        reader = ProgressReader(progress)
        startup_s = wait_until_training(reader, args.timeout)
        time.sleep(args.warmup)
        windows = read_windows(reader, card, args.windows, args.window)
    finally:
        end_job(process)
    paces = [w["steps_per_s"] for w in windows]
    return {"model": args.model, "condition": condition, "start": number, "cpus": cpus, "startup_s": round(startup_s, 2),
            "mean_steps_per_s": statistics.fmean(paces), "windows": windows}


def spread(rows: list[dict]) -> dict:
    """Between-start sd of the start means, and the within-start sd of a window, both relative."""
    means = [r["mean_steps_per_s"] for r in rows]
    within = [statistics.stdev([w["steps_per_s"] for w in r["windows"]]) / r["mean_steps_per_s"]
              for r in rows if len(r["windows"]) > 1 and r["mean_steps_per_s"]]
    grand = statistics.fmean(means)
    return {"starts": len(rows), "mean_steps_per_s": grand,
            "between_start_rel_sd": statistics.stdev(means) / grand if len(means) > 1 and grand else None,
            "within_start_rel_sd": statistics.fmean(within) if within else None,
            "start_means": [round(m, 2) for m in means]}


def _exit_on_signal(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--starts", type=int, default=4, help="starts per condition, conditions interleaved")
    parser.add_argument("--conditions", nargs="+", choices=sorted(CONDITIONS), default=["default"])
    parser.add_argument("--cpus", default="2,3", help="a taskset CPU list used by every start, or 'rotate'")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--window", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--device", default="cuda", help="cuda; cpu only checks the probe's mechanics")
    parser.add_argument("--out", default="starts.jsonl")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_signal)  # so `timeout` or a stop ends the job it started (finally)
    card, rows = Card(), []
    with tempfile.TemporaryDirectory() as folder, open(args.out, "a") as sink:
        for number in range(args.starts):
            for condition in args.conditions:
                row = one_start(args, condition, number, card, Path(folder))
                rows.append(row)
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                print(f"{args.model} {condition} start {number}: {row['mean_steps_per_s']:.2f} steps/s "
                      f"(startup {row['startup_s']} s, cpus {row['cpus']})", flush=True)
    for condition in args.conditions:
        summary = {"model": args.model, "condition": condition,
                   **spread([r for r in rows if r["condition"] == condition])}
        print("summary " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
