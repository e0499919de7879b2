"""Pairs for a blind study, drawn at random rather than chosen: of the built-in workloads' pairs that no
H200 study of the planner holds, those the planner predicts contended (below ``--below`` under either
mechanism, where an error could show; a pair at 2 either way tests little), ``--n`` of them by a
seeded draw. Chosen studies test what their chooser suspected (the heavy pairs, the host's pairs); a
draw estimates what a user who picks a pair meets. ``--all`` takes every candidate instead, where the
question is the worst case rather than the typical one, and ``--under`` judges by one mechanism.

    python -m tools.planner_validation.draw_pairs --seed 20261203 --n 6            # the draw, as text
    python -m tools.planner_validation.draw_pairs --seed 20261203 --n 6 --settings settings/planner_random.json

    python -m tools.planner_validation.draw_pairs --all --under mps --name planner_contended --prefix c \
        --settings settings/planner_contended.json                                  # every one contended under MPS

The candidates depend on the planner of the commit that draws (its predictions decide what reads as
contended), so a draw is reproduced at that commit; the settings file records the seed and the rule.
A later draw adds the earlier draws' settings to ``ELSEWHERE`` first.
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
             "settings/planner_fresh.json", "settings/planner_random.json",
             "settings/planner_contended.json")  # H200 studies of pairs outside the reference
MECHANISMS = ("timeslice", "mps")
EITHER = "either"
Pair = tuple[str, str]


def pairs_in(settings: Path) -> set[Pair]:
    return {pair_key(p["foreground"]["model"], p["background"]["model"]) for p in json.loads(settings.read_text())["pairs"]}


def measured_elsewhere(root: Path = ROOT, excluding: Optional[str] = None) -> set[Pair]:
    """Every pair an H200 study of the planner holds: the reference's and the other studies', but
    those of ``excluding`` (a study's own settings: what was measured before it, as its draw saw)."""
    return pairs_in(root / REFERENCE).union(*(pairs_in(root / f) for f in ELSEWHERE if f != excluding))


def candidates(below: float, root: Path = ROOT, under: str = EITHER) -> list[tuple[Pair, dict[str, float]]]:
    """Every pair of the reference's workloads that no H200 study holds and the package's H200 planner
    predicts below ``below`` under ``under`` (either mechanism by default), with those predictions, in
    a fixed order."""
    reference = pairs_in(root / REFERENCE)
    measured = measured_elsewhere(root)
    judged = MECHANISMS if under == EITHER else (under,)
    workloads = sorted({m for pair in reference for m in pair})
    planner = Planner(H200.table(), H200.pairs().measured)
    found = []
    for pair in itertools.combinations(workloads, 2):
        if pair in measured:
            continue
        predicted = {m: planner.efficiency(pair, m).value for m in MECHANISMS}
        if any(predicted[m] is not None and predicted[m] < below for m in judged):
            found.append((pair, predicted))
    return found


def draw(pool: list[tuple[Pair, dict[str, float]]], seed: int, n: int) -> list[tuple[Pair, dict[str, float]]]:
    return random.Random(seed).sample(pool, min(n, len(pool)))


def _job(model: str) -> dict:
    return {"model": model, "hyperparameters": {"epochs": 1}}


def _under_words(under: str) -> str:
    return "time-slicing or MPS" if under == EITHER else {"timeslice": "time-slicing", "mps": "MPS"}[under]


def _how_chosen(n: int, seed: Optional[int], below: float, pool: int, under: str) -> str:
    rule = f"that no H200 study of the planner holds and that it predicts below {below} under {_under_words(under)}"
    if seed is None:
        return (f"every pair of built-in workloads {rule} ({n}, `python -m tools.planner_validation.draw_pairs "
                "--all`), to test it blind on each pair it calls contended there")
    return (f"{n} pairs of built-in workloads drawn at random (seed {seed}, `python -m "
            f"tools.planner_validation.draw_pairs`) from the {pool} {rule}, to estimate its error on a contended "
            "pair a user picks")


def settings(drawn: list[tuple[Pair, dict[str, float]]], seed: Optional[int], below: float, pool: int,
             name: str = "planner_random", prefix: str = "d", under: str = EITHER) -> dict:
    folder = name.removeprefix("planner_")
    return {
        "name": name,
        "description": (f"{_how_chosen(len(drawn), seed, below, pool, under)}; at default hyperparameters and one "
                        "epoch a run, measured with the default method, predicted by `gpu-pairs plan --card h200` "
                        f"before they ran (reports/reference/planner_validation/{folder}/)."),
        "design": "pairs",
        "defaults": {"vram_budget_mb": 130000, "min_efficiency": 0.0, "runs_per_config": 1,
                     "restart_delay_s": 0, "timeout_s": 600},
        "pairs": [{"group": f"{prefix}{i:02d}", "foreground": _job(a), "background": _job(b)}
                  for i, ((a, b), _) in enumerate(drawn, start=1)],
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, help="the draw's seed (required unless --all)")
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--all", action="store_true", help="every candidate, in a fixed order, no draw")
    parser.add_argument("--below", type=float, default=1.9, help="predicted efficiency under a mechanism (default 1.9)")
    parser.add_argument("--under", choices=(EITHER, *MECHANISMS), default=EITHER,
                        help="the mechanism whose prediction must be below --below (default: either)")
    parser.add_argument("--name", default="planner_random", help="the settings' name (default: planner_random)")
    parser.add_argument("--prefix", default="d", help="the groups' letter (default: d)")
    parser.add_argument("--settings", type=Path, help="also write the study's settings file here")
    args = parser.parse_args(argv)
    if args.all == (args.seed is not None):
        parser.error("give either --seed or --all")
    pool = candidates(args.below, under=args.under)
    drawn = pool if args.all else draw(pool, args.seed, args.n)
    print(f"{len(pool)} candidate pairs; " + ("all taken:" if args.all else f"drawn with seed {args.seed}:"))
    for (a, b), predicted in drawn:
        print(f"  {a} + {b}: " + ", ".join(f"{m} {v:.3f}" for m, v in predicted.items()))
    if args.settings:
        found = settings(drawn, args.seed, args.below, len(pool), args.name, args.prefix, args.under)
        args.settings.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
