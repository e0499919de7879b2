"""Where does MRT-OAST's accuracy respond to the learning rate and the epochs? A probe to run on
the GPU before a pilot spends device time on a design.

Each configuration trains the built-in exactly as a job does (its optimiser, warm-up and decay
over the configuration's epochs) and, after every scaled epoch, scores the fixed test pairs:
accuracy at the predecessor's 0.9 threshold, the threshold-free ROC AUC and the mean score of
clones and non-clones, so that a run stuck at one side of the threshold still shows whether it
learns. ``edit`` is the generated pairs' substitution rate (the data's difficulty; the
built-in's is 0.3); ``batch_size`` replaces the built-in's 64 (a smaller one keeps a check on the CPU
short).

    python -m tools.hp_pilot.probe_mrt_oast --out probe.jsonl --parallel 3 \
        'scale=1.0 epochs=4 learning_rate=1e-4' 'scale=1.0 epochs=4 learning_rate=1e-4 edit=0.15'
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def parse_config(text: str) -> dict[str, float]:
    config = dict(item.split("=", 1) for item in text.split())
    return {name: float(value) for name, value in config.items()}


def score_pairs(workload) -> dict[str, float]:
    import torch

    from pytest_gpu_pairs.workloads.data import scaled_count
    from pytest_gpu_pairs.workloads.mrt_oast import TEST_PAIRS, TEST_THRESHOLD
    from pytest_gpu_pairs.workloads.scores import roc_auc

    workload.model.eval()
    with torch.no_grad():
        a, b, target = workload.data.fixed_set(scaled_count(TEST_PAIRS, workload.scale, 200))
        scores = torch.cat([workload.model(x, y) for x, y in zip(a.split(256), b.split(256))])
    clones = target.bool()
    return {"accuracy_0.9": float(((scores > TEST_THRESHOLD) == clones).float().mean()),
            "accuracy_0.5": float(((scores > 0.5) == clones).float().mean()),
            "auc": roc_auc(scores, target), "clone_mean": float(scores[clones].mean()),
            "nonclone_mean": float(scores[~clones].mean())}


def probe(config: dict[str, float]) -> list[dict]:
    import math

    import torch

    from pytest_gpu_pairs.workloads.data import ClonePairs
    from pytest_gpu_pairs.workloads.mrt_oast import SEQUENCE, VOCAB
    from pytest_gpu_pairs.workloads.train import build, total_steps

    scale = config.get("scale", 1.0)
    overrides: dict[str, float | int] = {k: v for k, v in config.items() if k in ("learning_rate", "epochs")}
    if "batch_size" in config:
        overrides["batch_size"] = int(config["batch_size"])
    workload = build("mrt_oast", "cuda" if torch.cuda.is_available() else "cpu", scale, **overrides)
    if "edit" in config:
        workload.data = ClonePairs(SEQUENCE, VOCAB, workload.device, edit=config["edit"])
    scaled_epoch = max(1, math.ceil(workload.steps_per_epoch() * scale))
    total = total_steps(float(workload.hp["epochs"]), workload.steps_per_epoch(), scale)
    batches, rows, started = workload.batches(), [], time.monotonic()
    for step in range(1, total + 1):
        workload.train_step(next(batches))
        if step % scaled_epoch == 0 or step == total:
            rows.append({**config, "step": step, "train_s": round(time.monotonic() - started, 1),
                         **score_pairs(workload)})
    return rows


def run_all(configs: list[str], out: str, parallel: int) -> None:
    """Each configuration in a process of its own, ``parallel`` at a time; whatever ends this
    (an error, Ctrl-C), no probe is left running."""
    pending, running = list(configs), []
    try:
        with open(out, "a") as sink:
            while pending or running:
                while pending and len(running) < parallel:
                    running.append(subprocess.Popen([sys.executable, "-m", "tools.hp_pilot.probe_mrt_oast", "--one",
                                                     pending.pop(0)], stdout=subprocess.PIPE, text=True))
                time.sleep(0.5)
                for process in [p for p in running if p.poll() is not None]:
                    running.remove(process)
                    sink.write(process.stdout.read())
                    sink.flush()
    finally:
        for process in running:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*")
    parser.add_argument("--one", help="probe this configuration in this process")
    parser.add_argument("--out", default="probe.jsonl")
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args()
    if args.one:
        for row in probe(parse_config(args.one)):
            print(json.dumps(row), flush=True)
        return 0
    run_all(args.configs, args.out, args.parallel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
