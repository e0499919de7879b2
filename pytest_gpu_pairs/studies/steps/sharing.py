"""The sharing study's steps: the calibration that sizes the pairs to the time at hand before they
run, and after the MPS limits runs what was left running (MPS processes, GPU compute processes).

    python -m pytest_gpu_pairs.studies.steps.sharing calibrate TEMPLATE STUDY_DIR [--budget-s 450] [--device cuda]
    python -m pytest_gpu_pairs.studies.steps.sharing leftovers LIMITS_DIR

Each distinct job of the template is started once as the harness starts it (the workload entry
point in its own process, on the GPU) and killed after ``--probe-s`` seconds of training: that
gives its solo steps per second and its startup time (process start to first step). From those,
the per-round overhead and the budget, the script picks the foreground's solo training time ``W``
and writes a settings file whose epochs make every foreground train ~W s alone and every
background ~2W + 5 s alone (it must outlast the foreground's startup and slowed window, or it
restarts inside the window), plus the global ``--gpu-pairs-scale`` that goes with those epochs.

With ``--groups``, only those pairs count towards the budget (the run that follows selects them
with ``-k``), but the settings file still holds every pair: later runs of the other groups reuse
it, so every pair is measured with epochs from one calibration. ``--window-s`` fixes ``W``.

The calibration writes ``sharing_settings.json`` and ``sharing_scale.txt`` in the study's folder and
``calibrated.json``, the settings and scale its sessions take (``Variant.options_from``).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.inputs import read_json
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text
from pytest_gpu_pairs.run.jobs import JobProcess, build_spec

MECHANISMS = 2
SLOWDOWN_GUESS = 1.5
BG_FACTOR, BG_EXTRA_S = 2.0, 5.0
FIXED_S = 35.0  # pytest start, idle power (3 s), daemon starts (with their client check) and stops, writing
MIN_W, MAX_W = 2.5, 12.0


def _steps_per_epoch(log_path: str, fallback: int) -> int:
    """The job's own count (its first line: "<model>: N steps (M per epoch at scale 1.0)")."""
    try:
        found = re.search(r": (\d+) steps \((\d+) per epoch at scale", Path(log_path).read_text(errors="replace"))
    except OSError:
        found = None
    return int(found.group(2)) if found else fallback


def probe(model: str, hparams: dict, seconds: float, workdir: Path, device: str = "cuda") -> dict:
    """Train the job alone for ``seconds`` after its first step; its rate and startup time."""
    info = BUILTINS[model]
    if not info.implemented:
        return {"model": model, "error": "not implemented in this version"}
    hp = {**info.defaults(), **hparams, "epochs": 1}
    spec = build_spec(JobConfig(model, tuple(sorted(hp.items()))), "calibration", device, 1.0, 300.0)
    job = JobProcess(spec, workdir / f"{model}.log", workdir / f"{model}.progress.jsonl").start()
    try:
        deadline = time.time() + 240
        while job.poll() is None and time.time() < deadline:
            progress = Progress.read(job.progress_path)
            if progress.ready_t is not None and progress.last_t is not None \
                    and progress.last_t - progress.ready_t >= seconds:
                break
            time.sleep(0.1)
    finally:
        job.kill_tree(grace_s=2.0)
    progress = Progress.read(job.progress_path)
    rate = progress.training_rate()
    if rate is None or progress.ready_t is None:
        return {"model": model, "error": f"no training rate (see {job.log_path})"}
    fallback = info.steps_per_epoch(int(hp["batch_size"])) if "batch_size" in hp else info.steps_per_epoch()
    return {"model": model, "steps_per_s": rate, "startup_s": progress.ready_t - job.start_t,
            "steps_per_epoch": _steps_per_epoch(job.log_path, fallback)}


def _jobs(template: dict) -> list[tuple[str, str, dict]]:
    """(role, model, hyperparameters) of every job, in file order."""
    return [(role, p[key]["model"], p[key].get("hyperparameters", {}))
            for p in template["pairs"] for role, key in (("fg", "foreground"), ("bg", "background"))]


def estimate_s(w: float, pairs: int, rounds: int, overhead_s: float, startup_s: float, fg_solos: int,
               bg_solos: int) -> float:
    """Expected wall time of the pytest run: rounds (overhead + slowed window) plus solo baselines."""
    n_rounds = pairs * MECHANISMS * rounds
    return (FIXED_S + n_rounds * (overhead_s + SLOWDOWN_GUESS * w) + fg_solos * (startup_s + w)
            + bg_solos * (startup_s + BG_FACTOR * w + BG_EXTRA_S))


def choose_w(budget_s: float, *shape) -> float:
    """The foreground solo seconds that make the whole run fit ``budget_s`` (the estimate is linear in W)."""
    fixed, slope = estimate_s(0.0, *shape), estimate_s(1.0, *shape) - estimate_s(0.0, *shape)
    return max(MIN_W, min(MAX_W, (budget_s - fixed) / slope))


def plan(template: dict, rates: dict[str, dict], w: float) -> tuple[dict, float, dict]:
    """Epochs per job and one scale: every job gets its target steps within a few percent."""
    targets = {}
    for role, model, _ in _jobs(template):
        if "steps_per_s" in rates.get(model, {}):
            seconds = w if role == "fg" else BG_FACTOR * w + BG_EXTRA_S
            targets[(role, model)] = rates[model]["steps_per_s"] * seconds
    if not targets:
        return template, 0.01, {}
    # The smallest job gets 3 epochs, so rounding epochs to whole numbers costs at most ~17 %.
    scale = min(steps / rates[m]["steps_per_epoch"] for (_, m), steps in targets.items()) / 3
    epochs = {key: max(1, round(steps / (rates[key[1]]["steps_per_epoch"] * scale))) for key, steps in targets.items()}
    settings = json.loads(json.dumps(template))
    for pair in settings["pairs"]:
        for role, key in (("fg", "foreground"), ("bg", "background")):
            found = epochs.get((role, pair[key]["model"]))
            if found is not None:
                pair[key].setdefault("hyperparameters", {})["epochs"] = found
    return settings, scale, {f"{r}:{m}": e for (r, m), e in epochs.items()}


def calibrate(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="size the pairs to the time at hand, before they run")
    parser.add_argument("template")
    parser.add_argument("study_dir", type=Path)
    parser.add_argument("--budget-s", type=float, default=450.0, help="wall time for the pytest run that follows")
    parser.add_argument("--probe-s", type=float, default=2.0)
    parser.add_argument("--device", default="cuda", help="cuda on the device machine; cpu only to try the script")
    parser.add_argument("--groups", default="", help="comma-separated pair groups the budget is for (default: all)")
    parser.add_argument("--window-s", type=float, default=None, help="the foreground's solo seconds, not from the budget")
    args = parser.parse_args(argv)
    started = time.time()
    template = read_json(Path(args.template))
    models = {model: hp for _, model, hp in _jobs(template)}
    with tempfile.TemporaryDirectory(prefix="calibrate-") as tmp:
        rates = {m: probe(m, hp, args.probe_s, Path(tmp), args.device) for m, hp in models.items()}
    usable = [r for r in rates.values() if "steps_per_s" in r]
    startup = max((r["startup_s"] for r in usable), default=5.0)
    overhead = startup + 3.0  # the foreground starts beside the background; teardown; MPS client check
    groups = {g for g in args.groups.split(",") if g}
    runnable = [p for p in template["pairs"] if all("steps_per_s" in rates[p[k]["model"]]
                                                     for k in ("foreground", "background"))
                and (not groups or p["group"] in groups)]
    fg_solos = len({json.dumps(p["foreground"], sort_keys=True) for p in runnable})
    bg_solos = len({json.dumps(p["background"], sort_keys=True) for p in runnable})
    rounds = template.get("defaults", {}).get("runs_per_config", 1)
    budget = args.budget_s - (time.time() - started)
    shape = (len(runnable), rounds, overhead, startup, fg_solos, bg_solos)
    w = args.window_s if args.window_s is not None else choose_w(budget, *shape)
    settings, scale, epochs = plan(template, rates, w)
    args.study_dir.mkdir(parents=True, exist_ok=True)
    settings_path = (args.study_dir / "sharing_settings.json").resolve()
    atomic_write_text(settings_path, json.dumps(settings, indent=1))
    atomic_write_text(args.study_dir / "sharing_scale.txt", f"{scale:.6g}\n")
    if usable:
        atomic_write_json(args.study_dir / "calibrated.json", {"settings": [str(settings_path)], "scale": float(f"{scale:.6g}")})
    for r in rates.values():
        print(f"  {r['model']:12s} " + (f"{r['steps_per_s']:8.1f} steps/s alone, first step {r['startup_s']:.1f} s "
                                         f"after start" if "steps_per_s" in r else r["error"]))
    print(f"calibration took {time.time() - started:.0f} s; {len(runnable)} runnable pairs x {MECHANISMS} mechanisms "
          f"x {rounds} rounds; overhead per round ~{overhead:.1f} s; foreground solo time W = {w:.1f} s "
          f"(background {BG_FACTOR * w + BG_EXTRA_S:.1f} s); scale {scale:.4g}; epochs {epochs}; "
          f"expected pytest wall {estimate_s(w, *shape):.0f} s of {budget:.0f} s left")
    return 0 if usable else 1


def leftovers(limits_dir: Path) -> int:
    """What the limits runs left running, for the table: MPS processes, and the GPU's compute processes."""
    mps = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(process.info.get("cmdline") or [])
        if "mps-" in line.lower():
            mps.append(f"{process.info['pid']} {line}")
    smi = shutil.which("nvidia-smi")
    gpu = (subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader"], capture_output=True,
                          text=True, timeout=60).stdout.strip() if smi else "nvidia-smi not found")
    limits_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(limits_dir / "leftover-gpu.txt", gpu + "\n")
    atomic_write_text(limits_dir / "leftover-mps.txt", "\n".join(mps) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["calibrate"]:
        return calibrate(argv[1:])
    if argv[:1] == ["leftovers"] and len(argv) == 2:
        return leftovers(Path(argv[1]))
    print("usage: python -m pytest_gpu_pairs.studies.steps.sharing calibrate TEMPLATE STUDY_DIR [...] | "
          "leftovers LIMITS_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
