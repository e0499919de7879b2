"""The measurement study's GPU measurements, one subcommand each (run by tools/measurement/run_on_gpu.sh).

Every result is a JSON file in ``--out``.

  steady     counter energy vs integrated POWER_INSTANT / POWER_AVERAGE / GetPowerUsage on a
             fixed matmul load, sampled the way the suite samples (10 Hz) and faster (50 Hz)
  overhead   a training job's step rate with the 10 Hz sampler on vs off, A/B interleaved
  oom-pair   sizes a resnet20 pair that fits 80 GB but not 10 GB, and writes its settings file
  load       (internal) the matmul load itself

The measuring process never creates a CUDA context: the load and the training job are child
processes, as in the suite.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from pytest_gpu_pairs.devices.nvml import Gpu
from pytest_gpu_pairs.monitor import counters
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.protocol import ENV_VAR, Progress

HERE = Path(__file__).resolve()


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str))
    print(json.dumps(data, default=str)[:2000], flush=True)


def events(path: Path) -> dict:
    found = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            found[event.get("event")] = event
    return found


def wait_for(path: Path, name: str, process: subprocess.Popen, timeout_s: float) -> dict:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = events(path).get(name)
        if found:
            return found
        if process.poll() is not None:
            raise SystemExit(f"child exited with {process.returncode} before '{name}'")
        time.sleep(0.05)
    raise SystemExit(f"no '{name}' from the child within {timeout_s} s")


# --- load --------------------------------------------------------------------------------

def run_load(seconds: float, progress: Path, device: str) -> int:
    import torch

    size = 8192 if device == "cuda" else 256
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(30):
        c = a @ b
    sync()
    with open(progress, "a") as handle:
        handle.write(json.dumps({"event": "ready", "t": time.time()}) + "\n")
    end = time.time() + seconds
    iterations = 0
    while time.time() < end:
        for _ in range(8):
            c = a @ b
        sync()
        iterations += 8
    with open(progress, "a") as handle:
        handle.write(json.dumps({"event": "end", "t": time.time(), "iterations": iterations,
                                 "checksum": float(c[0, 0])}) + "\n")
    return 0


# --- steady ------------------------------------------------------------------------------

def trapezoid_j(series: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Integral of piecewise-linear power through the samples over [start, end] (edges interpolated)."""
    points = sorted((t, w) for t, w in series if w is not None)
    if len(points) < 2 or points[0][0] > start or points[-1][0] < end:
        return None
    inside = [(start, counters.value_at(points, start))] + [p for p in points if start < p[0] < end] \
        + [(end, counters.value_at(points, end))]
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(inside, inside[1:]))


def counter_update_period_ms(gpu: Gpu, seconds: float = 1.0) -> float | None:
    """Median time between changes of the energy counter, polled at about 1 kHz."""
    changes, last, end = [], gpu.energy_mj(), time.time() + seconds
    while time.time() < end:
        value = gpu.energy_mj()
        if value != last:
            changes.append(time.time())
            last = value
        time.sleep(0.001)
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    return statistics.median(gaps) * 1000 if gaps else None


def fast_poll(gpu: Gpu, hz: float, stop: threading.Event, out: list) -> None:
    period = 1.0 / hz
    while not stop.wait(period):
        instant, average = gpu.power_fields_w()
        try:
            usage = gpu.nvml.nvmlDeviceGetPowerUsage(gpu.handle) / 1000
        except Exception:
            usage = None
        out.append((time.time(), gpu.energy_mj(), instant, average, usage))


def steady(args) -> int:
    gpu = Gpu(0)
    idle_w = gpu.idle_power_w(3.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = out / "load.jsonl"
    progress.unlink(missing_ok=True)
    load = subprocess.Popen([sys.executable, str(HERE), "load", "--seconds", str(args.seconds),
                             "--progress", str(progress), "--device", args.device])
    sampler = Sampler(gpu, 10.0, PidRoles()).start()
    fast, stop = [], threading.Event()
    poller = threading.Thread(target=fast_poll, args=(gpu, 50.0, stop, fast), daemon=True)
    poller.start()
    try:
        ready = wait_for(progress, "ready", load, 120)
        time.sleep(args.seconds / 2)
        update_ms = counter_update_period_ms(gpu)
        end_event = wait_for(progress, "end", load, args.seconds + 60)
        load.wait(timeout=60)
    finally:
        stop.set()
        poller.join()
        samples = sampler.stop()
        if load.poll() is None:
            load.kill()
            load.wait()
    start, end = ready["t"] + args.settle_s, end_event["t"] - 0.5
    window = end - start
    counter = counters.counter_energy_j(((s.t, s.energy_mj) for s in samples), start, end)
    counter_fast = counters.counter_energy_j(((r[0], r[1]) for r in fast), start, end)
    estimates = {
        "instant_10hz": trapezoid_j([(s.t, s.power_instant_w) for s in samples], start, end),
        "average_10hz": trapezoid_j([(s.t, s.power_avg_w) for s in samples], start, end),
        "usage_10hz": trapezoid_j([(s.t, s.power_w) for s in samples], start, end),
        "instant_50hz": trapezoid_j([(r[0], r[2]) for r in fast], start, end),
        "average_50hz": trapezoid_j([(r[0], r[3]) for r in fast], start, end),
        "usage_50hz": trapezoid_j([(r[0], r[4]) for r in fast], start, end),
    }
    relative = {k: (v - counter) / counter if v is not None and counter else None for k, v in estimates.items()}
    inside = [s.power_instant_w for s in samples if start <= s.t <= end and s.power_instant_w is not None]
    write_json(out / "steady.json", {
        "device": gpu.info.__dict__, "idle_power_w": idle_w, "window_s": window, "settle_s": args.settle_s,
        "counter_energy_j": counter, "counter_energy_50hz_readings_j": counter_fast,
        "counter_power_w": counter / window if counter else None, "integrated_j": estimates,
        "relative_to_counter": relative, "instant_power_w_mean": statistics.fmean(inside) if inside else None,
        "instant_power_w_std": statistics.stdev(inside) if len(inside) > 1 else None,
        "samples_10hz": len([s for s in samples if start <= s.t <= end]),
        "samples_50hz": len([r for r in fast if start <= r[0] <= end]),
        "counter_update_period_ms": update_ms, "load_iterations": end_event.get("iterations"),
        "load_exit_code": load.returncode})
    with open(out / "steady_samples.csv", "w") as handle:
        handle.write("source,t,energy_mj,power_instant_w,power_avg_w,power_usage_w\n")
        for s in samples:
            handle.write(f"10hz,{s.t},{s.energy_mj},{s.power_instant_w},{s.power_avg_w},{s.power_w}\n")
        for r in fast:
            handle.write("50hz," + ",".join(str(x) for x in r) + "\n")
    return 0


# --- overhead ----------------------------------------------------------------------------

def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Difference of means and its standard error."""
    se = (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5
    return statistics.fmean(a) - statistics.fmean(b), se


def sampler_tick_ms(gpu: Gpu, ticks: int = 50) -> float:
    """Wall time of one sample of everything (the sampler thread's work per tick), job running."""
    sampler = Sampler(gpu, 10.0, PidRoles())
    t0 = time.perf_counter()
    for _ in range(ticks):
        sampler.take()
    return (time.perf_counter() - t0) / ticks * 1000


def overhead(args) -> int:
    gpu = Gpu(0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = out / "job.progress.jsonl"
    progress.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest_gpu_pairs.workloads", args.model, "--device", args.device,
            "--scale", str(args.scale), "--epochs", "1"]
    with open(out / "job.log", "w") as log:
        job = subprocess.Popen(argv, env={**os.environ, ENV_VAR: str(progress)}, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    blocks = []
    try:
        wait_for(progress, "ready", job, 120)
        time.sleep(args.warmup_s)
        order = ["off", "on", "on", "off"] * (args.blocks // 4) + ["off", "on"] * (args.blocks % 4 // 2)
        for state in order:
            sampler = Sampler(gpu, 10.0, PidRoles()).start() if state == "on" else None
            t0 = time.time()
            time.sleep(args.block_s)
            t1 = time.time()
            taken = len(sampler.stop()) if sampler else 0
            blocks.append({"sampler": state, "start": t0, "end": t1, "samples": taken})
        if job.poll() is not None:
            raise SystemExit(f"the training job ended early (exit {job.returncode}); see {out / 'job.log'}")
        tick_ms = sampler_tick_ms(gpu)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 15)
        job.wait(timeout=30)
    steps = Progress.read(progress)
    for block in blocks:
        start = block["start"] + args.margin_s
        block["steps_per_s"] = steps.steps_between(start, block["end"]) / (block["end"] - start)
        block["step_ms"] = 1000.0 / block["steps_per_s"] if block["steps_per_s"] else None
    on = [b["steps_per_s"] for b in blocks if b["sampler"] == "on"]
    off = [b["steps_per_s"] for b in blocks if b["sampler"] == "off"]
    diff, se = welch(off, on)
    mean_off = statistics.fmean(off)
    write_json(out / "overhead.json", {
        "model": args.model, "block_s": args.block_s, "margin_s": args.margin_s, "blocks": blocks,
        "order": [b["sampler"] for b in blocks], "sample_hz": 10.0,
        "steps_per_s_off": {"mean": mean_off, "std": statistics.stdev(off), "n": len(off)},
        "steps_per_s_on": {"mean": statistics.fmean(on), "std": statistics.stdev(on), "n": len(on)},
        "slowdown_pct": 100.0 * diff / mean_off, "slowdown_se_pct": 100.0 * se / mean_off,
        "step_ms_off": 1000.0 / mean_off, "step_ms_on": 1000.0 / statistics.fmean(on),
        "sampler_tick_ms": tick_ms})
    return 0


# --- oom pair ----------------------------------------------------------------------------

def probe_reserved_mb(batch_size: int, out: Path, device: str) -> float | None:
    progress = out / f"probe-{batch_size}.jsonl"
    progress.unlink(missing_ok=True)
    steps_per_epoch = -(-50000 // batch_size)
    argv = [sys.executable, "-m", "pytest_gpu_pairs.workloads", "resnet20", "--device", device, "--epochs", "1",
            "--batch_size", str(batch_size), "--scale", f"{8 / steps_per_epoch:.6f}"]
    with open(out / f"probe-{batch_size}.log", "w") as log:
        try:
            subprocess.run(argv, env={**os.environ, ENV_VAR: str(progress)}, stdout=log, stderr=subprocess.STDOUT,
                           timeout=30)
        except subprocess.TimeoutExpired:
            return None
    result = Progress.read(progress).result or {}
    return result.get("peak_mem_reserved_mb")


def oom_pair(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reserved = probe_reserved_mb(args.probe_batch, out, args.device)
    if reserved:
        per_sample = reserved / args.probe_batch
        batch = int(args.target_mb / per_sample) // 256 * 256
        batch = max(512, min(batch, 16384))
        how = f"probe: resnet20 at batch {args.probe_batch} reserved {reserved:.0f} MB"
    else:
        batch, how = 2048, "probe failed: fallback batch size"
    job = {"model": "resnet20", "hyperparameters": {"epochs": 2, "batch_size": batch, "seed": 1334}}
    settings = {"name": "small_card_oom", "design": "pairs",
                "description": "a pair that fits an 80 GB card and not a 10 GB one (measurement study)",
                "defaults": {"vram_budget_mb": 80000, "min_efficiency": 0.0, "restart_delay_s": 1, "timeout_s": 300},
                "pairs": [{"group": "oom", "foreground": job, "background": job}]}
    write_json(out / "oom_pair.json", settings)
    write_json(out / "probe.json", {"probe_batch": args.probe_batch, "probe_reserved_mb": reserved, "batch_size": batch,
                                    "target_reserved_mb_per_job": args.target_mb, "how": how})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("load")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--progress", required=True)
    p = sub.add_parser("steady")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--settle-s", type=float, default=2.0)
    p.add_argument("--out", required=True)
    p = sub.add_parser("overhead")
    p.add_argument("--model", default="resnet20")
    p.add_argument("--scale", type=float, default=100.0)
    p.add_argument("--blocks", type=int, default=12)
    p.add_argument("--block-s", type=float, default=4.0)
    p.add_argument("--margin-s", type=float, default=0.5)
    p.add_argument("--warmup-s", type=float, default=3.0)
    p.add_argument("--out", required=True)
    p = sub.add_parser("oom-pair")
    p.add_argument("--probe-batch", type=int, default=1024)
    p.add_argument("--target-mb", type=float, default=6500.0)
    p.add_argument("--out", required=True)
    for command in sub.choices.values():
        command.add_argument("--device", default="cuda", help="cuda; cpu only to dry-run this script without a GPU")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # run the cleanups under timeout
    if args.command == "load":
        return run_load(args.seconds, Path(args.progress), args.device)
    return {"steady": steady, "overhead": overhead, "oom-pair": oom_pair}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
