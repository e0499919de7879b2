"""Min fit of every built-in at its default hyperparameters, and of pairs, on the GPU machine:

    python -m tools.planner.min_fit --state /tmp/planner/min_fit.json --profiles RAW.json --budget-s 540 \
        [--models mnist,resnet20] [--pairs mnist+resnet20]

Bisection (``run.minfit.bisect_min_fit``) over the emulated card size with the product's ballast;
each probe starts the job(s) and waits for their steady state (``run.minfit.probe_fits``). Every
probe is saved in ``--state`` as it ends, so a run cut by its budget resumes where it stopped: the
probes already made are answered from the file. The hint is the NVML peak of the solo profile (the
sum of both for a pair). ``--merge RAW.json`` writes the results into a workload-profiles file.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.run.minfit import METHOD, RESOLUTION_MB, bisect_min_fit, probe_fits

LOW_MB = 512
STEADY_STEPS = 5


class OutOfBudget(Exception):
    pass


class Inconclusive(Exception):
    """A probe whose job finished its training before a steady state: no size can be judged by it."""


def _job(model: str) -> JobConfig:
    """The built-in at its defaults, epochs included: the probe stops it once steady, and a job whose
    first epoch is shorter than the probe (vulberta_cnn: 36 steps in 0.6 s) must not end before."""
    return JobConfig(model, tuple(sorted(BUILTINS[model].defaults().items())))


def _hint(models: list[str], peaks: dict) -> int | None:
    values = [peaks.get(m) for m in models]
    return int(sum(values)) if all(values) else None


def measure(key: str, models: list[str], state: dict, save, gpu, work: Path, hint, high: int, deadline: float) -> dict:
    entry = state.setdefault(key, {"models": models, "probes": {}})

    def fits(size: int) -> bool:
        known = entry["probes"].get(str(size))
        if known is not None:
            if not known.get("conclusive", True):
                raise Inconclusive(known["reason"])
            return known["fits"]
        if time.time() > deadline:
            raise OutOfBudget
        outcome = probe_fits([_job(m) for m in models], size, gpu, work / key, STEADY_STEPS)
        entry["probes"][str(size)] = outcome.as_dict()
        save()
        print(json.dumps({"key": key, "card_mb": size, "fits": outcome.fits, "reason": outcome.reason[:160]}), flush=True)
        if not outcome.conclusive:
            raise Inconclusive(outcome.reason)
        return outcome.fits

    try:
        found = bisect_min_fit(fits, LOW_MB, high, hint, RESOLUTION_MB)
    except Inconclusive as stop:
        entry.update(min_fit_mb=None, no_fit_mb=None, inconclusive=str(stop), done=True)
        save()
        return entry
    entry.update(min_fit_mb=found.fit_mb, no_fit_mb=found.no_fit_mb, done=True)
    save()
    return entry


def merge(state: dict, raw_path: Path) -> None:
    raw = json.loads(raw_path.read_text())
    for record in raw["workloads"]:
        entry = state.get(record["model"])
        if entry and entry.get("done"):
            record["min_fit_mb"] = entry["min_fit_mb"]
    raw["pairs"] = [{"models": e["models"], "min_fit_mb": e["min_fit_mb"]} for e in state.values()
                    if len(e["models"]) == 2 and e.get("done")]
    raw["min_fit_method"] = METHOD.format(steps=STEADY_STEPS, resolution=RESOLUTION_MB)
    raw_path.write_text(json.dumps(raw, indent=1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--profiles", required=True, help="workload profiles (their NVML peaks are the hints)")
    parser.add_argument("--models", default=",".join(m for m, b in BUILTINS.items() if b.implemented and not b.cpu_only))
    parser.add_argument("--pairs", default="mnist+resnet20")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--merge", default=None, metavar="RAW", help="only write the results into RAW and exit")
    args = parser.parse_args(argv)
    state_path = Path(args.state)
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    if args.merge:
        merge(state, Path(args.merge))
        return 0
    from pytest_gpu_pairs.devices.nvml import Gpu

    gpu = Gpu(0)
    high = int(gpu.info.memory_total_mb) - 1024
    peaks = {r["model"]: r.get("peak_vram_nvml_mb") for r in json.loads(Path(args.profiles).read_text())["workloads"]}
    state_path.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        state_path.write_text(json.dumps(state, indent=1))

    deadline = time.time() + args.budget_s
    wanted = [(m, [m]) for m in args.models.split(",") if m] + [(p, p.split("+")) for p in args.pairs.split(",") if p]
    for key, models in wanted:
        if state.get(key, {}).get("done"):
            continue
        try:
            entry = measure(key, models, state, save, gpu, state_path.parent / "min_fit", _hint(models, peaks), high,
                            deadline)
        except OutOfBudget:
            print(f"budget spent: run again to resume at {key}")
            return 3
        print(json.dumps({"key": key, "min_fit_mb": entry["min_fit_mb"], "no_fit_mb": entry["no_fit_mb"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
