"""Does a host-bound pair's efficiency follow the host's pace as the GPU bound says it should?

Two built-ins, each pinned to a CPU of its own, are timed alone (the other paused with SIGSTOP)
and together, while NVML samples the card's utilisation: alone, that is the fraction of time the
job keeps the GPU busy, ``u``. If time-slicing slows both jobs alike once the card is saturated,
the pair's efficiency is about ``min(2, 2 / (u_a + u_b))``: a faster host raises ``u`` and lowers
the efficiency, as the default-method study saw between sessions. The probe measures that once at
the host's own pace and once with a CPU burner on each job's CPU (slower host), and prints the
measured efficiency beside the bound for each. Every process it starts is ended on the way out.

    python -m tools.default_method.pace_probe --models resnet20 resnet20 --cpus 2 3 --out pace.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_gpu_pairs.protocol import ProgressReader


class Sampler:
    """The card's utilisation.gpu, sampled every 100 ms over a window; without NVML (no GPU) the
    window still passes and the utilisation is None."""

    def __init__(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 - any NVML failure means: no utilisation here
            self._nvml = self._handle = None

    def mean_over(self, seconds: float) -> float | None:
        values, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            if self._nvml is not None:
                values.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            time.sleep(0.1)
        return sum(values) / len(values) / 100.0 if values else None


def start_job(model: str, cpu: int, folder: Path, name: str, device: str) -> tuple[subprocess.Popen, ProgressReader]:
    progress = folder / f"{name}.progress.jsonl"
    env = {**os.environ, "GPU_PAIRS_PROGRESS": str(progress), "GPU_PAIRS_STEADY_STATE": "1"}
    command = ["taskset", "-c", str(cpu), sys.executable, "-m", "pytest_gpu_pairs.workloads", model,
               "--device", device, "--scale", "100", "--epochs=1"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    return process, ProgressReader(progress)


def wait_until_training(reader: ProgressReader, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while reader.read().total_steps < 50:
        if time.monotonic() > end:
            raise RuntimeError(f"{reader.path}: no training within {timeout_s:.0f} s")
        time.sleep(0.5)


def measure(sampler: Sampler, readers: dict[str, ProgressReader], window_s: float) -> dict:
    """Steps per second of each running job, and the card's utilisation, over one window."""
    start = time.time()
    utilisation = sampler.mean_over(window_s)
    end = time.time()
    rates = {name: reader.read().steps_between(start, end) / (end - start) for name, reader in readers.items()}
    return {"rates": rates, "u": utilisation}


def pause(process: subprocess.Popen, paused: bool, settle_s: float) -> None:
    os.killpg(process.pid, signal.SIGSTOP if paused else signal.SIGCONT)
    time.sleep(settle_s)


def burners(cpus: list[int]) -> list[subprocess.Popen]:
    spin = "while True: pass"
    return [subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", spin], start_new_session=True)
            for cpu in cpus]


def condition(sampler, jobs, readers, window_s: float, settle_s: float, label: str) -> dict:
    (a, job_a), (b, job_b) = jobs.items()
    pause(job_b, True, settle_s)
    alone_a = measure(sampler, {a: readers[a]}, window_s)
    pause(job_b, False, settle_s)
    pause(job_a, True, settle_s)
    alone_b = measure(sampler, {b: readers[b]}, window_s)
    pause(job_a, False, settle_s)
    together = measure(sampler, readers, window_s)
    if not alone_a["rates"][a] or not alone_b["rates"][b]:
        raise RuntimeError(f"a job made no progress alone ({label}): {alone_a['rates']}, {alone_b['rates']}")
    efficiency = sum(together["rates"][n] / alone["rates"][n] for n, alone in ((a, alone_a), (b, alone_b)))
    busy = (alone_a["u"], alone_b["u"])
    bound = None if None in busy else min(2.0, 2.0 / max(1e-9, sum(busy)))
    return {"condition": label, "alone": {a: alone_a, b: alone_b}, "together": together,
            "efficiency": efficiency, "bound_2_over_u_sum": bound}


def end_all(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs=2, default=["resnet20", "resnet20"])
    parser.add_argument("--cpus", nargs=2, type=int, default=[2, 3])
    parser.add_argument("--window", type=float, default=10.0, help="seconds per measured window")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--settle", type=float, default=2.0,
                        help="seconds after a pause or resume before a window opens (2.5 times as long before the first)")
    parser.add_argument("--out", default="pace.jsonl")
    parser.add_argument("--device", default="cuda", help="cuda; cpu only checks the probe's mechanics")
    args = parser.parse_args()
    started: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            jobs, readers = {}, {}
            for index, (model, cpu) in enumerate(zip(args.models, args.cpus)):
                name = f"{model}-{index}"
                jobs[name], readers[name] = start_job(model, cpu, Path(folder), name, args.device)
                started.append(jobs[name])
            for reader in readers.values():
                wait_until_training(reader)
            time.sleep(2.5 * args.settle)
            sampler = Sampler()
            with open(args.out, "a") as sink:
                for repeat in range(args.repeats):
                    for label in ("host pace", "CPU burner on each job's CPU"):
                        hogs = burners(args.cpus) if label.startswith("CPU") else []
                        started += hogs
                        time.sleep(args.settle / 2)
                        row = {"repeat": repeat, **condition(sampler, jobs, readers, args.window, args.settle, label)}
                        end_all(hogs)
                        print(json.dumps(row), flush=True)
                        sink.write(json.dumps(row) + "\n")
    finally:
        end_all(started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
