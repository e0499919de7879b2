"""Pairs for a blind study, drawn at random rather than chosen: of the built-in workloads' pairs that no
H200 study of the planner holds, those the planner predicts contended (below ``--below`` under either
mechanism, where an error could show; a pair at 2 either way tests little), ``--n`` of them by a
seeded draw. Chosen studies test what their chooser suspected (the heavy pairs, the host's pairs); a
draw estimates what a user who picks a pair meets.

    python -m tools.planner_validation.draw_pairs --seed 20261203 --n 6            # the draw, as text
    python -m tools.planner_validation.draw_pairs --seed 20261203 --n 6 --settings settings/planner_random.json

The candidates depend on the planner of the commit that draws (its predictions decide what reads as
contended), so a draw is reproduced at that commit; the settings file records the seed and the rule.
A later draw adds the earlier draw's settings (``settings/planner_random.json``) to ``ELSEWHERE`` first.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.planning.cards import H200
from pytest_gpu_pairs.planning.measured import pair_key
from pytest_gpu_pairs.planning.predict import Planner

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "settings/planner_reference.json"
ELSEWHERE = ("settings/planner_unseen.json", "settings/planner_heavy.json", "settings/planner_host.json",
             "settings/planner_fresh.json")  # H200 studies of pairs outside the reference
MECHANISMS = ("timeslice", "mps")
Pair = tuple[str, str]


def pairs_in(settings: Path) -> set[Pair]:
    return {pair_key(p["foreground"]["model"], p["background"]["model"]) for p in json.loads(settings.read_text())["pairs"]}


def candidates(below: float, root: Path = ROOT) -> list[tuple[Pair, dict[str, float]]]:
    """Every pair of the reference's workloads that no H200 study holds and the package's H200 planner
    predicts below ``below`` under a mechanism, with those predictions, in a fixed order."""
    reference = pairs_in(root / REFERENCE)
    measured = reference.union(*(pairs_in(root / f) for f in ELSEWHERE))
    workloads = sorted({m for pair in reference for m in pair})
    planner = Planner(H200.table(), H200.pairs().measured)
    found = []
    for pair in itertools.combinations(workloads, 2):
        if pair in measured:
            continue
        predicted = {m: planner.efficiency(pair, m).value for m in MECHANISMS}
        if any(v is not None and v < below for v in predicted.values()):
            found.append((pair, predicted))
    return found


def draw(pool: list[tuple[Pair, dict[str, float]]], seed: int, n: int) -> list[tuple[Pair, dict[str, float]]]:
    return random.Random(seed).sample(pool, min(n, len(pool)))


def _job(model: str) -> dict:
    return {"model": model, "hyperparameters": {"epochs": 1}}


def settings(drawn: list[tuple[Pair, dict[str, float]]], seed: int, below: float, pool: int) -> dict:
    return {
        "name": "planner_random",
        "description": (f"{len(drawn)} pairs of built-in workloads drawn at random (seed {seed}, "
                        "`python -m tools.planner_validation.draw_pairs`) from the "
                        f"{pool} that no H200 study of the planner holds and that it predicts below {below} under "
                        "time-slicing or MPS, at default hyperparameters and one epoch a run, measured with the "
                        "default method: predicted by `gpu-pairs plan --card h200` before they ran "
                        "(reports/reference/planner_validation/random/), to estimate the planner's error on a "
                        "contended pair a user picks."),
        "design": "pairs",
        "defaults": {"vram_budget_mb": 130000, "min_efficiency": 0.0, "runs_per_config": 1,
                     "restart_delay_s": 0, "timeout_s": 600},
        "pairs": [{"group": f"d{i:02d}", "foreground": _job(a), "background": _job(b)}
                  for i, ((a, b), _) in enumerate(drawn, start=1)],
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--below", type=float, default=1.9, help="predicted efficiency under a mechanism (default 1.9)")
    parser.add_argument("--settings", type=Path, help="also write the study's settings file here")
    args = parser.parse_args(argv)
    pool = candidates(args.below)
    drawn = draw(pool, args.seed, args.n)
    print(f"{len(pool)} candidate pairs; drawn with seed {args.seed}:")
    for (a, b), predicted in drawn:
        print(f"  {a} + {b}: " + ", ".join(f"{m} {v:.3f}" for m, v in predicted.items()))
    if args.settings:
        args.settings.write_text(json.dumps(settings(drawn, args.seed, args.below, len(pool)), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
