"""Collate the hyperparameter study: does sharing the GPU for a whole run change how B's learning
rate and epochs act on B's energy and accuracy, and what does B's setting do to A beside it?

One analysis, from which ``summary.json``, ``summary.md``, ``stats.csv`` and the interaction plots
all come. Its unit of replication is the seed: each seed is a replicate of the whole design (A and
B train from it), so every model below carries a seed term and its intervals rest on the spread
between seeds, not between repeats of one arithmetic.

- **Runs.** One row per case record (``runs_per_config`` 1). A concurrent run counts only when its
  background covered at least ``min_coverage`` (0.95) of it and nothing failed; the others are
  listed under ``excluded`` with the reason, never averaged in.
- **Blocks.** A pair whose replicates are split by factor (``split_by_factor``: each block a
  machine's session, with its own solo runs, its defaults named ``default_<block>``) is analysed per
  factor from that factor's block alone, so the seed term absorbs the machine each block ran on.
- **x.** Per factor, B's runs at the default and the factor's two bounds: ``log10(lr / lr_default)``
  (-0.7, 0, +0.7) or ``epochs / epochs_default`` (0.5, 1, 1.5).
- **Outcomes of B.** ``energy``: B's own share of the card's energy above idle; ``card_energy``: the
  whole card's over B's run; ``combined_energy``: the card's energy per solo-second of work done,
  B's run plus A's progress in it (A's steps over its solo pace), so sharing is credited with A's
  work (a solo run's work is its own length); each relative to the pair's mean solo default run.
  ``accuracy``: B's metric (``ACCURACY_METRICS``). ``cpu_energy``: RAPL, where the host exposes it.
- **(3) Interaction.** ``y ~ seed + x + shared + x:shared`` by least squares; the ``x:shared``
  coefficient (the slope's change when shared), its 95 % Student-t interval and p. A straight line
  over three levels misses an outcome that peaks at the middle one (a learning rate's accuracy), so
  the levels are also taken as a factor: ``y ~ seed + level + shared + level:shared``, an F test of
  the ``level:shared`` terms against the model without them (does sharing's effect differ from level
  to level), whose sequential sums of squares say how much of the spread is the seed's, the level's,
  sharing's and left over (the straight line's, where too few runs leave the factor model no freedom).
- **(1) Best value.** The level whose mean over seeds is best (accuracy highest, energy lowest),
  alone and shared; where they differ, per seed the shared runs' gain of the shared-best level
  over the solo-best one, with its t interval and p.
- **(2) A beside B.** A's pace (progress ratio), energy per step and accuracy (the mean over its runs
  that B's run covered whole) against B's x, concurrent runs only: ``y ~ seed + x``; and the same for
  ``vs_serial``, the card's energy over what both jobs' work would cost one after the other (each
  job's steps at its solo energy per step): below 1, sharing saved energy.
- **Past the bound.** A's pace above 1 or B's slowdown below 1 is no sharing's reading. Where a
  pair's runs lie past 1 as a whole (their mean's 95 % interval), their reference is wrong and the
  figure is not read; where the interval holds 1, single runs cross it by their reference's noise
  around a job that sharing hardly slows, and every run is read, that noise in the interval
  (``past_the_bound``).
- **By pair type.** The predecessor's types (solo GPU utilisations adding to at most 100 %:
  complementary, else competing): B's concurrent overhead, the interference on its accuracy and the
  card's energy over serial, each a mean over the type's shared runs with its t interval; and a
  heatmap of every interaction over its interval's half-width, the pairs labelled with their type.
- **(4) Energy-best against accuracy-best.** Per seed and mode, whether the level of least B energy
  is the level of best accuracy: the share that agree, its Clopper-Pearson interval, and a binomial
  test against the 1 in 3 of chance.

    gpu-pairs study collect hp_study --out reports/reference/hp_study
"""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
from scipy import stats

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import VARIANT_NAMES
from pytest_gpu_pairs.record.store import atomic_write_csv, atomic_write_json, atomic_write_text, load_run

FOLDERS = ("results-hp01", "results-hp02", "results-hp03")
BLOCKS = {factor: VARIANT_NAMES.get(factor, factor) for factor in ("learning_rate", "epochs")}
"""Each factor's name in case ids: its bounds' variants (``lr_min``) and, where a pair's replicates are
split by factor, its block's default runs (``default_lr``)."""
FACTORS = {factor: (f"{short}_min", f"{short}_max") for factor, short in BLOCKS.items()}
B_OUTCOMES = ("accuracy", "energy", "card_energy", "combined_energy")
RELATIVE = ("energy", "card_energy", "combined_energy")
A_OUTCOMES = ("a_pace", "a_energy_per_step", "a_accuracy")
SHARED_OUTCOMES = (*A_OUTCOMES, "vs_serial")
ACCURACY_METRICS = {"mrt_oast": "auc"}
"""B's accuracy where its primary metric is not the one that moves: mrt_oast's accuracy is taken at a
fixed 0.9 score threshold, which runs of minutes often leave at chance; the ROC AUC of the same test
pairs needs no threshold. Every other model is judged by its record's ``perf_metric``."""
MIN_FULL_CYCLE = 0.95  # an A run counts towards A's accuracy beside B when B's run covered this much of it
EXACT_FIT = 1e-12  # a residual this small a share of the spread is rounding, not noise to test against
SEED = re.compile(r"^(?P<variant>.+)_s(?P<seed>\d+)$")
BLOCK_DEFAULT = re.compile(r"^(?P<level>(bg_)?default)_(?P<block>\w+)$")
STATS_HEADER = ("pair", "question", "factor", "outcome", "term", "estimate", "ci95_low", "ci95_high", "p", "n",
                "note")


def number(value: Any) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def split_variant(variant: str) -> tuple[str, Optional[int]]:
    match = SEED.match(variant or "")
    return (match["variant"], int(match["seed"])) if match else (variant, None)


def level_and_block(variant: str) -> tuple[str, str]:
    """A block's default run (``default_lr``) is the default level of that block; every other variant
    is its own level, in the block its factor names (or the whole replicate's)."""
    match = BLOCK_DEFAULT.match(variant or "")
    return (match["level"], match["block"]) if match else (variant, "")


def combined_work_s(record: Any) -> Optional[float]:
    """Solo-seconds of work in B's run: B's whole run, plus A's steps over A's pace alone (in its own
    process around B's run where the record has it, else its solo case's)."""
    if record.get("mode") == "solo":
        return number(record.get("fg_duration_s"))
    b_work = number(record.get("fg_solo_duration_s"))
    a_steps, a_pace = number(record.get("bg_steps_in_window")), a_pace_alone(record)
    if b_work is None or a_steps is None or not a_pace:
        return None
    return b_work + a_steps / a_pace


def a_pace_alone(record: Any) -> Optional[float]:
    """A's reference pace, as its progress ratio was taken: alone around B's run, else its solo case."""
    return number(record.get("bg_alone_steps_per_s")) or number(record.get("bg_solo_steps_per_s"))


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def a_accuracy(record: Any) -> tuple[Optional[float], int]:
    """A's metric, the mean over its runs that B's run covered whole, and how many there were."""
    model = BUILTINS.get(record.get("bg_model") or "")
    if model is None:
        return None, 0
    metric = model.primary_metric
    read = [number((c.get("metrics") or {}).get(metric)) for c in record.get("bg_cycle_perf") or []
            if (number(c.get("shared")) or 0.0) >= MIN_FULL_CYCLE]
    values = [v for v in read if v is not None]
    return (sum(values) / len(values) if values else None), len(values)


def row_of(pair: str, record: Any) -> dict[str, Any]:
    variant, seed = split_variant(record.get("variant"))
    level, block = level_and_block(variant)
    model = record.get("fg_model")
    metric = ACCURACY_METRICS.get(model, record.get("perf_metric"))
    a_acc, a_runs = a_accuracy(record) if record.get("mode") == "concurrent" else (None, 0)
    a_steps = number(record.get("bg_steps_in_window"))
    return {"pair": pair, "case_id": record.get("case_id"), "variant": level, "block": block, "seed": seed,
            "mode": record.get("mode"), "model": model, "a_model": record.get("bg_model"),
            "hparams": record.get("fg_hparams") or {}, "metric": metric,
            "accuracy": number((record.get("perf") or {}).get(metric)) if metric else None,
            "energy": number(record.get("fg_gpu_energy_j")), "card_energy": number(record.get("gpu_energy_j")),
            "combined_energy": _ratio(number(record.get("gpu_energy_j")), combined_work_s(record)),
            "cpu_energy": number(record.get("cpu_energy_j")),
            "duration_s": number(record.get("fg_duration_s")), "coverage": number(record.get("bg_coverage")),
            "min_coverage": number(record.get("min_coverage")),
            "a_pace": number(record.get("bg_progress_ratio")), "a_drift": number(record.get("bg_alone_drift")),
            "a_energy_per_step": _ratio(number(record.get("bg_gpu_energy_j")), a_steps),
            "a_accuracy": a_acc, "a_full_runs": a_runs,
            "vs_serial": _ratio(number(record.get("gpu_energy_j")), number(record.get("serial_energy_j"))),
            "gpu_util": number(record.get("gpu_util_avg_pct")), "slowdown": number(record.get("fg_slowdown")),
            "failure": record.get("failure"), "complete": record.get("complete"), "cpu_note": (record.get("notes") or {}).get("cpu_energy_j")}


def observations(paths: Sequence[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        for case_id, record in sorted(load_run(path).records.items()):
            if record.get("design") == "hp_study":
                rows.append(row_of(case_id.split("-")[0], record))
    return rows


def exclusion(row: dict[str, Any]) -> Optional[str]:
    if row["failure"] or row["complete"] is False:
        return f"failed: {row['failure'] or 'incomplete'}"
    if row["seed"] is None:
        return "no seed: not a replicate of this study"
    if row["mode"] == "concurrent":
        needed = row["min_coverage"] if row["min_coverage"] is not None else MIN_FULL_CYCLE
        if row["coverage"] is None or row["coverage"] < needed:
            return f"the background covered {row['coverage']} of the run, below {needed:g}"
    return None


def varied_model(rows: list[dict[str, Any]], pair: str) -> Optional[str]:
    models = {r["model"] for r in rows if r["pair"] == pair and r["mode"] == "concurrent"}
    return models.pop() if len(models) == 1 else None


def factor_rows(rows: list[dict[str, Any]], pair: str, factor: str) -> list[dict[str, Any]]:
    """B's counted runs of the pair at its default and the factor's bounds, alone and shared, each with its x."""
    model = varied_model(rows, pair)
    wanted = ("default", *FACTORS[factor])
    mine = [r for r in rows if r["pair"] == pair and r["model"] == model and r["variant"] in wanted
            and r["block"] in ("", BLOCKS[factor])]
    defaults = [r["hparams"].get(factor) for r in mine if r["variant"] == "default"]
    default = number(defaults[0]) if defaults else None
    if not default:
        return []
    out = []
    for r in mine:
        value = number(r["hparams"].get(factor))
        if value:
            x = math.log10(value / default) if factor == "learning_rate" else value / default
            out.append({**r, "x": round(x, 6), "shared": r["mode"] == "concurrent"})
    return out


def relative(data: list[dict[str, Any]], outcome: str) -> list[dict[str, Any]]:
    """``y``: the outcome, an energy over the mean of the pair's solo default runs."""
    scale = 1.0
    if outcome in RELATIVE:
        base = [r[outcome] for r in data if r["variant"] == "default" and not r["shared"] and r[outcome] is not None]
        if not base:
            return []
        scale = sum(base) / len(base)
    return [{**r, "y": r[outcome] / scale} for r in data if r[outcome] is not None]


def ols(columns: dict[str, np.ndarray], y: np.ndarray) -> Optional[dict[str, Any]]:
    """Least squares with each named coefficient's 95 % t interval and p, and each column's
    sequential sum of squares (in the order given); None without residual freedom or full rank."""
    names = list(columns)
    design = np.column_stack([columns[name] for name in names])
    n, k = design.shape
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < k or n <= k:
        return None
    residual = y - design @ coef
    df = n - k
    variance = float(residual @ residual) / df
    cov = variance * np.linalg.inv(design.T @ design)
    t = float(stats.t.ppf(0.975, df))
    out: dict[str, Any] = {"n": n, "df": df, "terms": {}, "ss": {}, "ss_residual": float(residual @ residual)}
    for i, name in enumerate(names):
        se = math.sqrt(max(cov[i, i], 0.0))
        p = float(2 * stats.t.sf(abs(coef[i]) / se, df)) if se > 0 else (1.0 if coef[i] == 0 else 0.0)
        out["terms"][name] = {"estimate": float(coef[i]), "ci95": [float(coef[i] - t * se), float(coef[i] + t * se)],
                              "p": p, "se": se}
    previous = float(((y - y.mean()) ** 2).sum())
    for i in range(1, k + 1):
        part = design[:, :i]
        fitted = part @ np.linalg.lstsq(part, y, rcond=None)[0]
        left = float(((y - fitted) ** 2).sum())
        out["ss"][names[i - 1]] = max(previous - left, 0.0) if i > 1 else 0.0
        previous = left
    return out


def seed_columns(data: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """An intercept and one column per seed after the first: the seed as a block."""
    seeds = sorted({r["seed"] for r in data})
    columns = {"intercept": np.ones(len(data))}
    for seed in seeds[1:]:
        columns[f"seed_{seed}"] = np.array([float(r["seed"] == seed) for r in data])
    return columns


def _missing(reason: str) -> dict[str, Any]:
    return {"estimate": None, "reason": reason}


def _term(fit: dict[str, Any], name: str) -> dict[str, Any]:
    term = fit["terms"][name]
    return {"estimate": term["estimate"], "ci95": term["ci95"], "p": term["p"], "n_runs": fit["n"]}


def interaction(data: list[dict[str, Any]]) -> dict[str, Any]:
    """Sub-question 3: the slope's change when shared, seed as the block; sharing's effect level by
    level; and the shares of the spread that the seed, the level and sharing explain."""
    if len({r["x"] for r in data if r["shared"]}) < 2 or len({r["x"] for r in data if not r["shared"]}) < 2:
        return _missing("fewer than two levels in a mode have run")
    x = np.array([r["x"] for r in data])
    shared = np.array([float(r["shared"]) for r in data])
    y = np.array([r["y"] for r in data])
    if float(np.ptp(y)) == 0.0:
        return _missing(f"every run read the same ({y[0]:g}): no slope to compare")
    fit = ols({**seed_columns(data), "x": x, "shared": shared, "x_shared": x * shared}, y)
    if fit is None:
        return _missing(f"too few runs ({len(data)}) for seed, x, sharing and their interaction")
    answer = _term(fit, "x_shared")
    answer["by_level"] = by_level(data)
    answer["spread_share"] = answer["by_level"].get("spread_share") or _shares(fit, ["x"], ["shared", "x_shared"],
                                                                               "straight line")
    answer["slope_solo"] = fit["terms"]["x"]["estimate"]
    answer["n_seeds"] = len({r["seed"] for r in data})
    return answer


def level_columns(data: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """One column per level after the lowest: the level as a factor, no straight line assumed."""
    levels = sorted({r["x"] for r in data})
    return {f"level_{x:g}": np.array([float(r["x"] == x) for r in data]) for x in levels[1:]}


def by_level(data: list[dict[str, Any]]) -> dict[str, Any]:
    """Does sharing's effect differ from level to level: the F test of ``level:shared`` in
    ``y ~ seed + level + shared + level:shared``, and that fit's shares of the spread."""
    y = np.array([r["y"] for r in data])
    shared = np.array([float(r["shared"]) for r in data])
    levels = level_columns(data)
    base = {**seed_columns(data), **levels, "shared": shared}
    by_shared = {f"{name}:shared": column * shared for name, column in levels.items()}
    full = ols({**base, **by_shared}, y)
    reduced = ols(base, y)
    if full is None or reduced is None:
        return _missing(f"too few runs ({len(data)}) to test sharing level by level")
    if full["ss_residual"] <= EXACT_FIT * float(((y - y.mean()) ** 2).sum()):
        return _missing("the levels fit every run exactly: no spread between seeds to test against")
    q = len(levels)
    f = (max(reduced["ss_residual"] - full["ss_residual"], 0.0) / q) / (full["ss_residual"] / full["df"])
    return {"f": f, "df": [q, full["df"]], "p": float(stats.f.sf(f, q, full["df"])), "n_runs": full["n"],
            "spread_share": _shares(full, list(levels), ["shared", *by_shared], "levels")}


def _shares(fit: dict[str, Any], level_terms: Sequence[str], sharing_terms: Sequence[str],
            model: str) -> Optional[dict[str, Any]]:
    """The shares of the spread a fit's sequential sums of squares give the seed, the hyperparameter's
    level, sharing and what is left over; ``model`` names the fit."""
    ss = fit["ss"]
    total = sum(ss.values()) + fit["ss_residual"]
    if total <= 0:
        return None
    return {"seed": sum(v for k, v in ss.items() if k.startswith("seed_")) / total,
            "level": sum(ss[k] for k in level_terms) / total, "sharing": sum(ss[k] for k in sharing_terms) / total,
            "residual": fit["ss_residual"] / total, "model": model}


def level_means(data: list[dict[str, Any]], shared: bool) -> dict[float, float]:
    by: dict[float, list[float]] = {}
    for r in data:
        if r["shared"] == shared:
            by.setdefault(r["x"], []).append(r["y"])
    return {x: sum(v) / len(v) for x, v in sorted(by.items())}


def _best(means: dict[float, float], higher: bool) -> Optional[float]:
    if not means:
        return None
    return (max if higher else min)(means, key=lambda x: (means[x], -x if higher else x))


def t_interval(values: Sequence[float], unit: str = "n_seeds", null: float = 0.0) -> dict[str, Any]:
    """The mean, its 95 % t interval and the two-sided p of "the mean is ``null``"; ``unit`` names what was counted."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return {"estimate": mean, "ci95": None, "p": None, unit: n}
    sd = float(np.std(values, ddof=1))
    se = sd / math.sqrt(n)
    half = float(stats.t.ppf(0.975, n - 1)) * se
    p = float(2 * stats.t.sf(abs(mean - null) / se, n - 1)) if se > 0 else (1.0 if mean == null else 0.0)
    return {"estimate": mean, "ci95": [mean - half, mean + half], "p": p, unit: n}


def complete_seeds(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    levels = {r["x"] for r in data}
    cells: dict[Any, set] = {}
    for r in data:
        cells.setdefault(r["seed"], set()).add((r["x"], r["shared"]))
    whole = {seed for seed, have in cells.items() if len(have) == 2 * len(levels)}
    return [r for r in data if r["seed"] in whole]


def best_value(data: list[dict[str, Any]], higher: bool) -> dict[str, Any]:
    """Sub-question 1: does the best level move when shared? Read from the seeds that ran every level
    in both modes, so no level's mean carries another set of seeds' offsets."""
    data = complete_seeds(data)
    solo, shared = level_means(data, False), level_means(data, True)
    if len(solo) < 3 or len(shared) < 3:
        return _missing("no seed has run every level alone and shared")
    best_solo, best_shared = _best(solo, higher), _best(shared, higher)
    answer: dict[str, Any] = {"best_solo_x": best_solo, "best_shared_x": best_shared, "moved": best_solo != best_shared}
    if best_solo == best_shared:
        answer["gain"] = None
        answer["reason"] = "the same level is best alone and shared"
        return answer
    gains = []
    for seed in sorted({r["seed"] for r in data}):
        mine = {r["x"]: r["y"] for r in data if r["shared"] and r["seed"] == seed}
        if best_solo in mine and best_shared in mine:
            gain = mine[best_shared] - mine[best_solo]
            gains.append(gain if higher else -gain)
    answer["gain"] = t_interval(gains) if gains else None
    return answer


def past_the_bound(values: Sequence[float], bound: float, above: bool) -> Optional[dict[str, Any]]:
    """The runs' mean where its 95 % interval lies wholly past ``bound``, the figure no sharing crosses
    (A's pace above 1, B's slowdown below 1), or a single run's, which no interval can clear: the runs
    are off as a whole, their reference wrong. None where the interval holds the bound: single runs of a job that sharing hardly slows cross it by
    their reference's noise, and read together they carry that noise in their interval."""
    mean = t_interval(values, "n_runs", bound)
    ci = mean["ci95"]
    if ci is None:
        return mean
    return mean if (ci[0] > bound if above else ci[1] < bound) else None


def a_beside_b(data: list[dict[str, Any]], outcome: str) -> dict[str, Any]:
    """Sub-question 2: A's outcome against B's x, shared runs only, seed as the block; also the card's
    energy over what both jobs' work costs run one after the other (``vs_serial``). A's pace is not
    read where its runs lie above 1 as a whole (``past_the_bound``)."""
    runs = [r for r in data if r["shared"] and r[outcome] is not None]
    faster = sum(r[outcome] > 1 for r in runs) if outcome == "a_pace" else 0
    past = past_the_bound([r[outcome] for r in runs], 1.0, above=True) if faster else None
    if past is not None:
        return _missing(f"A ran faster beside B than alone over these {len(runs)} run(s) (a_pace {_mean_text(past)}), "
                        "which no sharing gives: not read until that is explained")
    if len({r["x"] for r in runs}) < 2:
        return _missing(f"fewer than two levels of B recorded A's {outcome}")
    y = np.array([r[outcome] for r in runs])
    if float(np.ptp(y)) == 0.0:
        return _missing(f"every run read the same ({y[0]:g})")
    fit = ols({**seed_columns(runs), "x": np.array([r["x"] for r in runs])}, y)
    if fit is None:
        return _missing(f"too few runs ({len(runs)}) for seed and x")
    answer = _term(fit, "x")
    answer["mean"] = float(y.mean())
    if faster:
        answer["runs_above_1"] = faster
    return answer


def _mean_text(mean: dict[str, Any]) -> str:
    ci = mean["ci95"]
    return f"{mean['estimate']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " (one run)")


def clopper_pearson(k: int, n: int) -> list[float]:
    low = float(stats.beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    high = float(stats.beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return [low, high]


def energy_accuracy_agreement(energy: list[dict[str, Any]], accuracy: list[dict[str, Any]]) -> dict[str, Any]:
    """Sub-question 4: per seed and mode, is B's least-energy level its most-accurate one?"""
    agree, cases = 0, 0
    per_mode: dict[str, list[bool]] = {"solo": [], "shared": []}
    for shared, mode in ((False, "solo"), (True, "shared")):
        for seed in sorted({r["seed"] for r in energy}):
            e = {r["x"]: r["y"] for r in energy if r["shared"] == shared and r["seed"] == seed}
            a = {r["x"]: r["y"] for r in accuracy if r["shared"] == shared and r["seed"] == seed}
            if len(e) == 3 and len(a) == 3:
                same = _best(e, False) == _best(a, True)
                per_mode[mode].append(same)
                agree, cases = agree + same, cases + 1
    if cases == 0:
        return _missing("no seed has all three levels with both energy and accuracy")
    test = stats.binomtest(agree, cases, 1 / 3, alternative="two-sided")
    return {"estimate": agree / cases, "ci95": clopper_pearson(agree, cases), "p": float(test.pvalue),
            "n_seeds_x_modes": cases, "agree_solo": sum(per_mode["solo"]), "of_solo": len(per_mode["solo"]),
            "agree_shared": sum(per_mode["shared"]), "of_shared": len(per_mode["shared"])}


def utilisation_sum(rows: list[dict[str, Any]], pair: str) -> Optional[float]:
    """A's and B's GPU utilisation alone at their defaults (means over seeds), added: the
    predecessor's measure of how much two jobs compete for the card's time."""
    b_model = varied_model(rows, pair)
    a_model = next((r["a_model"] for r in rows if r["pair"] == pair and r["mode"] == "concurrent"), None)
    parts = []
    for model in (a_model, b_model):
        found = [r["gpu_util"] for r in rows if r["pair"] == pair and r["mode"] == "solo" and r["model"] == model
                 and r["variant"] in ("default", "bg_default") and r["gpu_util"] is not None]
        if not found:
            return None
        parts.append(sum(found) / len(found))
    return sum(parts)


def pair_type(util_sum: Optional[float]) -> Optional[str]:
    """Complementary where the two jobs' solo utilisations fit in the card's time together, else competing."""
    if util_sum is None:
        return None
    return "complementary" if util_sum <= 100.0 else "competing"


def _b_faster_as_a_whole(shared: list[dict[str, Any]]) -> bool:
    slowdowns = [r["slowdown"] for r in shared if r["slowdown"] is not None]
    return any(s < 1 for s in slowdowns) and past_the_bound(slowdowns, 1.0, above=False) is not None


def by_pair_type(rows: list[dict[str, Any]], types: dict[str, Optional[str]]) -> dict[str, Any]:
    """The design's comparisons by pair type, over every counted shared run of its pairs: B's
    concurrent overhead (slowdown - 1), the interference on B's accuracy (|shared - alone| / alone, the
    same seed and level) and the card's energy over serial, each a mean with its t interval. A pair
    whose runs read B faster beside A than alone as a whole (``past_the_bound``) is left out of the
    overhead whole; one whose single runs cross 1 around a mean that holds it (B's whole runs vary
    between starts by more than sharing moves them: hp01's by 9 %) counts every run, their spread in
    the interval: leaving out only the runs below 1 would bias the mean."""
    out: dict[str, Any] = {}
    for kind in sorted({t for t in types.values() if t}):
        pairs = sorted(p for p, t in types.items() if t == kind)
        shared = [r for r in rows if r["pair"] in pairs and r["mode"] == "concurrent"]
        faster = sorted(pair for pair in pairs if _b_faster_as_a_whole([r for r in shared if r["pair"] == pair]))
        alone = {(r["pair"], r["model"], r["variant"], r["block"], r["seed"]): r["accuracy"]
                 for r in rows if r["mode"] == "solo"}
        interference = []
        for r in shared:
            base = alone.get((r["pair"], r["model"], r["variant"], r["block"], r["seed"]))
            if base and r["accuracy"] is not None:
                interference.append(abs(r["accuracy"] - base) / base)
        overhead = [r["slowdown"] - 1 for r in shared if r["slowdown"] is not None and r["pair"] not in faster]
        figures = {"concurrent_overhead": (overhead, 0.0),
                   "interference": (interference, 0.0),
                   "vs_serial": ([r["vs_serial"] for r in shared if r["vs_serial"]], 1.0)}
        out[kind] = {"pairs": pairs, **{name: t_interval(values, "n_runs", null) if values
                                        else _missing("no counted shared run")
                                        for name, (values, null) in figures.items()}}
        if faster:
            why = (f"left out: {', '.join(faster)} (B ran faster beside A than alone over its runs as a whole, which no "
                   "sharing gives: its solo reference is not B's pace alone; see the README)")
            out[kind]["concurrent_overhead"] = ({**out[kind]["concurrent_overhead"], "left_out": why} if overhead
                                                else _missing(why))
    return out


def pair_summary(rows: list[dict[str, Any]], pair: str) -> dict[str, Any]:
    counted = [r for r in rows if exclusion(r) is None]
    util = utilisation_sum(counted, pair)
    entry: dict[str, Any] = {"varied": varied_model(rows, pair), "a_model": next(
        (r["a_model"] for r in rows if r["pair"] == pair and r["mode"] == "concurrent"), None),
        "metric": next((r["metric"] for r in rows if r["pair"] == pair and r["mode"] == "concurrent"), None),
        "n_runs": sum(r["pair"] == pair for r in counted), "gpu_util_sum_pct": util, "pair_type": pair_type(util),
        "factors": {}}
    for factor in FACTORS:
        data = factor_rows(counted, pair, factor)
        per = {outcome: relative(data, outcome) for outcome in B_OUTCOMES}
        entry["factors"][factor] = {
            "interaction": {outcome: interaction(per[outcome]) if per[outcome] else _missing(_no_data(outcome))
                            for outcome in B_OUTCOMES},
            "best_value": {outcome: best_value(per[outcome], outcome == "accuracy") if per[outcome]
                           else _missing(_no_data(outcome)) for outcome in B_OUTCOMES},
            "a_beside_b": {outcome: a_beside_b(data, outcome) for outcome in SHARED_OUTCOMES},
            "energy_accuracy_agree": energy_accuracy_agreement(per["energy"], per["accuracy"]),
            "levels": _levels(per),
        }
    return entry


def _no_data(outcome: str) -> str:
    if outcome in RELATIVE:
        return "no counted run recorded it, or no solo default run to compare with (GPU energy is measured on a GPU only)"
    return "no counted run recorded it"


def _levels(per: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each outcome's mean and seed spread per level and mode: what the plots draw."""
    out: dict[str, Any] = {}
    for outcome, data in per.items():
        cells: dict[str, Any] = {}
        for r in data:
            key = f"{'shared' if r['shared'] else 'solo'} x={r['x']:g}"
            cells.setdefault(key, []).append(r["y"])
        out[outcome] = {key: {"mean": sum(v) / len(v), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else None,
                              "n": len(v)} for key, v in sorted(cells.items())}
    return out


def cpu_energy_status(rows: list[dict[str, Any]]) -> dict[str, Any]:
    measured = [r for r in rows if r["cpu_energy"] is not None]
    notes = sorted({r["cpu_note"] for r in rows if r["cpu_energy"] is None and r["cpu_note"]})
    return {"runs_measured": len(measured), "runs": len(rows), "why_not": notes or None}


def collate(paths: Sequence[Path]) -> dict[str, Any]:
    return summarize_rows(observations(paths))


def summarize_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    pairs = sorted({r["pair"] for r in rows})
    excluded = [{"case_id": r["case_id"], "why": why} for r in rows if (why := exclusion(r)) is not None]
    counted = [r for r in rows if exclusion(r) is None]
    seeds = sorted({r["seed"] for r in counted if r["seed"] is not None})
    summaries = {pair: pair_summary(rows, pair) for pair in pairs}
    return {"n_runs": len(counted), "n_recorded": len(rows), "seeds": seeds, "excluded": excluded,
            "coverage_min": min((r["coverage"] for r in counted if r["mode"] == "concurrent"), default=None),
            "a_pace_above_1": sorted(r["case_id"] for r in counted if (r["a_pace"] or 0) > 1),
            "b_slowdown_below_1": sorted(r["case_id"] for r in counted
                                         if r["mode"] == "concurrent" and r["slowdown"] is not None and r["slowdown"] < 1),
            "host_drift": host_drift(counted),
            "cpu_energy": cpu_energy_status(rows),
            "pairs": summaries,
            "by_pair_type": by_pair_type(counted, {pair: s["pair_type"] for pair, s in summaries.items()}),
            "model": "per pair and factor: y ~ seed + x + shared + x:shared (x = log10(lr/lr_default) or "
                     "epochs/epochs_default; energies relative to the pair's mean solo default run); A beside B: "
                     "y ~ seed + x over the shared runs; 95 % Student-t intervals, seed as the unit of replication"}


def host_drift(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How far A's pace alone moved between the windows before and after B's run: the host's drift
    over one shared run, which a solo run minutes away cannot see."""
    drifts = [r["a_drift"] for r in rows if r["mode"] == "concurrent" and r["a_drift"] is not None]
    return {"n": len(drifts), "max_abs": max((abs(d) for d in drifts), default=None),
            "median_abs": statistics.median(abs(d) for d in drifts) if drifts else None}


def stats_rows(summary: dict[str, Any]) -> list[tuple]:
    """Every estimate of the summary, one line each, as ``stats.csv`` holds them."""
    out = []
    for pair, entry in summary["pairs"].items():
        for factor, answers in entry["factors"].items():
            for outcome, a in answers["interaction"].items():
                out.append(_stat(pair, "interaction", factor, outcome, "x:shared", a))
                level = a.get("by_level") or {}
                out.append(_stat(pair, "interaction_by_level", factor, outcome, "level:shared (F)",
                                 {**level, "estimate": level.get("f")}))
            for outcome, a in answers["best_value"].items():
                gain = a.get("gain") or {}
                note = a.get("reason") or (f"best alone {level_label(factor, a['best_solo_x'])}, "
                                           f"shared {level_label(factor, a['best_shared_x'])}")
                out.append(_stat(pair, "best_value_moves", factor, outcome, "gain when shared",
                                 {**gain, "reason": note}))
            for outcome, a in answers["a_beside_b"].items():
                out.append(_stat(pair, "a_beside_b", factor, outcome, "slope", a))
            out.append(_stat(pair, "energy_best_is_accuracy_best", factor, "energy,accuracy", "share agreeing",
                             answers["energy_accuracy_agree"]))
    for kind, entry in summary.get("by_pair_type", {}).items():
        for name in ("concurrent_overhead", "interference", "vs_serial"):
            out.append(_stat(",".join(entry["pairs"]), f"by_pair_type:{kind}", "", name, "mean", entry[name]))
    return out


def _stat(pair: str, question: str, factor: str, outcome: str, term: str, a: dict[str, Any]) -> tuple:
    ci = a.get("ci95") or [None, None]
    n = a.get("n_runs") or a.get("n_seeds") or a.get("n_seeds_x_modes")
    return (pair, question, factor, outcome, term, _g(a.get("estimate")), _g(ci[0]), _g(ci[1]), _g(a.get("p")),
            "" if n is None else n, a.get("reason") or "")


def _g(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.6g}"


def _cell(a: dict[str, Any]) -> str:
    if a.get("estimate") is None:
        return f"- ({a.get('reason', 'not estimated')})"
    ci = a.get("ci95")
    text = f"{a['estimate']:+.3f}"
    if ci:
        text += f" [{ci[0]:+.3f}, {ci[1]:+.3f}]"
    if a.get("p") is not None:
        text += f", p={a['p']:.2g}"
    return text


def _drift_sentence(drift: dict[str, Any]) -> str:
    if not drift["n"]:
        return ""
    return (f" A's pace alone moved over a shared run by a median of {100 * drift['median_abs']:.1f} % and at most "
            f"{100 * drift['max_abs']:.1f} % ({drift['n']} runs with windows alone before and after).")


def _faster_sentence(summary: dict[str, Any]) -> str:
    """Runs in which a job read faster beside the other than alone: no sharing gives that, so the
    summary says so where its figures are read, not only in the records' notes."""
    b, a = summary.get("b_slowdown_below_1") or [], summary.get("a_pace_above_1") or []
    if not (a or b):
        return ""
    return (f" In {len(b)} shared run(s) B ran faster beside A than in its solo run (slowdown below 1) and in {len(a)} "
            "A ran faster beside B than alone (progress ratio above 1), which no sharing gives: they are flagged in "
            "the records. A figure is left out where a pair's runs lie past 1 as a whole (the mean's interval); where "
            "the interval holds 1, single runs cross it by their reference's noise and are read with it (the README "
            "says what is known of the cause).")


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# Hyperparameter study: what sharing changes", "",
             f"{summary['n_runs']} counted runs ({summary['n_recorded']} recorded, {len(summary['excluded'])} excluded), "
             f"seeds {summary['seeds']}, least background coverage of a counted shared run "
             f"{_fmt(summary['coverage_min'])}.{_drift_sentence(summary['host_drift'])}{_faster_sentence(summary)}", "",
             "## The slope's change when shared (x:shared, 95 % interval, p)", "",
             "| pair | factor | " + " | ".join(B_OUTCOMES) + " |",
             "|---|---|" + "---|" * len(B_OUTCOMES)]
    for pair, entry in summary["pairs"].items():
        for factor, answers in entry["factors"].items():
            inter = answers["interaction"]
            lines.append(f"| {pair} ({entry['varied']}) | {factor} | " + " | ".join(_cell(inter[o]) for o in B_OUTCOMES) + " |")
    lines += ["", "## Sharing's effect level by level, no straight line assumed (F test of level:shared, p; "
              "accuracy's spread: seed / level / sharing / left over)", "",
              "| pair | factor | " + " | ".join(B_OUTCOMES) + " | accuracy's spread |", "|---|---|" + "---|" * (len(B_OUTCOMES) + 1)]
    for pair, entry in summary["pairs"].items():
        for factor, answers in entry["factors"].items():
            inter = answers["interaction"]
            lines.append(f"| {pair} | {factor} | " + " | ".join(_f_cell(inter[o].get("by_level") or {}) for o in B_OUTCOMES)
                         + f" | {_spread_cell(inter['accuracy'].get('spread_share'))} |")
    lines += ["", "## Does the best value move when shared? (best level alone -> shared, as multiples of B's default; where it moves, "
              "what the shared-best level gains over the solo-best one in the shared runs, per seed)", "",
              "| pair | factor | " + " | ".join(B_OUTCOMES) + " |", "|---|---|" + "---|" * len(B_OUTCOMES)]
    for pair, entry in summary["pairs"].items():
        for factor, answers in entry["factors"].items():
            cells = []
            for outcome in B_OUTCOMES:
                a = answers["best_value"][outcome]
                if "best_solo_x" not in a:
                    cells.append(f"- ({a.get('reason')})")
                    continue
                moved = f"{level_label(factor, a['best_solo_x'])} -> {level_label(factor, a['best_shared_x'])}"
                cells.append(moved + (f": {_cell(a['gain'])}" if a.get("gain") else " (same)"))
            lines.append(f"| {pair} | {factor} | " + " | ".join(cells) + " |")
    lines += ["", "## A beside B: A's figures and the energy against serial, over B's x (shared runs; slope, 95 % interval, p)", "",
              "| pair | factor | " + " | ".join(SHARED_OUTCOMES) + " |", "|---|---|" + "---|" * len(SHARED_OUTCOMES)]
    for pair, entry in summary["pairs"].items():
        for factor, answers in entry["factors"].items():
            lines.append(f"| {pair} (A {entry['a_model']}) | {factor} | "
                         + " | ".join(_with_mean(answers["a_beside_b"][o]) for o in SHARED_OUTCOMES) + " |")
    lines += ["", "## Is the least-energy level the most accurate one? (share of seeds x modes, 95 % interval, "
              "binomial p against 1/3)", "", "| pair | factor | agree | solo | shared |", "|---|---|---|---|---|"]
    for pair, entry in summary["pairs"].items():
        for factor, answers in entry["factors"].items():
            a = answers["energy_accuracy_agree"]
            if a.get("estimate") is None:
                lines.append(f"| {pair} | {factor} | - ({a['reason']}) | | |")
            else:
                lines.append(f"| {pair} | {factor} | {a['estimate']:.2f} [{a['ci95'][0]:.2f}, {a['ci95'][1]:.2f}], "
                             f"p={a['p']:.2g} | {a['agree_solo']}/{a['of_solo']} | {a['agree_shared']}/{a['of_shared']} |")
    lines += ["", "## By pair type (the predecessor's: solo GPU utilisations adding to at most 100 % are "
              "complementary), over the counted shared runs: mean, 95 % interval, p", "",
              "| type | pairs (utilisation sum) | concurrent overhead (B's slowdown - 1; p against 0) | "
              "interference on B's accuracy (p against 0) | card energy over serial (p against 1) |",
              "|---|---|---|---|---|"]
    for kind, entry in summary.get("by_pair_type", {}).items():
        named = ", ".join(f"{p} ({summary['pairs'][p]['gpu_util_sum_pct']:.0f} %)" for p in entry["pairs"])
        overhead = entry["concurrent_overhead"]
        left_out = f" ({overhead['left_out']})" if overhead.get("left_out") else ""
        lines.append(f"| {kind} | {named} | {_cell(overhead)}{left_out} | "
                     f"{_cell_g(entry['interference'])} | {_cell(entry['vs_serial'])} |")
    if summary["excluded"]:
        lines += ["", "## Excluded runs", ""] + [f"- {e['case_id']}: {e['why']}" for e in summary["excluded"]]
    return "\n".join(lines) + "\n"


def _f_cell(a: dict[str, Any]) -> str:
    if a.get("f") is None:
        return f"- ({a.get('reason', 'not estimated')})"
    return f"F({a['df'][0]}, {a['df'][1]}) = {a['f']:.2f}, p={a['p']:.2g}"


def _spread_cell(share: Optional[dict[str, Any]]) -> str:
    if not share:
        return "-"
    parts = " / ".join(_percent(share[k]) for k in ("seed", "level", "sharing", "residual"))
    return parts + ("" if share.get("model") == "levels" else " (straight line)")


def _percent(share: float) -> str:
    value = 100 * share
    return f"{value:.1f} %" if value >= 1 else f"{value:.2g} %"


def _cell_g(a: dict[str, Any]) -> str:
    """A cell for figures far below 0.001, in significant digits."""
    if a.get("estimate") is None:
        return f"- ({a.get('reason', 'not estimated')})"
    ci = a.get("ci95")
    text = f"{a['estimate']:.2g}" + (f" [{ci[0]:.2g}, {ci[1]:.2g}]" if ci else "")
    return text + (f", p={a['p']:.2g}" if a.get("p") is not None else "")


def _with_mean(a: dict[str, Any]) -> str:
    above = f"; {a['runs_above_1']} run(s) above 1, the runs' mean holds 1" if a.get("runs_above_1") else ""
    return _cell(a) + (f"; mean {a['mean']:.3g}" if a.get("mean") is not None else "") + above


def level_label(factor: str, x: float) -> str:
    """A level as the multiple of B's default it is: x0.2, x1, x5 or x0.5, x1, x1.5."""
    multiple = 10 ** x if factor == "learning_rate" else x
    return f"x{multiple:.2g}"


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


def write(folder: Path, root: Path) -> str:
    rows = observations([folder / name for name in FOLDERS if (folder / name).is_dir()])
    summary = summarize_rows(rows)
    text = markdown(summary)
    atomic_write_json(folder / "summary.json", summary)
    atomic_write_text(folder / "summary.md", text)
    atomic_write_csv(folder / "stats.csv", STATS_HEADER, stats_rows(summary))
    plot_interactions(folder, rows)
    plot_heatmap(folder, summary)
    return text


def plot_interactions(folder: Path, observed: list[dict[str, Any]]) -> list[Path]:
    """One figure per pair: each B outcome against each factor, every counted run a point (alone and
    shared apart), the level means joined; from the same rows the summary fits."""
    rows = [r for r in observed if exclusion(r) is None]
    written = []
    for pair in sorted({r["pair"] for r in rows}):
        written.append(_plot_pair(folder / f"interaction-{pair}.png", rows, pair))
    return written


def plot_heatmap(folder: Path, summary: dict[str, Any]) -> Path:
    """The slope's change when shared, for every pair (labelled with its type), factor and outcome, as
    its estimate over its interval's half-width: beyond +-1 the interval leaves out no change."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = list(summary["pairs"])
    columns = [(f, o) for f in FACTORS for o in B_OUTCOMES]
    grid = np.full((len(pairs), len(columns)), np.nan)
    for i, pair in enumerate(pairs):
        for j, (factor, outcome) in enumerate(columns):
            a = summary["pairs"][pair]["factors"][factor]["interaction"][outcome]
            if a.get("estimate") is not None and a["ci95"][1] > a["ci95"][0]:
                grid[i, j] = a["estimate"] / ((a["ci95"][1] - a["ci95"][0]) / 2)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(pairs)))
    colours = plt.get_cmap("coolwarm").copy()
    colours.set_bad("lightgrey")
    image = ax.imshow(np.ma.masked_invalid(np.clip(grid, -3, 3)), cmap=colours, vmin=-3, vmax=3, aspect="auto")
    ax.set_xticks(range(len(columns)), [f"{'lr' if f == 'learning_rate' else f}: {o}" for f, o in columns],
                  rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(pairs)), [f"{p} ({summary['pairs'][p]['pair_type'] or 'type unknown'})" for p in pairs])
    for i in range(len(pairs)):
        for j in range(len(columns)):
            ax.text(j, i, "-" if np.isnan(grid[i, j]) else f"{grid[i, j]:+.1f}", ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label="x:shared / CI half-width")
    ax.set_title("Does sharing change the slope? By pair and its type (grey: not yet estimable)")
    fig.tight_layout()
    path = folder / "heatmap-by-pair-type.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _plot_pair(path: Path, rows: list[dict[str, Any]], pair: str) -> Path:
    import matplotlib.pyplot as plt

    fig = draw_pair(rows, pair)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def draw_pair(rows: list[dict[str, Any]], pair: str) -> Any:
    """A factor with no counted run yet (a block still to be measured) says so in its panels, so
    that an empty axis is never read as a measured zero."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(B_OUTCOMES), len(FACTORS), figsize=(9, 11), squeeze=False)
    for col, factor in enumerate(FACTORS):
        data = factor_rows(rows, pair, factor)
        for row, outcome in enumerate(B_OUTCOMES):
            ax = axes[row][col]
            points = relative(data, outcome)
            if not points:
                ax.text(0.5, 0.5, "no counted run yet", ha="center", va="center", transform=ax.transAxes, color="grey")
                ax.set_xticks([])
                ax.set_yticks([])
            for shared, colour, label in ((False, "tab:blue", "alone"), (True, "tab:red", "shared")):
                mine = [p for p in points if p["shared"] == shared]
                offset = 0.02 if shared else -0.02
                ax.scatter([p["x"] + offset for p in mine], [p["y"] for p in mine], s=14, color=colour, alpha=0.6)
                means = level_means(points, shared)
                ax.plot(list(means), list(means.values()), color=colour, label=label)
            ax.set_xlabel("log10(lr / default)" if factor == "learning_rate" else "epochs / default")
            metric = next((p["metric"] for p in points if p["metric"]), None)
            named = f"accuracy ({metric})" if outcome == "accuracy" and metric else outcome
            ax.set_ylabel(named if outcome not in RELATIVE else f"{outcome} / solo default")
            if row == 0 and col == 0:
                ax.legend(fontsize=8)
    fig.suptitle(f"{pair}: every counted run (points) and the level means (lines)")
    fig.tight_layout()
    return fig
