"""The report's figures, drawn with matplotlib's Agg canvas (no display, no pyplot state).

Each figure function takes the ``Analysis`` and returns a figure and its caption, or raises
``NoData`` with the reason it cannot be drawn from these inputs; the report shows that reason
where the figure would be. Nothing is drawn from numbers the inputs do not hold.
"""
from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from pytest_gpu_pairs.analysis.report.analysis import (
    LOG_HPS,
    SENSITIVITY_HPS,
    Analysis,
    higher_is_better,
    sensitivity_subset,
)
from pytest_gpu_pairs.record.keys import axis_label, label, meaning
from pytest_gpu_pairs.record.store import atomic_write_bytes

DPI = 80
SOLO, CONCURRENT, SHARE = "#1f77b4", "#ff7f0e", "#2ca02c"
GRID_COLUMNS = 4


class NoData(Exception):
    """This input cannot give the figure; the message says why."""


@dataclass
class Plot:
    name: str
    title: str
    caption: str = ""
    path: Optional[Path] = None
    skipped: Optional[str] = None


def _log_x(ax) -> None:
    """Log x axis without minor tick labels (they collide on short ranges)."""
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())


def _legend_below(ax) -> None:
    """Below the x label, whatever the figure's height (bars of many pairs leave no free corner)."""
    height_in = ax.get_position().height * ax.figure.get_figheight()
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.6 / height_in), ncol=2, frameon=False)


def _grid(count: int, cell=(3.2, 2.6)) -> tuple[Figure, list]:
    columns = min(GRID_COLUMNS, count)
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(cell[0] * columns, cell[1] * rows + 0.6), dpi=DPI)
    axes = [figure.add_subplot(rows, columns, i + 1) for i in range(count)]
    return figure, axes


def efficiency_figure(a: Analysis) -> tuple[Figure, str]:
    table = a.efficiency
    if table.empty:
        raise NoData("no concurrent run names both of its jobs")
    measured = table["n efficiency"] > 0
    value = table["efficiency mean"].where(measured, table["lower bound 1/slowdown"])
    table = table.assign(value=value).dropna(subset=["value"]).sort_values("value")
    if table.empty:
        raise NoData("no pair has a concurrency efficiency or a slowdown against a solo baseline")
    measured = table["n efficiency"] > 0
    figure = Figure(figsize=(9, 0.35 * len(table) + 1.6), dpi=DPI)
    ax = figure.add_subplot()
    y = np.arange(len(table))
    if measured.any():
        ax.barh(y[measured], table["value"][measured], xerr=table["efficiency sd"][measured].fillna(0),
                color=CONCURRENT, label=f"{label('concurrency_efficiency')} (mean ± sd)")
    if (~measured).any():
        ax.barh(y[~measured], table["value"][~measured], color="none", edgecolor=CONCURRENT, hatch="//",
                label="lower bound 1/fg_slowdown, geometric mean (background progress not recorded)")
    for yi, (_, row) in zip(y, table.iterrows()):
        n = row["n efficiency"] if row["n efficiency"] > 0 else row["n slowdown"]
        ax.text(row["value"], float(yi), f" {row['value']:.2f} (n={int(n)})", va="center", fontsize=8, clip_on=True)
    limit = table["min_efficiency"].dropna()
    if len(limit):
        ax.plot(limit, y[table["min_efficiency"].notna()], "r|", markersize=16, markeredgewidth=2,
                label=label("min_efficiency"))
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.axvline(2.0, color="grey", linestyle=":", linewidth=1)
    ax.set_yticks(y, table["pair"], fontsize=8)
    ax.set_xlabel("1.0 = serial would be as fast, 2.0 = sharing is free")
    ax.set_xlim(0, max(2.2, float(table["value"].max()) * 1.25))
    _legend_below(ax)
    ax.set_title("Concurrency efficiency per pair (foreground+background)")
    caption = (f"concurrency_efficiency: {meaning('concurrency_efficiency')} (normalised throughput of the pair). "
               "Where the background's progress was not recorded (the predecessor's runs), the hatched bar is 1/fg_slowdown,"
               " a lower bound of it.")
    return figure, caption


def slowdown_heatmap(a: Analysis) -> tuple[Figure, str]:
    table = a.interference
    if table.empty:
        raise NoData("no concurrent run has both a named background and a slowdown")
    mean = table.pivot(index="fg_model", columns="bg_model", values="slowdown (geo. mean)")
    count = table.pivot(index="fg_model", columns="bg_model", values="n")
    figure = Figure(figsize=(1.1 * mean.shape[1] + 3, 0.55 * mean.shape[0] + 2), dpi=DPI)
    ax = figure.add_subplot()
    values = mean.to_numpy(dtype=float)
    low, high = np.nanmin(values), np.nanmax(values)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(low, 0.99), vmax=max(high, 1.01))
    image = ax.imshow(np.ma.masked_invalid(values), cmap="coolwarm", norm=norm, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(j, i, f"{v:.2f}\nn={int(count.iat[i, j])}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(mean.shape[1]), mean.columns, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(mean.shape[0]), mean.index, fontsize=8)
    ax.set_xlabel("background")
    ax.set_ylabel("foreground")
    figure.colorbar(image, ax=ax, label=f"{label('fg_slowdown')} (geometric mean)")
    ax.set_title("Foreground slowdown by background")
    return figure, (f"Geometric mean of fg_slowdown ({meaning('fg_slowdown')}) per pair, with the number of"
                    " runs; blue: the foreground ran faster than its solo baseline.")


def _geomean(values: pd.Series) -> float:
    values = values[values > 0]
    return float(np.exp(np.log(values.astype(float)).mean())) if len(values) else float("nan")


def energy_figure(a: Analysis) -> tuple[Figure, str]:
    concurrent = a.runs[a.runs["mode"] == "concurrent"]
    matched = concurrent[concurrent["energy_ratio"].notna()]
    share = concurrent[concurrent["fg_gpu_energy_j"].notna()]
    models = sorted(set(matched["fg_model"]) | set(share["fg_model"]), key=str)  # a name from disk may be any JSON value
    if not models:
        raise NoData("no concurrent run has a solo baseline with card energy, nor an attributed foreground energy")
    figure = Figure(figsize=(max(6.0, 0.9 * len(models) + 2), 4.4), dpi=DPI)
    ax = figure.add_subplot()
    x, width = np.arange(len(models)), 0.27
    series = ((-width, "solo, same hyperparameters and campaign", SOLO, "solo_gpu_energy_j", matched),
              (0.0, "concurrent, whole card (background included)", CONCURRENT, "gpu_energy_j", matched),
              (width, "concurrent, foreground's share above idle", SHARE, "fg_gpu_energy_j", share))
    for offset, legend, color, column, data in series:
        if data.empty:
            continue
        means = [_geomean(data.loc[data["fg_model"] == m, column]) / 1000 for m in models]
        ax.bar(x + offset, means, width, color=color, alpha=0.85, label=legend)
        for xi, model in zip(x + offset, models):
            values = data.loc[data["fg_model"] == model, column].dropna() / 1000
            ax.scatter(np.full(len(values), xi), values, s=6, color="black", alpha=0.5, zorder=3)
    counts = [int((matched["fg_model"] == m).sum() or (share["fg_model"] == m).sum()) for m in models]
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{m}\nn={n}" for m, n in zip(models, counts)], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{label('gpu_energy_j')} per foreground job (kJ)")
    ax.legend(fontsize=8)
    ax.set_title("Energy per job: solo vs concurrent")
    caption = ("Bars: geometric means of the card energy during the foreground job; dots: single runs. Concurrent "
               "runs are set against the solo runs of the same model, hyperparameters and campaign (n = concurrent "
               "runs with such a baseline). The concurrent card figure includes the background's work; the green "
               "bar is the foreground's attributed share above idle where it was measured.")
    return figure, caption


def _sensitivity_data(a: Analysis, hp: str, metric: str) -> list[tuple[str, pd.DataFrame, str, Optional[str]]]:
    panels: list[tuple[str, pd.DataFrame, str, Optional[str]]] = []
    if f"hp_{hp}" not in a.runs:
        return panels
    for model, rows in a.runs.groupby("fg_model"):
        data, campaign = sensitivity_subset(rows, str(model), hp, metric)
        if len(data) >= 3 and pd.to_numeric(data[f"hp_{hp}"]).nunique() >= 2:
            name = metric if metric != "perf_value" else str(data["perf_name"].dropna().iloc[0])
            panels.append((str(model), data, name, campaign))
    return panels


def _interaction_p(a: Analysis, model: str, metric: str, hp: str) -> str:
    tests = a.tests
    if tests.empty:
        return ""
    found = tests[(tests["subject"] == f"{model} {metric} ~ {hp}") & tests["test"].str.startswith("ANCOVA")]
    return f"\ninteraction p={found['p'].iloc[0]:.2g} (n={int(found['n'].iloc[0])})" if len(found) else ""


def sensitivity_figure(hp: str, metric: str) -> Callable[[Analysis], tuple[Figure, str]]:
    def draw(a: Analysis) -> tuple[Figure, str]:
        panels = _sensitivity_data(a, hp, metric)
        if not panels:
            raise NoData(f"no model has 3 or more runs that vary {hp} alone with {metric} recorded")
        figure, axes = _grid(len(panels))
        for ax, (model, data, name, campaign) in zip(axes, panels):
            for mode, color, marker in (("solo", SOLO, "o"), ("concurrent", CONCURRENT, "^")):
                part = data[data["mode"] == mode]
                x = pd.to_numeric(part[f"hp_{hp}"]).to_numpy(dtype=float)
                y = part[metric].to_numpy(dtype=float) / (1000 if metric == "gpu_energy_j" else 1)
                ax.scatter(x, y, s=14, color=color, marker=marker, label=f"{mode} (n={len(part)})")
                _fit_line(ax, x, y, hp, color)
            if hp in LOG_HPS:
                _log_x(ax)
            source = "" if campaign in (None, "-") else f" [{campaign}]"
            ax.set_title(f"{model}{source}{_interaction_p(a, model, name, hp)}", fontsize=8)
            ax.set_xlabel(hp, fontsize=8)
            ax.set_ylabel(axis_label("gpu_energy_j", "kJ") if metric == "gpu_energy_j" else name, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
        what = "card energy" if metric == "gpu_energy_j" else "the performance metric"
        figure.suptitle(f"Sensitivity of {what} to {hp}: solo vs concurrent", fontsize=10)
        figure.tight_layout()
        caption = (f"Runs that vary {hp} alone (the others at their defaults; the random seed may differ), from the "
                   "campaign with the most such runs (in brackets where the input names campaigns), with a "
                   f"least-squares line per mode{' over log10(' + hp + ')' if hp in LOG_HPS else ''}. The panel title "
                   "gives the ANCOVA p of the mode x hyperparameter interaction: a small p says sharing changes the "
                   "effect.")
        return figure, caption
    return draw


def _fit_line(ax, x: np.ndarray, y: np.ndarray, hp: str, color: str) -> None:
    if len(x) < 3 or len(np.unique(x)) < 2:
        return
    u = np.log10(x) if hp in LOG_HPS else x
    slope, intercept = np.polyfit(u, y, 1)
    grid = np.linspace(u.min(), u.max(), 20)
    ax.plot(10 ** grid if hp in LOG_HPS else grid, slope * grid + intercept, color=color, linewidth=1)


def pareto_figure(a: Analysis) -> tuple[Figure, str]:
    data = a.runs[a.runs["gpu_energy_j"].notna() & a.runs["perf_value"].notna()]
    models = [m for m, g in data.groupby("fg_model") if len(g) >= 2]
    if not models:
        raise NoData("no model has two or more runs with both card energy and a performance metric")
    figure, axes = _grid(len(models))
    for ax, model in zip(axes, models):
        group = data[data["fg_model"] == model]
        for mode, color, marker in (("solo", SOLO, "o"), ("concurrent", CONCURRENT, "^")):
            part = group[group["mode"] == mode]
            ax.scatter(part["gpu_energy_j"] / 1000, part["perf_value"], s=12, color=color, marker=marker,
                       alpha=0.7, label=f"{mode} (n={len(part)})")
        front = group[group["pareto_front"]].sort_values("gpu_energy_j")
        ax.step(front["gpu_energy_j"] / 1000, front["perf_value"], where="post", color="black", linewidth=1,
                label=f"Pareto front ({len(front)})")
        _log_x(ax)
        better = "higher" if higher_is_better(group["perf_higher_is_better"].iloc[0]) else "lower"
        ax.set_title(f"{model}", fontsize=8)
        ax.set_xlabel(axis_label("gpu_energy_j", "kJ"), fontsize=8)
        ax.set_ylabel(f"{group['perf_name'].iloc[0]} ({better} is better)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    figure.suptitle("Energy vs performance, with the Pareto front", fontsize=10)
    figure.tight_layout()
    return figure, ("Each run's card energy against its model's performance metric (its primary one unless "
                    "--perf-metric chose another); the black line links the runs no other run beats on both (less "
                    "energy and a better metric).")


def vram_figure(a: Analysis) -> tuple[Figure, str]:
    table = a.vram
    if table.empty:
        raise NoData("no input records a peak VRAM (the predecessor's CSV has no memory column; runs on the CPU have none)")
    table = table.sort_values("peak_vram_mb")
    figure = Figure(figsize=(9, 0.4 * len(table) + 1.6), dpi=DPI)
    ax = figure.add_subplot()
    y = np.arange(len(table))
    split = table["fg_peak_vram_mb"].notna() & table["bg_peak_vram_mb"].notna()
    if split.any():
        ax.barh(y[split], table["fg_peak_vram_mb"][split], color=SOLO, label=label("fg_peak_vram_mb"))
        ax.barh(y[split], table["bg_peak_vram_mb"][split], left=table["fg_peak_vram_mb"][split], color=CONCURRENT,
                label=f"{label('bg_peak_vram_mb')} (stacked)")
    if (~split).any():
        ax.barh(y[~split], table["peak_vram_mb"][~split], color="grey", label="peak (no split)")
    ax.plot(table["peak_vram_mb"], y, "kD", markersize=5, label=f"{label('peak_vram_mb')} (NVML, both jobs)")
    ax.plot(table["vram_budget_mb"], y, "r|", markersize=16, markeredgewidth=2, label=label("vram_budget_mb"))
    for yi, (_, row) in zip(y, table.iterrows()):
        ax.text(row["peak_vram_mb"], float(yi), f"  {row['peak_vram_mb']:.0f} MB (n={int(row['n'])})", va="center",
                fontsize=8, clip_on=True)
    ax.set_yticks(y, table["label"], fontsize=8)
    ax.set_xlabel(axis_label("peak_vram_mb"))
    ax.set_xlim(0, max(float(table["vram_budget_mb"].max(skipna=True) or 0), float(table["peak_vram_mb"].max())) * 1.3)
    _legend_below(ax)
    ax.set_title("Peak VRAM per pair against the budget")
    caption = ("peak_vram_mb: the maximum over samples of both jobs' summed NVML process memory (CUDA contexts "
               "included), the figure the budget check uses; the stacked bars are each job's own peak, which need "
               "not coincide.")
    return figure, caption


FIGURES: list[tuple[str, str, Callable[[Analysis], tuple[Figure, str]]]] = [
    ("efficiency", "Efficiency per pair", efficiency_figure),
    ("slowdown_heatmap", "Slowdown heatmap (foreground x background)", slowdown_heatmap),
    ("energy_solo_vs_concurrent", "Energy per job, solo vs concurrent", energy_figure),
    *[(f"sensitivity_{hp}_{short}", f"Sensitivity to {hp}: {what}, solo vs concurrent",
       sensitivity_figure(hp, metric))
      for hp in SENSITIVITY_HPS for short, metric, what in (("energy", "gpu_energy_j", "energy"),
                                                             ("perf", "perf_value", "performance"))],
    ("pareto", "Energy vs performance with the Pareto front", pareto_figure),
    ("vram", "Peak VRAM per pair against the budget", vram_figure),
]


def literal_text(a: Analysis) -> Analysis:
    """``a`` with every text its tables hold drawn as written: matplotlib reads a text between two
    ``$`` as mathtext, so a workload called ``m$^^$`` (a legal name) would be a formula that fails
    to parse, and no report would be written. Escaped, each ``$`` is one dollar sign."""
    def escaped(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        for column in [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]:
            frame[column] = frame[column].map(lambda v: v.replace("$", r"\$") if isinstance(v, str) else v)
        return frame

    return replace(a, runs=escaped(a.runs), overhead=escaped(a.overhead),
                   sensitivity={hp: escaped(f) for hp, f in a.sensitivity.items()},
                   interference=escaped(a.interference), efficiency=escaped(a.efficiency), pareto=escaped(a.pareto),
                   vram=escaped(a.vram), tests=escaped(a.tests))


def draw_all(a: Analysis, out_dir: Path) -> list[Plot]:
    """Every figure as ``out_dir/<name>.png``, or the reason it could not be drawn."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = []
    drawn = literal_text(a)
    for name, title, draw in FIGURES:
        try:
            figure, caption = draw(drawn)
        except NoData as reason:
            plots.append(Plot(name, title, skipped=str(reason)))
            continue
        path = out_dir / f"{name}.png"
        save_png(figure, path)
        plots.append(Plot(name, title, caption, path))
    return plots


def save_png(figure: Figure, path: Path) -> None:
    """A palette PNG (256 colours): a quarter of the bytes of matplotlib's RGBA output, with no
    visible difference in line plots, so committed reports and the embedding HTML stay small."""
    from PIL import Image

    buffer = io.BytesIO()
    FigureCanvasAgg(figure)
    figure.savefig(buffer, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    palette = io.BytesIO()
    image.save(palette, format="PNG", optimize=True)
    atomic_write_bytes(path, palette.getvalue())
