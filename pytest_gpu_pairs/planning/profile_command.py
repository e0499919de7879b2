"""`gpu-pairs profile SETTINGS [-k EXPR] [--device auto|cuda|cpu] [--out DIR]`: each selected workload run alone, briefly, and stored for the next plan.

Every workload of the selected cases (built-in or command; the first case naming it gives its
hyperparameters) is started alone as a real job process, trained for ``--warmup`` seconds after
its first step, then measured for ``--seconds`` (``run.profiling``), and ended with every process
of it. What the estimator and the planner need is stored in ``<out>/_profiles/<workload>.<device>.json``,
where ``--gpu-pairs-plan``, the live line's estimates and ``gpu-pairs plan`` of the same results
folder find it: start-up, seconds per step, the epoch length in steps where known, peak memory,
power, and with ``--min-fit`` (on a GPU) the smallest emulated card it runs on. A figure that
could not be measured is null with its reason under ``unmeasured``.
"""
from __future__ import annotations

import argparse
import os
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import DuplicateCaseError, JobConfig
from pytest_gpu_pairs.experiment.vocabulary import pin_cpus
from pytest_gpu_pairs.inputs import SettingsError, read_json
from pytest_gpu_pairs.planning.own_profiles import KIND, VERSION, read_profile
from pytest_gpu_pairs.planning.plan import select
from pytest_gpu_pairs.record.store import StoreWriteError, json_text, profile_path, save_profile
from pytest_gpu_pairs.run.cpus import ROLES, CpuPlan
from pytest_gpu_pairs.run.device import DeviceRequestError, host_cpu_plan, open_device_gpu
from pytest_gpu_pairs.run.jobs import kill_all_jobs
from pytest_gpu_pairs.run.options import GpuPairsOptions, OptionsError
from pytest_gpu_pairs.run.profiling import GPM_METRICS, MAX_STRETCH, SoloRun, cpu_name, min_fit, profile_job
from pytest_gpu_pairs.run.session import GpuPairsSession

DEFAULT_OUT = "gpu-pairs-results"
WARMUP_S = 3.0
WINDOW_S = 8.0
READY_TIMEOUT_S = 600.0
MOVED_FACTOR = 1.5  # a step time this many times the stored one (or its inverse) is worth a warning


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and at most 3600, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("settings", nargs="+", metavar="SETTINGS", help="experiment files, as --gpu-pairs-settings")
    parser.add_argument("-k", dest="keyword", default=None, metavar="EXPR",
                        help="select cases as pytest's -k does; their workloads are profiled")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="where the workloads train, as --gpu-pairs-device (default: auto)")
    parser.add_argument("--scale", type=float, default=1.0, help="as --gpu-pairs-scale (default: 1)")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"the results folder the profiles are stored in, as --gpu-pairs-out (default: {DEFAULT_OUT})")
    parser.add_argument("--warmup", type=_seconds, default=WARMUP_S, metavar="S",
                        help=f"seconds of training after the first step left out (default: {WARMUP_S:g})")
    parser.add_argument("--seconds", type=_seconds, default=WINDOW_S, metavar="S",
                        help=f"seconds of steady training measured (default: {WINDOW_S:g})")
    parser.add_argument("--min-fit", action="store_true",
                        help="on a GPU, also bisect the smallest emulated card each workload runs on (minutes each)")
    parser.add_argument("--pin-cpus", type=pin_cpus, default="auto", metavar="auto|off|N",
                        help="as --gpu-pairs-pin-cpus: each job on CPUs of its own, as a session pins it, so "
                             "that its pace is the one it keeps beside another job (default: auto)")
    parser.add_argument("--json", action="store_true", help="print the stored profiles as JSON")


def workloads_of(cases) -> list[JobConfig]:
    """Each workload of the cases once, with the hyperparameters of the first case that names it."""
    found: dict[str, JobConfig] = {}
    for case in cases:
        for job in (case.fg, case.bg):
            if job is not None:
                found.setdefault(job.model, job)
    return list(found.values())


def _epoch_length(job: JobConfig) -> tuple[Optional[int], Optional[str]]:
    info = BUILTINS.get(job.model)
    if job.is_builtin and info is not None and "batch_size" in info.hyperparameters:
        return info.steps_per_epoch(job.hyperparameters.get("batch_size")), None
    return None, "a command workload's epoch length in steps is not known to the harness (its whole run is, " \
                 "where it ended within the profile: run_s, run_steps)"


def record_of(job: JobConfig, run: SoloRun, device_name: str, scale: float, warmup_s: float,
              run_load: Optional[float] = None) -> dict[str, Any]:
    """The stored profile: what the run measured, and for every figure it could not, why; with the
    host's load while it ran (``load_avg``, the 1-minute load average at its end), since a CPU
    step's time is that of the load it shared the CPU with."""
    steps_per_epoch, no_epoch = _epoch_length(job)
    unmeasured = dict(run.unmeasured)
    if no_epoch:
        unmeasured["steps_per_epoch"] = no_epoch
    batch = job.hyperparameters.get("batch_size") if job.is_builtin else None
    return {"kind": KIND, "version": VERSION, "workload": job.model, "builtin": job.is_builtin,
            "command": list(job.command.command) if job.command is not None else None,
            "hyperparameters": job.hyperparameters, "device": run.device, "device_name": device_name,
            "host": socket.gethostname(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "scale": scale,
            "warmup_s": warmup_s, "window_s": run.window_s, "steps_in_window": run.steps_in_window,
            "batch_size": batch if isinstance(batch, int) else None, "steps_per_epoch": steps_per_epoch,
            "startup_s": run.startup_s, "step_time_s": run.step_time_s, "report_gap_s": run.report_gap_s,
            "run_s": run.run_s, "run_steps": run.run_steps, "peak_memory_mb": run.peak_memory_mb,
            "memory_kind": run.memory_kind, "util_avg_pct": run.util_avg_pct, "power_avg_w": run.power_avg_w,
            "energy_per_step_j": run.energy_per_step_j, **{key: getattr(run, key) for key in GPM_METRICS},
            "cpu_package_power_w": run.cpu_package_power_w,
            "min_fit_mb": None, "log": run.log_path, "load_avg": run_load, "cpu_count": os.cpu_count(),
            "unmeasured": unmeasured}


def _add_job_cpus(record: dict[str, Any], cpus: CpuPlan, one_loop: bool) -> None:
    """The CPUs the job ran on, as a case's record says them: a session's jobs run pinned, and a
    host-bound job's busy fraction, the planner's main feature, is the pace it kept there."""
    record["job_cpus"] = cpus.described({ROLES[0]: one_loop})
    if record["job_cpus"] is None:
        record["unmeasured"]["job_cpus"] = f"not pinned: {cpus.reason or 'no CPUs were chosen'}"


def _add_min_fit(record: dict[str, Any], job: JobConfig, gpu, work_dir: Path) -> None:
    if gpu is None:
        record["unmeasured"]["min_fit_mb"] = "a min fit is bisected over emulated GPU cards: no GPU here"
        return
    found, how = min_fit(job, gpu, work_dir / "min-fit", record["peak_memory_mb"])
    if found is None:
        record["unmeasured"]["min_fit_mb"] = how
    else:
        record["min_fit_mb"], record["min_fit_method"] = float(found), how


def _load(args: argparse.Namespace, out: Path):
    options = GpuPairsOptions(settings=tuple(Path(p) for p in args.settings), device=args.device, scale=args.scale,
                              vram_budget_mb=None, min_efficiency=None, sample_hz=10.0, out_dir=out)
    cases = GpuPairsSession(options).cases()
    wanted = set(select([c.id for c in cases], args.keyword))
    return [c for c in cases if c.id in wanted]


def _row(record: dict[str, Any]) -> tuple[str, ...]:
    def number(key: str, digits: int, unit: str = "") -> str:
        value = record.get(key)
        return "-" if value is None else f"{value:.{digits}f}{unit}"
    rate = f"{1 / record['step_time_s']:.1f}" if record.get("step_time_s") else "-"
    return (record["workload"], record["device"], number("startup_s", 1, " s"), number("step_time_s", 4, " s"), rate,
            number("peak_memory_mb", 0, " MB"), number("power_avg_w", 0, " W"))


def _print_table(records: list[dict[str, Any]]) -> None:
    rows: list[tuple[str, ...]] = [("workload", "device", "start-up", "per step", "steps/s", "peak memory", "power")]
    rows += [_row(r) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def load_average() -> Optional[float]:
    """The host's 1-minute load average (None where the system gives none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def load_warnings(record: dict[str, Any], before: Optional[dict[str, Any]]) -> list[str]:
    """What makes a stored rate doubtful: a host busier than its CPUs while it ran, or a step time
    far from the one this folder held for the same workload and device (the host's load moves a
    CPU rate by factors)."""
    found = []
    load, cpus = record.get("load_avg"), record.get("cpu_count")
    if record.get("device") == "cpu" and isinstance(load, (int, float)) and cpus and load > cpus:
        found.append(f"warning: {record['workload']}: the host was busy while it ran (load {load:.1f} on {cpus} CPUs): "
                     "its step time is this load's; profile again on a quieter host for plans that hold")
    earlier = before or {}
    old_step, new_step = earlier.get("step_time_s"), record.get("step_time_s")
    if isinstance(old_step, (int, float)) and old_step > 0 and isinstance(new_step, (int, float)) and new_step > 0:
        ratio = new_step / old_step
        if not 1 / MOVED_FACTOR <= ratio <= MOVED_FACTOR:
            then = f", load {earlier['load_avg']:.1f} then" if isinstance(earlier.get("load_avg"), (int, float)) else ""
            now = f", {load:.1f} now" if isinstance(load, (int, float)) else ""
            found.append(f"warning: {record['workload']}: {new_step:.4g} s per step is {ratio:.2g} x the "
                         f"{old_step:.4g} s stored before ({str(earlier.get('measured_at') or 'earlier')[:40]}{then}{now}); "
                         "on a CPU the host's load moves this by factors: the plans use the new one")
    return found


def _stored(out: Path, workload: str, device: str) -> Optional[dict[str, Any]]:
    """The profile this folder held before (a bad or missing one is no comparison)."""
    try:
        data = read_json(profile_path(out, workload, device))
    except (SettingsError, OSError):
        return None
    return data if isinstance(data, dict) else None


def _progress_line(record: dict[str, Any], asked_s: float) -> str:
    stretched = (f", window stretched to {record['window_s']:.0f} s for its slow steps"
                 if record.get("window_s") and record["window_s"] > asked_s * 1.5 else "")
    return (f"  {record['workload']}: {record['step_time_s']:.4g} s per step, start-up "
            f"{record['startup_s'] or 0:.1f} s{stretched}")


def _profile_all(jobs: list[JobConfig], args: argparse.Namespace, out: Path, gpu, device: str,
                 device_name: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Each workload in turn, said as it starts and as it ends (a slow one takes minutes); on
    stdout, or on stderr where stdout is the JSON."""
    records, failures = [], []
    work_dir = out / "_profiles" / "runs"
    say = sys.stderr if args.json else sys.stdout
    cpus = host_cpu_plan(args.pin_cpus)
    for index, job in enumerate(jobs, 1):
        print(f"[{index}/{len(jobs)}] {job.model} ...", file=say, flush=True)
        one_loop = job.is_builtin and device == "cuda"
        pinned = cpus.for_job(ROLES[0], one_loop)
        run = profile_job(job, device, args.scale, work_dir / job.model, args.warmup, args.seconds,
                          READY_TIMEOUT_S, gpu, cpus=pinned)
        if run.failure or run.step_time_s is None:
            failures.append(run.failure or f"{job.model}: {run.unmeasured.get('step_time_s')} (now "
                                           f"{args.seconds:g}); log: {run.log_path}")
            print(f"  {job.model}: not measured (see the error below)", file=say, flush=True)
            continue
        record = record_of(job, run, device_name, args.scale, args.warmup, load_average())
        _add_job_cpus(record, cpus, one_loop)
        if args.min_fit:
            _add_min_fit(record, job, gpu, work_dir / job.model)
        else:
            record["unmeasured"]["min_fit_mb"] = "not asked for (--min-fit)"
        before = _stored(out, job.model, device)
        path = save_profile(out, job.model, device, record)
        read_profile(path)  # what is stored must read back as the next session will read it
        records.append(record)
        print(_progress_line(record, args.seconds), file=say, flush=True)
        for warning in load_warnings(record, before):
            print(warning, file=say, flush=True)
    return records, failures


def run(args: argparse.Namespace) -> int:
    out = Path(args.out).absolute()
    try:
        cases = _load(args, out)
        gpu, reason = open_device_gpu(args.device)
    except (SettingsError, DuplicateCaseError, OptionsError, ValueError, DeviceRequestError) as exc:
        print(f"error: {exc}")
        return 2
    if not cases:
        print("error: no case selected")
        return 2
    device = "cuda" if gpu is not None else "cpu"
    device_name = gpu.info.name if gpu is not None else cpu_name() or platform.machine() or "cpu"
    jobs = workloads_of(cases)
    print(f"gpu-pairs profile: {len(jobs)} workload(s) alone on {device} ({device_name}), "
          f"{args.warmup:g} s warm-up and {args.seconds:g} s measured each (longer for slow steps, up to "
          f"{MAX_STRETCH} x)" + (f"; {reason}" if reason else ""), file=sys.stderr if args.json else sys.stdout,
          flush=True)
    try:
        records, failures = _profile_all(jobs, args, out, gpu, device, device_name)
    except (StoreWriteError, SettingsError) as exc:
        print(f"error: {exc}")
        return 2
    finally:
        kill_all_jobs()
    if args.json:
        print(json_text({"profiles": records, "failures": failures}))
    else:
        _print_table(records)
        print(f"stored in {out / '_profiles'}: --gpu-pairs-plan, gpu-pairs plan and the live line of a session "
              f"with this results folder use them")
    for failure in failures:
        print(f"error: {failure}")
    return 1 if failures else 0
