"""Why do some pairs read an efficiency above 2? A probe of one job's solo step rate under the
conditions the interleaved method's phases put it in, and a few it does not.

One target job (a built-in, pinned to the CPUs the harness gives a foreground) trains throughout;
the probe switches the conditions around it in rounds, like the method switches its phases, and
reads the target's step rate in each window from its own progress file:

  alone          nothing else on the GPU (no second process exists)
  keepalive      a second process launches one tiny kernel every half millisecond (GPU kept busy)
  cpuspin        a busy Python loop on another CPU (host kept busy, GPU untouched)
  stopped_peer   the pair's other job exists but is stopped (SIGSTOP): the method's solo phase
  peer           the other job trains too: the method's pair phase

If the target steps faster under ``keepalive`` or ``cpuspin`` than ``alone``, its solo rate is
held down by the machine idling between its kernels, not by anything the pair shares, and an
efficiency above 2 is that idle penalty, not a measurement error.

  python3 -m tools.feasibility_10g.idle_probe --target mnist_ff --peer resnet20 --out probe.json
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
from statistics import mean, stdev

from pytest_gpu_pairs.protocol import ENV_VAR, STEADY_STATE_VAR, Progress

TARGET_CPUS = {1, 2}
PEER_CPUS = {8, 9}
HELPER_CPUS = {5}
SETTLE_S = 0.5

KEEPALIVE = """
import time, torch
x = torch.zeros(1, device="cuda")
while True:
    x.add_(1.0)
    torch.cuda.synchronize()
    time.sleep(0.0005)
"""
SPIN = "while True: pass"


def _pinned(cpus: set[int]):
    """The harness's pinning where the machine has those CPUs (a GPU host); none on a small one."""
    if max(cpus) >= (os.cpu_count() or 1):
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def _start(argv: list[str], cpus: set[int], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            preexec_fn=_pinned(cpus), start_new_session=True)


def _job(model: str, cpus: set[int], folder: Path, name: str, device: str) -> tuple[subprocess.Popen, Path]:
    progress = folder / f"{name}.progress.jsonl"
    env = {**os.environ, ENV_VAR: str(progress), STEADY_STATE_VAR: "1", "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "pytest_gpu_pairs.workloads", model, "--device", device, "--epochs", "1000"]
    return _start(argv, cpus, env, folder / f"{name}.log"), progress


def _helper(code: str, folder: Path, name: str) -> subprocess.Popen:
    return _start([sys.executable, "-c", code], HELPER_CPUS, dict(os.environ), folder / f"{name}.log")


def _signal(proc: subprocess.Popen | None, sig: int) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, sig)


def _end(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        _signal(proc, signal.SIGCONT)
        _signal(proc, signal.SIGKILL)
        proc.wait()


def _wait_training(progress: Path, proc: subprocess.Popen, limit_s: float = 180.0) -> None:
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{progress.name}: the job ended before training (exit {proc.returncode})")
        if progress.exists() and Progress.read(progress).total_steps > 0:
            return
        time.sleep(0.2)
    raise SystemExit(f"{progress.name}: no training step within {limit_s:.0f} s")


def _sm_clock_mhz() -> float | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        return float(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - a clock that cannot be read is recorded as missing
        return None


def _windows(conditions: dict[str, tuple[list, list]], rounds: int, window_s: float) -> list[dict]:
    """Round-robin over the conditions; each entry: (processes to continue, processes to stop)."""
    out = []
    for rnd in range(rounds):
        for name, (resume, pause) in conditions.items():
            for proc in pause:
                _signal(proc, signal.SIGSTOP)
            for proc in resume:
                _signal(proc, signal.SIGCONT)
            time.sleep(SETTLE_S)
            start = time.time()
            clocks = []
            while time.time() - start < window_s:
                clocks.append(_sm_clock_mhz())
                time.sleep(0.1)
            out.append({"round": rnd, "condition": name, "start": start, "end": time.time(),
                        "sm_clock_mhz": mean(c for c in clocks if c is not None) if any(clocks) else None})
    return out


def _rates(windows: list[dict], progress: Path) -> dict[str, dict]:
    read = Progress.read(progress)
    by: dict[str, list[float]] = {}
    for w in windows:
        rate = read.steps_between(w["start"], w["end"]) / (w["end"] - w["start"])
        w["steps_per_s"] = rate
        by.setdefault(w["condition"], []).append(rate)
    base = by.get("alone") or by.get("stopped_peer")
    return {name: {"n": len(r), "mean_steps_per_s": mean(r), "std": stdev(r) if len(r) > 1 else None,
                   "vs_alone": mean(r) / mean(base) if base else None} for name, r in by.items()}


def probe(target: str, peer: str, rounds: int, window_s: float, folder: Path, device: str) -> dict:
    procs: list[subprocess.Popen] = []
    try:
        job, progress = _job(target, TARGET_CPUS, folder, "target", device)
        procs.append(job)
        _wait_training(progress, job)
        keep = _helper(KEEPALIVE, folder, "keepalive")
        spin = _helper(SPIN, folder, "cpuspin")
        procs += [keep, spin]
        time.sleep(5.0)
        first = _windows({"alone": ([], [keep, spin]), "keepalive": ([keep], [spin]), "cpuspin": ([spin], [keep])},
                         rounds, window_s)
        other, other_progress = _job(peer, PEER_CPUS, folder, "peer", device)
        procs.append(other)
        _wait_training(other_progress, other)
        time.sleep(3.0)
        second = _windows({"stopped_peer": ([], [other, keep, spin]), "peer": ([other], [keep, spin]),
                           "stopped_peer_keepalive": ([keep], [other, spin])}, rounds, window_s)
    finally:
        _end(procs)
    windows = first + second
    return {"target": target, "peer": peer, "rounds": rounds, "window_s": window_s, "settle_s": SETTLE_S,
            "conditions": _rates(first, progress) | _rates(second, progress), "windows": windows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--peer", required=True)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--window-s", type=float, default=2.5)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke run (no keep-alive kernels)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = probe(args.target, args.peer, args.rounds, args.window_s, Path(tmp), args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    for name, row in result["conditions"].items():
        print(f"{args.target:>12} {name:<24} {row['mean_steps_per_s']:8.2f} steps/s  x{row['vs_alone']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
