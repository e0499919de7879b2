"""What the built-ins' kernels look like on a GPU: how many a training step launches, how long each
runs, and how much of the card each launch can hold. MPS runs two jobs' kernels at once, and GPM's
SM share says only that an SM held a warp, not whether a kernel leaves room beside it; the planner's
largest MPS errors (card-filling pairs that share better or worse than their SM shares say) may
follow the kernels' sizes. A probe for the planner's next feature, read against its validation.

    python -m tools.planner_validation.kernel_sizes --out kernels.json          # every GPU built-in
    python -m tools.planner_validation.kernel_sizes --out kernels.json pcb mrt_oast

Each workload runs in a process of its own: built as a job builds it, ``--warmup`` training steps,
then ``--steps`` steps under ``torch.profiler`` (CUDA activity only), synchronised before each host
clock read. From the profiler's kernel events (grid, block, its estimate of the achieved
occupancy) it writes, per workload: kernels per step, GPU kernel time per step and per host step,
the median and kernel-time-weighted mean of a kernel's duration, the time-weighted share of the
SMs a launch's blocks can cover (blocks over SMs, at most one), the time-weighted share of kernel
time in launches with fewer blocks than SMs, and the time-weighted estimated achieved occupancy.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def summarise(kernels: list[dict], steps: int, host_s: float, sms: int) -> dict:
    """Kernel events of ``steps`` training steps (chrome-trace ``args``) in the figures above."""
    durations = [k["dur"] for k in kernels]
    cover = [(min(1.0, math.prod(k["args"].get("grid", [1])) / sms), k["dur"]) for k in kernels]
    occupancy = [(k["args"]["est. achieved occupancy %"] / 100, k["dur"]) for k in kernels
                 if isinstance(k["args"].get("est. achieved occupancy %"), (int, float))]
    kernel_s = sum(durations) / 1e6
    return {"steps": steps, "kernels_per_step": len(kernels) / steps, "host_step_s": host_s / steps,
            "kernel_s_per_step": kernel_s / steps, "kernel_busy": kernel_s / host_s if host_s else None,
            "kernel_us_median": statistics.median(durations) if durations else None,
            "kernel_us_time_weighted": _weighted([(d, d) for d in durations]),
            "sm_cover_time_weighted": _weighted(cover),
            "time_in_small_grids": _weighted([(1.0 if c < 1.0 else 0.0, d) for c, d in cover]),
            "achieved_occupancy_time_weighted": _weighted(occupancy)}


def probe_one(name: str, warmup: int, steps: int) -> dict:
    import torch

    from pytest_gpu_pairs.workloads.train import build

    workload = build(name, "cuda", 1.0)
    batches = workload.batches()
    for _ in range(warmup):
        workload.train_step(next(batches))
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        started = time.perf_counter()
        for _ in range(steps):
            workload.train_step(next(batches))
        torch.cuda.synchronize()
        host_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.json"
        profile.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return {"workload": name, "device": torch.cuda.get_device_name(0), "sms": sms, "warmup_steps": warmup,
            "torch": torch.__version__, **summarise(kernels, steps, host_s, sms)}


def gpu_builtins() -> list[str]:
    from pytest_gpu_pairs.catalog import BUILTINS, builtin

    return [name for name in sorted(BUILTINS) if not builtin(name).cpu_only]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*")
    parser.add_argument("--out", default="kernels.json")
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--one", help="probe this workload in this process and print its line")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(probe_one(args.one, args.warmup, args.steps)), flush=True)
        return 0
    found, failed = [], {}
    for name in args.workloads or gpu_builtins():
        try:
            done = subprocess.run([sys.executable, "-m", "tools.planner_validation.kernel_sizes", "--one", name,
                                   "--warmup", str(args.warmup), "--steps", str(args.steps)],
                                  capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            failed[name] = "no line within 600 s (the probe was killed)"
            continue
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode == 0 and lines:
            found.append(json.loads(lines[-1]))
        else:
            failed[name] = (done.stderr.strip().splitlines() or ["no output"])[-1]
    Path(args.out).write_text(json.dumps({"workloads": found, "failed": failed}, indent=1) + "\n")
    for row in found:
        print(f"{row['workload']:14s} {row['kernels_per_step']:7.0f} k/step  {row['kernel_us_median']:7.1f} us med  "
              f"{row['kernel_us_time_weighted']:8.1f} us tw  cover {row['sm_cover_time_weighted']:.2f}  "
              f"small {row['time_in_small_grids']:.2f}  occ {row['achieved_occupancy_time_weighted'] or 0:.2f}  "
              f"busy {row['kernel_busy']:.2f}")
    for name, why in failed.items():
        print(f"{name}: failed: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
