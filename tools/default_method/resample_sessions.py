"""How often three sessions of the default-method study's cases agree within the spread limit,
under a given stopping rule: each simulated session replays a measured session's rounds (resampled
in pairs of neighbours, as bracketed rounds share noise), stops as the runner would, and lands at
its own start's offset (``--between-run-sd``, the run-spread study's figure).

It makes the run-spread study's ``resampled.json`` from the default-method study's committed
sessions, so it stays a tool beside the study's collate (``gpu-pairs study collect
default_method_run_spread``): a collate writes the study's summary.json and table only, from the
study's own folder, while this reads another study's sessions and takes about four minutes.

    python -m tools.default_method.resample_sessions reports/reference/default_method/sessions-88e4113 \\
        reports/reference/default_method/sessions-da96df7 --between-run-sd 0.025 \\
        --out reports/reference/default_method/run-spread/resampled.json
"""
from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.stats import bracketed_interval
from pytest_gpu_pairs.record.store import atomic_write_json, load_run
from pytest_gpu_pairs.run.options import MIN_ROUNDS_FOR_PRECISION
from pytest_gpu_pairs.studies.collates.default_method import EFFICIENCY_SPREAD_LIMIT
from pytest_gpu_pairs.studies.collates.default_method_run_spread import round_timing

MAX_CASE_S = 180.0  # the product's time cap when the resampled sessions were measured

GROUPS = ("g01", "g10", "c03", "c04")
RULES = {"±3 %, at most 60 rounds": (0.03, 60), "±3 %": (0.03, None), "±2 %": (0.02, None)}
SESSIONS = 3
TRUE_EFFICIENCY = 2.0


def measured_sessions(folders: Sequence[Path]) -> dict[str, list[dict[str, Any]]]:
    """Per group: each measured session's rounds (centred on their mean), its time to the first
    round and its seconds per round."""
    found: dict[str, list[dict[str, Any]]] = {g: [] for g in GROUPS}
    for path in (p for folder in folders for p in sorted(folder.glob("session-[0-9].json"))):
        for case_id, record in load_run(path).records.items():
            group = case_id.split("-")[0]
            rounds = [r["concurrency_efficiency"] for r in record["rounds"] if r["complete"]]
            if group not in found or len(rounds) < 2:
                continue
            first_s, rounds_s = round_timing(record)
            mean = statistics.fmean(rounds)
            found[group].append({"rounds": [x - mean for x in rounds], "first_s": first_s,
                                 "round_s": rounds_s / len(record["rounds"])})
    return found


def replay(session: dict[str, Any], rule: tuple[float, Optional[int]], offset: float, rng: random.Random) -> float:
    precision, most = rule
    deviations = session["rounds"]
    values: list[float] = []
    t = session["first_s"]
    while True:
        start = rng.randrange(len(deviations) - 1)
        for deviation in deviations[start:start + 2]:
            values.append(TRUE_EFFICIENCY + offset + deviation)
            n = len(values)
            if n >= MIN_ROUNDS_FOR_PRECISION:
                interval = bracketed_interval(values)
                if interval.relative_half_width <= precision or (most is not None and n >= most):
                    return interval.mean
            if t + 2 * session["round_s"] > MAX_CASE_S:
                return bracketed_interval(values).mean
            t += session["round_s"]


def agreement(pools: dict[str, list[dict[str, Any]]], rule: tuple[float, Optional[int]], between_sd: float,
              draws: int, rng: random.Random) -> dict[str, Any]:
    within = {g: 0 for g in pools}
    all_within = 0
    for _ in range(draws):
        every = True
        for group, pool in pools.items():
            means = [replay(rng.choice(pool), rule, rng.gauss(0.0, between_sd), rng) for _ in range(SESSIONS)]
            agree = max(means) / min(means) - 1 <= EFFICIENCY_SPREAD_LIMIT
            within[group] += agree
            every = every and agree
        all_within += every
    return {"p_all_cases_within_limit": all_within / draws, "p_within_limit": {g: n / draws for g, n in within.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="study folders holding session-N.json")
    parser.add_argument("--between-run-sd", type=float, default=0.0)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    pools = {g: pool for g, pool in measured_sessions(args.folders).items() if pool}
    rng = random.Random(args.seed)
    result = {"sources": [str(f) for f in args.folders], "between_run_sd": args.between_run_sd, "draws": args.draws,
              "sessions_per_group": {g: len(p) for g, p in pools.items()}, "spread_limit": EFFICIENCY_SPREAD_LIMIT,
              "rules": {name: agreement(pools, rule, args.between_run_sd, args.draws, rng) for name, rule in RULES.items()}}
    atomic_write_json(args.out, result)
    for name, r in result["rules"].items():
        print(f"{name}: all {len(pools)} cases within {EFFICIENCY_SPREAD_LIMIT:.0%} in {r['p_all_cases_within_limit']:.2f} "
              "of draws; " + ", ".join(f"{g} {p:.2f}" for g, p in r["p_within_limit"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
