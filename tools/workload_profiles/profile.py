"""Solo profiles of the built-in workloads on the GPU machine, one process each, measured from outside.

For every workload this starts ``python -m pytest_gpu_pairs.workloads.profile`` in its own
session and samples NVML at 10 Hz from this process (which never creates a CUDA context): the
per-process used memory of the job (its peak is ``peak_vram_nvml_mb``), and, over the job's timed
training window, the energy counter (energy from the counter, not from summed power), power and
utilisation. Energy per epoch is extrapolated from the measured energy per step times the
epoch's steps; the output says so. Writes ``<out>/workload_profiles_raw.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable
from pytest_gpu_pairs.monitor.gpu import read_sample

HZ = 10.0
GPM_EVERY_S = 0.5
GPM_METRICS = {"gpm_sm_util_pct": 2, "gpm_dram_bw_pct": 10}  # NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL


class Gpm:
    """NVML's GPU performance metrics (Hopper and newer) between consecutive samples: the share of SMs
    busy and of DRAM bandwidth used. ``None`` everywhere on a GPU without them."""

    def __init__(self, gpu: Gpu):
        self.nvml, self.handle, self.last, self.last_t = gpu.nvml, gpu.handle, None, 0.0
        self.readings: list[tuple[float, dict]] = []
        try:
            self.supported = bool(self.nvml.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice)
        except Exception:
            self.supported = False

    def tick(self, t: float) -> None:
        if not self.supported or t - self.last_t < GPM_EVERY_S:
            return
        n = self.nvml
        try:
            sample = n.nvmlGpmSampleAlloc()
            n.nvmlGpmSampleGet(self.handle, sample)
        except Exception:
            self.supported = False
            return
        if self.last is not None:
            self.readings.append(((t + self.last_t) / 2, self._metrics(self.last, sample)))
            n.nvmlGpmSampleFree(self.last)
        self.last, self.last_t = sample, t

    def _metrics(self, first, second) -> dict:
        n = self.nvml
        request = n.c_nvmlGpmMetricsGet_t()
        request.version, request.numMetrics = n.NVML_GPM_METRICS_GET_VERSION, len(GPM_METRICS)
        request.sample1, request.sample2 = first, second
        for index, metric in enumerate(GPM_METRICS.values()):
            request.metrics[index].metricId = metric
        try:
            n.nvmlGpmMetricsGet(request)
        except Exception:
            return {}
        return {key: float(request.metrics[i].value) for i, key in enumerate(GPM_METRICS)
                if request.metrics[i].nvmlReturn == 0}

    def close(self) -> None:
        if self.last is not None:
            self.nvml.nvmlGpmSampleFree(self.last)
            self.last = None

    def window(self, start: float, end: float) -> dict:
        inside = [values for t, values in self.readings if start <= t <= end]
        return {key: (sum(v[key] for v in inside if key in v) / len([v for v in inside if key in v])
                      if any(key in v for v in inside) else None) for key in GPM_METRICS}


def _memory_util(gpu: Gpu):
    try:
        return float(gpu.nvml.nvmlDeviceGetUtilizationRates(gpu.handle).memory)
    except Exception:
        return None


def _interpolate(samples, t: float, key: str):
    points = [(s.t, getattr(s, key)) for s in samples if getattr(s, key) is not None]
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
    return points[-1][1]


def _window_figures(samples, record: dict, idle_w, memory_util=(), gpm=None) -> dict:
    start, end = record.get("window_start"), record.get("window_end")
    if start is None or end is None:
        return {}
    inside = [s for s in samples if start <= s.t <= end]
    e0, e1 = _interpolate(samples, start, "energy_mj"), _interpolate(samples, end, "energy_mj")
    out = {"samples_in_window": len(inside)}
    if e0 is not None and e1 is not None and end > start:
        energy = (e1 - e0) / 1000.0
        out["energy_window_j"] = energy
        out["power_avg_w"] = energy / (end - start)
        steps = record.get("steps") or 0
        if steps:
            out["energy_per_step_j"] = energy / steps
            out["energy_per_epoch_j"] = energy / steps * record["steps_per_epoch"]
            if idle_w is not None:
                out["energy_per_epoch_above_idle_j"] = (energy - idle_w * (end - start)) / steps * record["steps_per_epoch"]
    powers = [s.power_w for s in inside if s.power_w is not None]
    utils = [s.util_pct for s in inside if s.util_pct is not None]
    out["power_max_w"] = max(powers) if powers else None
    out["util_avg_pct"] = sum(utils) / len(utils) if utils else None
    mem = [value for t, value in memory_util if start <= t <= end and value is not None]
    out["mem_util_avg_pct"] = sum(mem) / len(mem) if mem else None
    if gpm is not None:
        out.update(gpm.window(start, end))
    if record.get("step_time_s"):
        out["epoch_time_s"] = record["step_time_s"] * record["steps_per_epoch"]
    return out


def profile_one(gpu: Gpu, name: str, args, work: Path) -> dict:
    out_file = work / f"{name}.json"
    log = open(work / f"{name}.log", "wb")  # noqa: SIM115 (closed in the finally below)
    argv = [sys.executable, "-m", "pytest_gpu_pairs.workloads.profile", name, "--device", "cuda",
            "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--eval-scale", str(args.eval_scale),
            "--out", str(out_file)]
    started = time.time()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    samples, memory_util, last_us = [], [], int(time.time() * 1e6)
    gpm = Gpm(gpu)
    try:
        while proc.poll() is None:
            if time.time() - started > args.timeout:
                raise TimeoutError
            sample, last_us = read_sample(gpu, last_us)
            samples.append(sample)
            memory_util.append((sample.t, _memory_util(gpu)))
            gpm.tick(sample.t)
            time.sleep(1.0 / HZ)
    except (TimeoutError, KeyboardInterrupt):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        gpm.close()
        log.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    record = json.loads(out_file.read_text()) if out_file.exists() else {
        "model": name, "ok": False, "error": f"no result within {args.timeout} s (killed); see {name}.log"}
    record["process_s"] = time.time() - started
    mine = [s.proc_mem_mb.get(proc.pid) for s in samples if s.proc_mem_mb.get(proc.pid) is not None]
    record["peak_vram_nvml_mb"] = max(mine) if mine else None
    record["seed_vram_mb"] = BUILTINS[name].seed_vram_mb
    record.update(_window_figures(samples, record, args.idle_w, memory_util, gpm))
    return record


def _write(raw: Path, gpu: Gpu, args, began: float, records: list) -> None:
    """The raw file so far, rewritten after every workload, so a cut run resumes with --resume."""
    info = gpu.info
    report = {"device": {"name": info.name, "driver": info.driver, "memory_total_mb": info.memory_total_mb,
                         "power_limit_w": info.power_limit_w},
              "idle_power_w": args.idle_w, "seconds": args.seconds, "warmup_s": args.warmup,
              "eval_scale": args.eval_scale, "sample_hz": HZ, "total_s": time.time() - began,
              "method": ("solo, one process per workload at its default hyperparameters; step time, samples/s, "
                         "power, utilisation and energy over a timed window after a warm-up; energy per epoch "
                         "EXTRAPOLATED from energy per step x steps per epoch; peak VRAM from NVML per-process "
                         "samples at 10 Hz over the process's life and from torch.cuda.max_memory_reserved; "
                         "memory utilisation: NVML nvmlDeviceGetUtilizationRates().memory (share of time device "
                         "memory was read or written) averaged over the window; gpm_sm_util_pct and gpm_dram_bw_pct: "
                         "NVML GPM metrics SM_UTIL and DRAM_BW_UTIL between samples 0.5 s apart, where the GPU has "
                         "them; host_share: see host_share_method; "
                         "metrics_untrained/metrics_trained on scaled evaluation sets before and after the "
                         "few seconds of training"),
              "workloads": records}
    raw.write_text(json.dumps(report, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--eval-scale", type=float, default=0.01)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--models", default=",".join(BUILTINS))
    parser.add_argument("--resume", action="store_true", help="keep the workloads already in --out's raw file")
    args = parser.parse_args()
    out = Path(args.out)
    work = out / "profiles"
    work.mkdir(parents=True, exist_ok=True)
    try:
        gpu = Gpu(0)
    except NvmlUnavailable as exc:
        print(f"no GPU: {exc}", file=sys.stderr)
        return 2
    args.idle_w = gpu.idle_power_w(3.0)
    began = time.time()
    raw = out / "workload_profiles_raw.json"
    records = json.loads(raw.read_text())["workloads"] if args.resume and raw.exists() else []
    done = {r["model"] for r in records}
    for name in args.models.split(","):
        if name in done:
            continue
        record = profile_one(gpu, name, args, work)
        records.append(record)
        _write(raw, gpu, args, began, records)
        print(json.dumps({k: record.get(k) for k in ("model", "ok", "steps", "step_time_s", "peak_vram_nvml_mb",
                                                     "torch_peak_reserved_mb", "error")}), flush=True)
    _write(raw, gpu, args, began, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
