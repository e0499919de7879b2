"""The scaling study's steps: the run's facts before its sessions; the all-reduce bandwidth of the
host's GPUs; and the convergence probe, what a larger global batch does to the stand-in's loss from
one checkpoint.

    python -m pytest_gpu_pairs.studies.steps.scaling facts RUN_DIR DEVICE
    python -m pytest_gpu_pairs.studies.steps.scaling bandwidth RUN_DIR DEVICE
    python -m pytest_gpu_pairs.studies.steps.scaling convergence RUN_DIR DEVICE [--scale F]

``bandwidth`` runs ``workloads.allreduce_probe`` on 2 .. N of the GPUs it may use (a gradient of the
stand-in's size, fp32) and writes ``bandwidth.json``: the worst case of the 4-versus-6 answer is a
ring all-reduce at that bus bandwidth that backward does not hide at all.

``convergence`` trains ``workloads.batch_growth``'s checkpoint at the current global batch, then
branches from it for every rule and seed of ``ConvergencePlan`` (up to ``PER_GPU`` branches on each
GPU at once: only the loss per sample is compared, not time), and writes ``convergence.json`` when
every branch has ended. On the CPU it runs a small model on 64-pixel scenes for a few samples: it
tests the pipeline, its figures say nothing of learning. Every job is a supervised process tree,
ended on every way out; a branch that failed is named with its log, and run again by the next call.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.catalog import builtin
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text
from pytest_gpu_pairs.run.dataparallel import NCCL_ENV, free_port, rank_variables
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec
from pytest_gpu_pairs.run.proctree import deferred_signals
from pytest_gpu_pairs.run.scaling import NvmlUnavailable, gpu_names

RESTART_MIN = 30  # the predecessor's minutes per restart, as its question put it
STAND_IN = builtin("dense_aspp")
FLOAT32_BYTES = 4
PER_GPU = 3
JOB_TIMEOUT_S = 900.0
TICK_S = 0.5


@dataclass(frozen=True)
class Branch:
    """One continuation of the checkpoint: a global batch, the learning-rate rule that set its rate, a seed."""

    rule: str
    global_batch: int
    lr_factor: float
    seed: int

    @property
    def name(self) -> str:
        return f"{self.rule}_b{self.global_batch}_s{self.seed}"


@dataclass(frozen=True)
class ConvergencePlan:
    """The predecessor's switch: from a global batch of 4 to 6 at its learning rate, by the linear
    rule (x1.5) and by the square-root rule (x1.22), each continued from one checkpoint for the same
    samples, with seeds as replicates."""

    current_batch: int = 4
    target_batch: int = 6
    checkpoint_samples: int = 400
    branch_samples: int = 480
    eval_every: int = 96
    eval_samples: int = 16
    image_size: int = 600
    backbone_depth: int = 101
    output_stride: int = 8
    seeds: tuple[int, ...] = (1, 2, 3)

    @classmethod
    def for_run(cls, device: str, scale: float) -> ConvergencePlan:
        if device != "cpu":
            return cls() if scale >= 1 else cls(checkpoint_samples=_scaled(400, scale, 8),
                                                 branch_samples=_scaled(480, scale, 24), eval_every=12)
        return cls(checkpoint_samples=8, branch_samples=12, eval_every=12, eval_samples=2, image_size=64,
                   backbone_depth=50, output_stride=16, seeds=(1, 2))

    def branches(self) -> list[Branch]:
        ratio = self.target_batch / self.current_batch
        rules = (("current", self.current_batch, 1.0), ("linear", self.target_batch, ratio),
                 ("square_root", self.target_batch, math.sqrt(ratio)))
        return [Branch(rule, batch, factor, seed) for seed in self.seeds for rule, batch, factor in rules]


def _scaled(samples: int, scale: float, floor: int) -> int:
    return max(floor, int(math.ceil(samples * scale / 12.0)) * 12)


def gpu_slots(device: str) -> list[Optional[str]]:
    """The GPUs this step may use, as CUDA_VISIBLE_DEVICES names them; one slot of no GPU on the CPU."""
    if device == "cpu":
        return [None]
    try:
        return list(gpu_names())
    except NvmlUnavailable as exc:
        raise SystemExit(f"{device}: no GPU could be counted ({exc})") from None


def job_spec(name: str, argv: list[str], gpu: Optional[str], extra_env: Optional[dict[str, str]] = None) -> JobSpec:
    env = {**os.environ, **(extra_env or {})}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    else:
        env.setdefault("OMP_NUM_THREADS", "1")
    return JobSpec(role=name, model=STAND_IN.name, argv=[sys.executable, *argv], env=env, cwd=None, timeout_s=JOB_TIMEOUT_S)


def run_jobs(jobs: list[tuple[JobSpec, Path]], parallel: int) -> dict[str, Optional[int]]:
    """Every job to its end, up to ``parallel`` at once; each one's exit code by role (None: timed
    out). Whatever happens, no job outlives the call."""
    waiting, codes = list(jobs), {}
    running: list[JobProcess] = []
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                spec, log = waiting.pop(0)
                running.append(JobProcess(spec, log, log.with_suffix(".progress.jsonl")).start())
            time.sleep(TICK_S)
            for job in [j for j in running if j.poll() is not None or j.start_error
                        or now() - j.start_t > j.spec.timeout_s]:
                codes[job.spec.role] = None if job.poll() is None and not job.start_error else job.poll()
                job.kill_tree()
                running.remove(job)
    finally:
        with deferred_signals():
            for job in running:
                job.kill_tree()
    return codes
def _commit(root: Path) -> str:
    """``COMMIT`` where the caller set it (a copy of the checkout whose git holds another commit, as
    the device adapter's machine has), else the checkout's own."""
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]
    git = shutil.which("git")
    if git is None:
        return "unknown"
    found = subprocess.run([git, "rev-parse", "--short=7", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30)
    return found.stdout.strip() or "unknown"


def _devices(device: str) -> str:
    smi = shutil.which("nvidia-smi")
    if device == "cpu" or smi is None:
        return f"cpu ({os.cpu_count()} CPUs), gloo"
    found = subprocess.run([smi, "--query-gpu=index,name,memory.total,driver_version,uuid", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=60)
    return found.stdout.strip() or f"nvidia-smi said nothing ({found.stderr.strip()[:200]})"


def _topology(device: str) -> str:
    smi = shutil.which("nvidia-smi")
    if device == "cpu" or smi is None:
        return "no GPU topology: a CPU run"
    found = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=60)
    return found.stdout.strip() or f"nvidia-smi topo said nothing ({found.stderr.strip()[:200]})"


def facts(run_dir: Path, device: str) -> int:
    atomic_write_text(run_dir / "commit.txt", _commit(Path.cwd()) + "\n")
    atomic_write_text(run_dir / "restart_min.txt", f"{RESTART_MIN}\n")
    atomic_write_text(run_dir / "topology.txt", _topology(device) + "\n")
    atomic_write_text(run_dir / "device.txt", _devices(device) + "\n")
    return 0


def bandwidth(run_dir: Path, device: str) -> int:
    """The all-reduce probe on 2 .. N GPUs; ``bandwidth.json`` holds each count's result or why none."""
    slots = gpu_slots(device)
    folder = run_dir / "bandwidth"
    folder.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"bytes": (STAND_IN.param_count or 0) * FLOAT32_BYTES, "counts": {}}
    for world in range(2, len(slots) + 1):
        out, port = folder / f"gpus{world}.json", free_port()
        argv = ["-m", "pytest_gpu_pairs.workloads.allreduce_probe", str(out.resolve()), "--bytes", str(found["bytes"])]
        jobs = [(job_spec(f"rank{r}", argv, None, {**NCCL_ENV, **rank_variables(r, world, port),
                                                   "CUDA_VISIBLE_DEVICES": ",".join(s or "" for s in slots[:world])}),
                 folder / f"gpus{world}-rank{r}.log") for r in range(world)]
        codes = run_jobs(jobs, world)
        found["counts"][str(world)] = (json.loads(out.read_text()) if out.exists() else
                                       {"failure": f"exit codes {codes}; logs in {folder}"})
        print(f"all-reduce on {world} GPUs: {found['counts'][str(world)].get('busbw_gb_s', 'failed')} GB/s bus bandwidth")
    if len(slots) < 2:
        found["note"] = f"{len(slots)} GPU: no all-reduce to time"
    atomic_write_json(run_dir / "bandwidth.json", found)
    return 0


def branch_argv(plan: ConvergencePlan, out: Path, checkpoint: Path, device: str, branch: Optional[Branch]) -> list[str]:
    base_lr = float(STAND_IN.defaults()["learning_rate"])
    common = ["--device", "cuda" if device != "cpu" else "cpu", "--image-size", str(plan.image_size),
              "--backbone-depth", str(plan.backbone_depth), "--output-stride", str(plan.output_stride)]
    if branch is None:
        return ["-m", "pytest_gpu_pairs.workloads.batch_growth", "checkpoint", str(checkpoint.resolve()), *common,
                "--global-batch", str(plan.current_batch), "--samples", str(plan.checkpoint_samples)]
    return ["-m", "pytest_gpu_pairs.workloads.batch_growth", "branch", str(out.resolve()), *common,
            "--checkpoint", str(checkpoint.resolve()), "--global-batch", str(branch.global_batch),
            "--learning-rate", repr(base_lr * branch.lr_factor), "--seed", str(branch.seed),
            "--samples", str(plan.branch_samples), "--eval-every", str(plan.eval_every),
            "--eval-samples", str(plan.eval_samples)]


def convergence(run_dir: Path, device: str, scale: float) -> int:
    plan = ConvergencePlan.for_run(device, scale)
    folder = run_dir / "convergence"
    folder.mkdir(parents=True, exist_ok=True)
    slots = gpu_slots(device)
    checkpoint = folder / "checkpoint.pt"
    if not checkpoint.exists():
        run_jobs([(job_spec("checkpoint", branch_argv(plan, checkpoint, checkpoint, device, None), slots[0]),
                   folder / "checkpoint.log")], 1)
    if not checkpoint.exists():
        print(f"convergence: the checkpoint was not written (log: {folder / 'checkpoint.log'})", file=sys.stderr)
        return 1
    todo = [b for b in plan.branches() if not (folder / f"{b.name}.json").exists()]
    per_slot = PER_GPU if slots[0] is not None else 1
    jobs = [(job_spec(b.name, branch_argv(plan, folder / f"{b.name}.json", checkpoint, device, b),
                      slots[i % len(slots)]), folder / f"{b.name}.log") for i, b in enumerate(todo)]
    codes = run_jobs(jobs, per_slot * len(slots))
    missing = [b.name for b in plan.branches() if not (folder / f"{b.name}.json").exists()]
    if missing:
        print(f"convergence: {len(missing)} branch(es) failed: {', '.join(missing)} (exit codes "
              f"{ {m: codes.get(m) for m in missing} }; logs in {folder}); run the step again", file=sys.stderr)
        return 1
    checkpoint.unlink()
    atomic_write_json(run_dir / "convergence.json", {"plan": asdict(plan), "branches": [asdict(b) for b in plan.branches()],
                                                     "device": device, "gpus": len(slots)})
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", choices=("facts", "bandwidth", "convergence"))
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("device")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    if args.action == "facts":
        return facts(args.run_dir, args.device)
    if args.action == "bandwidth":
        return bandwidth(args.run_dir, args.device)
    return convergence(args.run_dir, args.device, args.scale)


if __name__ == "__main__":
    sys.exit(main())
