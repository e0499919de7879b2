"""What a larger global batch did to the loss, from the branches ``workloads.batch_growth`` wrote:
one checkpoint, continued at the current global batch and at the larger one under each
learning-rate rule, every branch for the same samples, each seed a replicate.

Per rule: the held-out loss after the branch's samples and the loss averaged over the branch's
evaluations after the checkpoint (the area under its curve per sample, steadier than one point),
each a mean over seeds with its Student-t interval; and each rule against the current batch,
paired by seed (the seed orders the data, so the same seed's branches saw comparable streams):
the mean difference with its interval, and a verdict: lower, higher, or no difference told
apart at this many seeds. Branch files are untrusted: anything unusable is one line naming the
file, the JSON path and what was expected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.inputs import SettingsError, read_json
from pytest_gpu_pairs.record.stats import interval

BASELINE = "current"
LOSS = "eval_loss"


@dataclass(frozen=True)
class Branch:
    """One branch's curve: (samples after the checkpoint, held-out loss), in order, the checkpoint first."""

    rule: str
    seed: int
    global_batch: int
    learning_rate: float
    curve: tuple[tuple[int, float], ...]

    @property
    def final_loss(self) -> float:
        return self.curve[-1][1]

    @property
    def mean_loss(self) -> float:
        """The loss averaged over the branch's samples: the trapezoid area under its curve after the
        checkpoint, over the samples trained."""
        area = math.fsum((s1 - s0) * (l0 + l1) / 2.0 for (s0, l0), (s1, l1) in zip(self.curve, self.curve[1:]))
        return area / (self.curve[-1][0] - self.curve[0][0])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_branch(path: Path, rule: str) -> Branch:
    data = read_json(path)
    if not isinstance(data, dict):
        raise SettingsError(path, "$", "expected a branch written by workloads.batch_growth (an object)")
    for key in ("seed", "global_batch"):
        if not (isinstance(data.get(key), int) and not isinstance(data.get(key), bool) and data[key] >= 0):
            raise SettingsError(path, f"$.{key}", "expected a whole number of 0 or more")
    if not (_number(data.get("learning_rate")) and data["learning_rate"] > 0):
        raise SettingsError(path, "$.learning_rate", "expected the branch's learning rate, a number above 0")
    curve = data.get("curve")
    if not isinstance(curve, list) or len(curve) < 2:
        raise SettingsError(path, "$.curve", "expected the held-out loss at two evaluations or more")
    points: list[tuple[int, float]] = []
    for index, entry in enumerate(curve):
        ok = (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int) and entry[0] >= 0
              and isinstance(entry[1], dict) and _number(entry[1].get(LOSS)))
        if not ok or (points and entry[0] <= points[-1][0]):
            raise SettingsError(path, f"$.curve[{index}]", f"expected [samples, {{'{LOSS}': loss}}] with samples rising")
        points.append((entry[0], float(entry[1][LOSS])))
    return Branch(rule, data["seed"], data["global_batch"], float(data["learning_rate"]), tuple(points))


def read_branches(folder: Path, plan: dict[str, Any]) -> list[Branch]:
    """Every branch the plan (``convergence.json``) names, from ``<rule>_b<batch>_s<seed>.json``."""
    branches = plan.get("branches")
    if not isinstance(branches, list) or not branches:
        raise SettingsError(folder / "convergence.json", "$.branches", "expected the list of branches run")
    found = []
    for index, entry in enumerate(branches):
        if not (isinstance(entry, dict) and isinstance(entry.get("rule"), str) and entry["rule"].isidentifier()
                and isinstance(entry.get("global_batch"), int) and isinstance(entry.get("seed"), int)):
            raise SettingsError(folder / "convergence.json", f"$.branches[{index}]",
                                "expected a rule name, a global batch and a seed")
        name = f"{entry['rule']}_b{entry['global_batch']}_s{entry['seed']}.json"
        found.append(read_branch(folder / "convergence" / name, entry["rule"]))
    return found


def _summary(values: list[float]) -> dict[str, Any]:
    found = interval(values)
    return {"mean": found.mean, "ci": found.as_list(), "n": found.n}


def _verdict(ci: Optional[list[float]]) -> str:
    if ci is None:
        return "not told: one seed gives no interval"
    if ci[1] < 0:
        return "lower than at the current batch"
    if ci[0] > 0:
        return "higher than at the current batch"
    return "no difference told apart at this many seeds"


def compare(branches: list[Branch]) -> dict[str, Any]:
    """Per rule its losses over seeds, and against the current batch paired by seed."""
    rules: dict[str, list[Branch]] = {}
    for branch in branches:
        rules.setdefault(branch.rule, []).append(branch)
    baseline = {b.seed: b for b in rules.get(BASELINE, [])}
    found = {}
    for rule, members in rules.items():
        entry: dict[str, Any] = {"global_batch": members[0].global_batch, "learning_rate": members[0].learning_rate,
                                 "seeds": sorted(b.seed for b in members), "samples": members[0].curve[-1][0],
                                 "final_loss": _summary([b.final_loss for b in members]),
                                 "mean_loss": _summary([b.mean_loss for b in members])}
        paired = [(b, baseline[b.seed]) for b in members if b.seed in baseline]
        if rule != BASELINE and paired:
            for key in ("final_loss", "mean_loss"):
                diff = _summary([getattr(b, key) - getattr(base, key) for b, base in paired])
                entry[f"{key}_minus_current"] = {**diff, "verdict": _verdict(diff["ci"])}
        found[rule] = entry
    return found
