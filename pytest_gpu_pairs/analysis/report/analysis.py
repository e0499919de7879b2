"""What a study's runs say: concurrency overhead, hyperparameter sensitivity solo vs concurrent,
interference between pairs, the energy/performance trade-off, and VRAM against the budget.

Pure functions over ``load``'s frame. A statistical test runs only where the data allow it
(enough runs, some spread); each one is reported with its name, n, statistic and p, and the
p-values of one report are also given Benjamini-Hochberg adjusted (q), because a study runs
dozens of tests and some fall under 0.05 by chance.

Solo baselines follow the predecessor's sense of "concurrent overhead": a concurrent foreground run is
compared with solo runs of the same model and hyperparameters (the random seed aside: it does not
change the work) from the same campaign (``campaign``: the predecessor's campaigns ran the very
same hyperparameters at very different speeds, e.g. VulBERTa at 9 s per epoch in one and 320 s in
the others, so runs of two campaigns do not compare). Where no solo run has exactly those
hyperparameters but some differ only in epochs, the solo time and energy per epoch are scaled to
the run's epochs (``slowdown_basis`` says which). Our own records carry a measured
``fg_slowdown``; it is used as it is. Ratios are summarised by geometric means and tested on
their logarithms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd
from scipy import stats

from pytest_gpu_pairs.catalog import BUILTINS

MATCH_EXCLUDED = ("seed",)
SENSITIVITY_HPS = ("learning_rate", "epochs")
SENSITIVITY_METRICS = ("gpu_energy_j", "perf_value")
LOG_HPS = frozenset(("learning_rate", "weight_decay", "alpha"))
MIN_REGRESSION = 3


@dataclass
class Analysis:
    runs: pd.DataFrame
    overhead: pd.DataFrame
    sensitivity: dict[str, pd.DataFrame]
    interference: pd.DataFrame
    efficiency: pd.DataFrame
    pareto: pd.DataFrame
    vram: pd.DataFrame
    tests: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def test_row(analysis: str, subject: str, test: str, n: int, statistic: float, p: float, effect: str) -> dict:
    return {"analysis": analysis, "subject": subject, "test": test, "n": int(n), "statistic": statistic,
            "p": p, "effect": effect}


PER_PHASE = ("gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j", "bg_gpu_energy_j", "cpu_energy_j",
             "serial_energy_j")  # an interleaved record's are a phase's (half a second), not a whole run's


def interleaved(runs: pd.DataFrame) -> pd.Series:
    """Rows of the default method: each job measured alone and the pair together in rounds of
    short phases. Their slowdown, efficiency and memory are measured figures; they have no
    foreground run with a duration, and their energies are a phase's."""
    return runs["method"] == "interleaved" if "method" in runs else pd.Series(False, index=runs.index)


def valid_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that count: not a duplicate row, not failed, with a duration (an epoch run or a
    predecessor's) or measured in interleaved rounds; an interleaved row's per-phase energies are
    left out here, so no analysis of whole runs' energy reads them as one."""
    keep = runs["duplicate_of"].isna() & (runs["success"] != False)  # noqa: E712
    valid = runs[keep & (runs["fg_duration_s"].notna() | interleaved(runs))].copy()
    valid.loc[interleaved(valid), [c for c in PER_PHASE if c in valid]] = np.nan
    return valid


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.6g}" if isinstance(value, (int, float)) else str(value)


def _keys(runs: pd.DataFrame, columns: list[str]) -> pd.Series:
    if not columns:
        return pd.Series("", index=runs.index)
    return runs[columns].apply(lambda row: "|".join(_text(v) for v in row), axis=1)


def _hp_columns(runs: pd.DataFrame, without: tuple[str, ...] = ()) -> list[str]:
    return sorted(c for c in runs.columns if c.startswith("hp_") and c[3:] not in MATCH_EXCLUDED + without)


def add_solo_baselines(runs: pd.DataFrame) -> pd.DataFrame:
    """``solo_duration_s``/``solo_gpu_energy_j`` for concurrent runs, ``fg_slowdown`` where the
    record has none, ``energy_ratio`` = gpu_energy_j / solo_gpu_energy_j, ``slowdown_basis``."""
    runs = runs.copy()
    campaign = runs["campaign"].fillna("-").astype(str) + "#"
    runs["_full"] = campaign + _keys(runs, _hp_columns(runs))
    runs["_work"] = campaign + _keys(runs, _hp_columns(runs, ("epochs",)))
    epochs = runs["hp_epochs"] if "hp_epochs" in runs else pd.Series(np.nan, index=runs.index)
    runs["_epochs"] = pd.to_numeric(epochs, errors="coerce")
    solo = runs[runs["mode"] == "solo"].assign(
        _d_pe=lambda f: f["fg_duration_s"] / f["_epochs"], _e_pe=lambda f: f["gpu_energy_j"] / f["_epochs"])
    same = solo.groupby(["fg_model", "_full"]).agg(d=("fg_duration_s", "mean"), e=("gpu_energy_j", "mean"),
                                                   n=("fg_duration_s", "size"))
    scaled = solo[solo["_epochs"] > 0].groupby(["fg_model", "_work"]).agg(
        d=("_d_pe", "mean"), e=("_e_pe", "mean"), n=("_d_pe", "size"))
    for column in ("solo_duration_s", "solo_gpu_energy_j", "solo_n"):
        runs[column] = np.nan
    runs["slowdown_basis"] = None
    for index, row in runs[(runs["mode"] == "concurrent") & ~interleaved(runs)].iterrows():
        _match_baseline(runs, index, row, same, scaled)
    measured = runs["fg_slowdown"].notna() & (runs["mode"] == "concurrent")
    runs.loc[measured, "slowdown_basis"] = "measured"
    fill = runs["fg_slowdown"].isna() & runs["solo_duration_s"].notna()
    runs.loc[fill, "fg_slowdown"] = runs.loc[fill, "fg_duration_s"] / runs.loc[fill, "solo_duration_s"]
    runs["energy_ratio"] = runs["gpu_energy_j"] / runs["solo_gpu_energy_j"]
    return runs.drop(columns=["_full", "_work", "_epochs"])


def _match_baseline(runs, index, row, same, scaled) -> None:
    key = (row["fg_model"], row["_full"])
    if key in same.index:
        found = same.loc[key]
        runs.loc[index, ["solo_duration_s", "solo_gpu_energy_j", "solo_n"]] = [found["d"], found["e"], found["n"]]
        runs.at[index, "slowdown_basis"] = "same_hparams"
        return
    key = (row["fg_model"], row["_work"])
    if key in scaled.index and row["_epochs"] > 0:
        found = scaled.loc[key]
        runs.loc[index, ["solo_duration_s", "solo_gpu_energy_j", "solo_n"]] = [
            found["d"] * row["_epochs"], found["e"] * row["_epochs"], found["n"]]
        runs.at[index, "slowdown_basis"] = "per_epoch"


def _log_ratio_test(values: pd.Series, analysis: str, subject: str, what: str) -> Optional[dict]:
    logs = np.log(values[values > 0].astype(float))
    if len(logs) < 2 or float(np.std(logs)) == 0.0:
        return None
    result = stats.ttest_1samp(logs, 0.0)
    return test_row(analysis, subject, f"one-sample t-test of log({what}) against 0 (ratio 1)", len(logs),
                    float(result.statistic), float(result.pvalue), f"geometric mean {what} {math.exp(logs.mean()):.3f}")


def _geomean(values: pd.Series) -> float:
    values = values[values > 0]
    return float(np.exp(np.log(values.astype(float)).mean())) if len(values) else float("nan")


def overhead(runs: pd.DataFrame, tests: list[dict]) -> pd.DataFrame:
    """Per foreground model: how much slower and how much more card energy a concurrent run
    takes than the same job solo."""
    rows = []
    for model, group in runs.groupby("fg_model"):
        concurrent = group[group["mode"] == "concurrent"]
        slow, energy = concurrent["fg_slowdown"].dropna(), concurrent["energy_ratio"].dropna()
        rows.append({"fg_model": model, "solo runs": int((group["mode"] == "solo").sum()),
                     "concurrent runs": len(concurrent), "n slowdown": len(slow),
                     "slowdown (geo. mean)": _geomean(slow), "slowdown median": slow.median(),
                     "n energy": len(energy), "energy ratio (geo. mean)": _geomean(energy),
                     "bases": ", ".join(f"{b} {n}" for b, n in concurrent["slowdown_basis"].value_counts().items()),
                     "concurrent_overhead (record)": concurrent["concurrent_overhead"].mean()})
        for values, what in ((slow, "slowdown"), (energy, "energy ratio")):
            found = _log_ratio_test(values, "overhead", str(model), what)
            if found:
                tests.append(found)
    table = pd.DataFrame(rows)
    return table.dropna(axis=1, how="all") if "concurrent_overhead (record)" in table else table


def _model_defaults(model: str, rows: pd.DataFrame, columns: list[str]) -> dict[str, str]:
    """The baseline a one-at-a-time variation is read against: a hyperparameter study's own
    default variant where the runs hold one (its bounds are factors of that baseline, e.g. 2
    epochs where the built-in trains 200), else the built-in's defaults, else the commonest value."""
    study = _study_baseline(rows)
    known = BUILTINS[model].defaults() if model in BUILTINS else {}
    defaults = {}
    for column in columns:
        name = column[3:]
        if column in study:
            defaults[column] = study[column]
        elif name in known:
            defaults[column] = _text(known[name])
        else:
            common = rows[column].dropna()
            defaults[column] = _text(common.mode().iloc[0]) if len(common) else "-"
    return defaults


def _study_baseline(rows: pd.DataFrame) -> dict[str, str]:
    """Each hyperparameter of the hp_study runs of the default variant, where they agree on it."""
    if "variant" not in rows or "experiment_source" not in rows:
        return {}
    baseline = rows[(rows["experiment_source"] == "hp_study") & (rows["variant"] == "default")]
    values = {}
    for column in _hp_columns(baseline):
        seen = {_text(v) for v in baseline[column].dropna()}
        if len(seen) == 1:
            values[column] = seen.pop()
    return values


def one_at_a_time(rows: pd.DataFrame, model: str, hp: str) -> pd.DataFrame:
    """Runs of ``model`` in which only ``hp`` (and the random seed) may differ from the defaults:
    the predecessor's mutation runs change one hyperparameter at a time, so this isolates its effect."""
    others = _hp_columns(rows, (hp,))
    defaults = _model_defaults(model, rows, others)
    same = np.ones(len(rows), dtype=bool)
    for column in others:
        same &= np.array([_text(v) in (defaults[column], "-") for v in rows[column]])
    return rows[same]


def _x(values: pd.Series, hp: str) -> np.ndarray:
    x = pd.to_numeric(values, errors="coerce").astype(float).to_numpy()
    return np.log10(x, where=x > 0, out=np.full_like(x, np.nan)) if hp in LOG_HPS else x


def _fit(x: np.ndarray, y: np.ndarray) -> Optional[Any]:
    if len(x) < MIN_REGRESSION or len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
        return None
    return stats.linregress(x, y)


PERFECT_FIT = 1e-9  # residual sum of squares below this share of the total: an exact fit


def interaction_test(x: np.ndarray, y: np.ndarray, concurrent: np.ndarray) -> Optional[tuple[float, float, int]]:
    """ANCOVA F-test of a mode x hyperparameter interaction: does sharing change the slope?

    Compares y ~ 1 + x + mode + x*mode with y ~ 1 + x + mode by residual sums of squares;
    returns (F, p, n) with F on (1, n - 4) degrees of freedom, or None when the data cannot say.
    """
    n = len(y)
    if n < 6 or min(concurrent.sum(), (~concurrent).sum()) < MIN_REGRESSION:
        return None
    if len(np.unique(x[concurrent])) < 2 or len(np.unique(x[~concurrent])) < 2:
        return None
    m = concurrent.astype(float)
    reduced = np.column_stack([np.ones(n), x, m])
    full = np.column_stack([reduced, x * m])
    rss = [float(np.sum((y - design @ np.linalg.lstsq(design, y, rcond=None)[0]) ** 2)) for design in (reduced, full)]
    spread = float(np.sum((y - y.mean()) ** 2))
    if spread <= PERFECT_FIT * float(np.sum(y ** 2)) or rss[1] <= PERFECT_FIT * spread:
        return None  # y is constant or fitted exactly: F would be rounding noise (its sign even depends on the BLAS)
    f_value = max(0.0, rss[0] - rss[1]) / (rss[1] / (n - 4))
    return f_value, float(stats.f.sf(f_value, 1, n - 4)), n


@dataclass(frozen=True)
class Interaction:
    """How much sharing changes a slope: the concurrent slope of y over x minus the solo one, with
    its 95 % interval and the two-sided p of "no change"."""

    estimate: float
    low: float
    high: float
    p: float
    n: int
    se: float

    def as_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "ci95": [self.low, self.high], "p": self.p, "n_runs": self.n,
                "se": self.se}


def interaction_estimate(x: np.ndarray, y: np.ndarray, concurrent: np.ndarray) -> Optional[Interaction]:
    """The x-by-mode coefficient of y ~ 1 + x + mode + x*mode by least squares, with a Student-t
    interval on its standard error (n - 4 degrees of freedom); None where the data cannot say
    (fewer than two x values in a mode, or no residual freedom)."""
    n = len(y)
    if n < 5 or len(np.unique(x[concurrent])) < 2 or len(np.unique(x[~concurrent])) < 2:
        return None
    m = concurrent.astype(float)
    design = np.column_stack([np.ones(n), x, m, x * m])
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < 4:
        return None
    residual = y - design @ coef
    variance = float(residual @ residual) / (n - 4)
    se = math.sqrt(variance * float(np.linalg.inv(design.T @ design)[3, 3]))
    half = float(stats.t.ppf(0.975, n - 4)) * se
    p = float(2 * stats.t.sf(abs(coef[3]) / se, n - 4)) if se > 0 else (1.0 if coef[3] == 0 else 0.0)
    return Interaction(float(coef[3]), float(coef[3] - half), float(coef[3] + half), p, n, se)


def joint_interaction(x: np.ndarray, y: np.ndarray, concurrent: np.ndarray, model: np.ndarray,
                      pair: np.ndarray) -> Optional[Interaction]:
    """One interaction over several pairs fitted together: each varied model its own solo line,
    each pair its own concurrent offset, one common change of slope when shared. Pairs that vary
    the same model share its solo runs, which enter once, so their estimates are not counted as
    independent (an inverse-variance pool of the per-pair fits would be)."""
    columns = []
    for name in np.unique(model):
        mine = (model == name).astype(float)
        columns += [mine, mine * x]
    columns += [(concurrent & (pair == name)).astype(float) for name in np.unique(pair[concurrent])]
    columns.append(x * concurrent)
    design = np.column_stack(columns)
    n, k = design.shape
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < k or n <= k:
        return None
    residual = y - design @ coef
    se = math.sqrt(float(residual @ residual) / (n - k) * float(np.linalg.inv(design.T @ design)[-1, -1]))
    half = float(stats.t.ppf(0.975, n - k)) * se
    p = float(2 * stats.t.sf(abs(coef[-1]) / se, n - k)) if se > 0 else (1.0 if coef[-1] == 0 else 0.0)
    return Interaction(float(coef[-1]), float(coef[-1] - half), float(coef[-1] + half), p, n, se)


def sensitivity_subset(rows: pd.DataFrame, model: str, hp: str, metric: str) -> tuple[pd.DataFrame, Optional[str]]:
    """The runs of one model that say how ``metric`` depends on ``hp``: those varying ``hp`` alone,
    from the one campaign with the most such runs in both modes (campaigns do not compare)."""
    column = f"hp_{hp}"
    data = one_at_a_time(rows, model, hp)
    data = data[pd.to_numeric(data[column], errors="coerce").notna() & data[metric].notna()]
    if data.empty:
        return data, None
    campaigns = data["campaign"].fillna("-")

    def weight(name: str) -> tuple[int, int]:
        part = data[campaigns == name]
        per_mode = [int((part["mode"] == m).sum()) for m in ("solo", "concurrent")]
        return min(per_mode), sum(per_mode)
    best = max(campaigns.unique(), key=weight)
    return data[campaigns == best], best


def sensitivity(runs: pd.DataFrame, hp: str, tests: list[dict]) -> pd.DataFrame:
    """Per model, mode and metric: the least-squares slope of the metric over ``hp`` (log10 for
    rates), with Pearson r, p and n, and the interaction test between the modes."""
    column, rows_out = f"hp_{hp}", []
    if column not in runs:
        return pd.DataFrame()
    for model, rows in runs.groupby("fg_model"):
        for metric in SENSITIVITY_METRICS:
            data, campaign = sensitivity_subset(rows, str(model), hp, metric)
            x, y = _x(data[column], hp), data[metric].astype(float).to_numpy()
            ok = ~np.isnan(x)
            x, y, concurrent = x[ok], y[ok], (data["mode"] == "concurrent").to_numpy()[ok]
            rows_out += _slopes(str(model), hp, metric, data, x, y, concurrent, tests, campaign)
            found = interaction_test(x, y, concurrent)
            if found:
                f_value, p, n = found
                tests.append(test_row("sensitivity", f"{model} {_metric_label(metric, data)} ~ {hp}",
                                      f"ANCOVA F-test, mode x {_x_label(hp)} interaction, F(1, {n - 4})",
                                      n, f_value, p, f"does sharing change the slope? campaign {campaign}"))
    return pd.DataFrame(rows_out)


def _metric_label(metric: str, data: pd.DataFrame) -> str:
    if metric == "perf_value":
        names = data["perf_name"].dropna().unique()
        return str(names[0]) if len(names) else "perf"
    return metric


def _x_label(hp: str) -> str:
    return f"log10({hp})" if hp in LOG_HPS else hp


def _slopes(model, hp, metric, data, x, y, concurrent, tests, campaign) -> list[dict]:
    rows = []
    for mode, mask in (("solo", ~concurrent), ("concurrent", concurrent)):
        fit = _fit(x[mask], y[mask])
        row = {"fg_model": model, "campaign": campaign, "metric": _metric_label(metric, data), "mode": mode,
               "n": int(mask.sum()), "slope per unit of " + _x_label(hp): np.nan, "r": np.nan, "p": np.nan}
        if fit is not None:
            row.update({"slope per unit of " + _x_label(hp): fit.slope, "r": fit.rvalue, "p": fit.pvalue})
            t_value = fit.slope / fit.stderr if fit.stderr > 0 else math.inf
            tests.append(test_row("sensitivity", f"{model} {row['metric']} ~ {hp} ({mode})",
                                  f"linear regression over {_x_label(hp)}, t-test of slope = 0, df {mask.sum() - 2}",
                                  mask.sum(), t_value, fit.pvalue, f"slope {fit.slope:.4g}, r={fit.rvalue:.2f}"))
        rows.append(row)
    return rows


def interference(runs: pd.DataFrame, tests: list[dict]) -> pd.DataFrame:
    """Slowdown per (foreground, background) pair; per foreground, a one-way ANOVA of
    log(slowdown) across its backgrounds says whether the choice of partner matters. A background
    shared through MPS counts as another partner than the same one time-sliced."""
    concurrent = runs[(runs["mode"] == "concurrent") & runs["bg_model"].notna() & (runs["fg_slowdown"] > 0)]
    shared = concurrent["sharing"].fillna("timeslice")
    concurrent = concurrent.assign(bg_model=concurrent["bg_model"].where(
        shared == "timeslice", concurrent["bg_model"] + " [" + shared + "]"))
    rows = [{"fg_model": fg, "bg_model": bg, "n": len(g), "slowdown (geo. mean)": _geomean(g["fg_slowdown"]),
             "min": g["fg_slowdown"].min(), "max": g["fg_slowdown"].max()}
            for (fg, bg), g in concurrent.groupby(["fg_model", "bg_model"])]
    for model, group in concurrent.groupby("fg_model"):
        groups = [np.log(g["fg_slowdown"].to_numpy(dtype=float)) for _, g in group.groupby("bg_model") if len(g) >= 2]
        if len(groups) >= 2 and any(np.std(g) > 0 for g in groups):
            result = stats.f_oneway(*groups)
            total = sum(map(len, groups))
            tests.append(test_row("interference", f"{model}: slowdown across {len(groups)} backgrounds",
                                  f"one-way ANOVA of log(slowdown), F({len(groups) - 1}, {total - len(groups)})",
                                  total, float(result.statistic), float(result.pvalue),
                                  f"group sizes {'+'.join(str(len(g)) for g in groups)}"))
    return pd.DataFrame(rows, columns=["fg_model", "bg_model", "n", "slowdown (geo. mean)", "min", "max"])


def efficiency(runs: pd.DataFrame) -> pd.DataFrame:
    """Per pair: concurrency efficiency where measured; otherwise 1/slowdown (geometric mean), its
    lower bound (the background's progress, the other term, was not recorded)."""
    concurrent = runs[(runs["mode"] == "concurrent") & runs["pair"].notna()]
    rows = []
    for pair, group in concurrent.groupby("pair"):
        eff, slow = group["concurrency_efficiency"].dropna(), group["fg_slowdown"].dropna()
        rows.append({"pair": pair, "runs": len(group), "n efficiency": len(eff), "efficiency mean": eff.mean(),
                     "efficiency sd": eff.std(), "n slowdown": len(slow), "slowdown (geo. mean)": _geomean(slow),
                     "lower bound 1/slowdown": 1 / _geomean(slow) if len(slow) else np.nan,
                     "min_efficiency": group["min_efficiency"].max()})
    return pd.DataFrame(rows)


def higher_is_better(flag: object) -> bool:
    """A column's direction from its ``perf_higher_is_better`` cell: only a false one (Python's or
    numpy's, which a DataFrame hands back and which is not ``False``) means lower is better; an
    unknown direction (None, NaN) is taken as higher."""
    return not (isinstance(flag, (bool, np.bool_)) and not flag)


def pareto_mask(cost: np.ndarray, value: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """True for points no other point beats: at most the cost and at least the value, one strictly.
    Points with a missing coordinate are never on the front."""
    cost = np.asarray(cost, dtype=float)
    value = np.asarray(value, dtype=float) * (1.0 if higher_is_better else -1.0)
    valid = ~(np.isnan(cost) | np.isnan(value))
    front = valid.copy()
    for i in np.flatnonzero(valid):
        others = valid & (cost <= cost[i]) & (value >= value[i]) & ((cost < cost[i]) | (value > value[i]))
        front[i] = not others.any()
    return front


def pareto(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Per model: the runs on the energy/performance front (least card energy, best primary metric)."""
    on_front = pd.Series(False, index=runs.index)
    rows = []
    for model, group in runs.groupby("fg_model"):
        data = group[group["gpu_energy_j"].notna() & group["perf_value"].notna()]
        if data.empty:
            continue
        higher = higher_is_better(data["perf_higher_is_better"].iloc[0])
        mask = pareto_mask(data["gpu_energy_j"].to_numpy(), data["perf_value"].to_numpy(), higher)
        on_front.loc[data.index] = mask
        front = data[mask]
        rows.append({"fg_model": model, "metric": data["perf_name"].iloc[0], "runs": len(data),
                     "on front": int(mask.sum()), "front: solo": int((front["mode"] == "solo").sum()),
                     "front: concurrent": int((front["mode"] == "concurrent").sum())})
    return pd.DataFrame(rows), on_front


def vram(runs: pd.DataFrame) -> pd.DataFrame:
    data = runs[runs["peak_vram_mb"].notna()]
    label = data["pair"].fillna(data["fg_model"] + " solo")
    table = data.assign(label=label).groupby("label").agg(
        n=("peak_vram_mb", "size"), peak_vram_mb=("peak_vram_mb", "max"), fg_peak_vram_mb=("fg_peak_vram_mb", "max"),
        bg_peak_vram_mb=("bg_peak_vram_mb", "max"), vram_budget_mb=("vram_budget_mb", "min")).reset_index()
    table["fits"] = table["peak_vram_mb"] <= table["vram_budget_mb"]
    return table


def _adjust(tests: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(tests, columns=["analysis", "subject", "test", "n", "statistic", "p", "effect"])
    if len(frame):
        frame["q (BH)"] = stats.false_discovery_control(frame["p"].to_numpy())
    return frame


def analyse(runs: pd.DataFrame) -> Analysis:
    valid = add_solo_baselines(valid_runs(runs))
    valid["pareto_front"] = False
    tests: list[dict] = []
    over = overhead(valid, tests)
    sens = {hp: sensitivity(valid, hp, tests) for hp in SENSITIVITY_HPS}
    inter = interference(valid, tests)
    front_table, on_front = pareto(valid)
    valid["pareto_front"] = on_front
    notes = _notes(runs, valid)
    return Analysis(valid, over, sens, inter, efficiency(valid), front_table, vram(valid), _adjust(tests), notes)


def _notes(runs: pd.DataFrame, valid: pd.DataFrame) -> list[str]:
    notes = []
    duplicates = int(runs["duplicate_of"].notna().sum())
    if duplicates:
        notes.append(f"{duplicates} input rows repeat another row (same model, mode, duration and energy) and were "
                     "counted once")
    failed = int((runs["success"] == False).sum())  # noqa: E712
    if failed:
        notes.append(f"{failed} failed runs are listed in summary.csv and left out of the analysis")
    rounds = int(interleaved(valid).sum())
    if rounds:
        notes.append(f"{rounds} run(s) measured in interleaved rounds: their slowdown, efficiency and peak VRAM are "
                     "analysed; their energies are a phase's, not a whole run's, and are left out of the energy "
                     "analyses (see each record's energy_saved_vs_serial and energy per step)")
    concurrent = valid[valid["mode"] == "concurrent"]
    unknown_bg = int(concurrent["bg_model"].isna().sum())
    if unknown_bg:
        notes.append(f"{unknown_bg} of {len(concurrent)} concurrent runs do not name their background: they count "
                     "in the solo-vs-concurrent comparisons but not per pair")
    unmatched = int((concurrent["fg_slowdown"].isna()).sum())
    if unmatched:
        notes.append(f"{unmatched} of {len(concurrent)} concurrent runs have no solo run of the same model and "
                     "hyperparameters (nor one differing only in epochs): no slowdown for them")
    return notes
