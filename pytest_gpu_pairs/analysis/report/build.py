"""One report folder from inputs: ``summary.csv``, ``stats.csv``, ``plots/*.png``, ``report.html``."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pandas as pd

from pytest_gpu_pairs.analysis.report.analysis import Analysis, analyse
from pytest_gpu_pairs.analysis.report.html import render
from pytest_gpu_pairs.analysis.report.load import load_runs
from pytest_gpu_pairs.analysis.report.plots import Plot, draw_all
from pytest_gpu_pairs.compat import raw_data as seed
from pytest_gpu_pairs.record.store import atomic_write_text

OUR_SUMMARY_COLUMNS = (
    "case_id", "pair", "sharing", "campaign", "fg_slowdown", "slowdown_basis", "solo_duration_s", "solo_gpu_energy_j", "solo_n",
    "energy_ratio", "bg_progress_ratio", "concurrency_efficiency", "concurrent_overhead", "gpu_energy_above_idle_j",
    "fg_gpu_energy_j", "bg_gpu_energy_j", "serial_energy_j", "energy_saved_vs_serial", "peak_vram_mb", "fg_peak_vram_mb", "bg_peak_vram_mb", "vram_budget_mb",
    "oom", "perf_name", "perf_value", "pareto_front", "device", "gpu_name", "driver", "cuda_driver_version",
    "repeats", "source", "source_kind", "duplicate_of", "in_analysis")


@dataclass
class Report:
    out_dir: Path
    analysis: Analysis
    plots: list[Plot]
    notes: list[str]
    files: list[Path]


def summary_table(runs: pd.DataFrame, analysis: Analysis) -> pd.DataFrame:
    """One row per input row: the predecessor's columns where the predecessor has the figure, ours beside them."""
    derived = analysis.runs.reindex(runs.index)
    merged = runs.copy()
    for column in analysis.runs.columns:
        if column not in runs or column in ("fg_slowdown",):
            merged[column] = derived[column]
    merged["in_analysis"] = runs.index.isin(analysis.runs.index)
    seed_part = pd.DataFrame([seed.seed_layout(row) for row in merged.to_dict("records")], index=merged.index)
    lead = list(seed.SUMMARY_LEAD) + list(seed.ENERGY_FIELDS)
    rest = sorted(c for c in seed_part.columns if c not in lead)
    ours = merged.reindex(columns=list(OUR_SUMMARY_COLUMNS))
    return pd.concat([seed_part.reindex(columns=lead + rest), ours], axis=1)


def build_report(inputs: Iterable[str | Path], out_dir: str | Path, title: Optional[str] = None,
                 device_label: Optional[str] = None, perf_metrics: Optional[Mapping[str, str]] = None) -> Report:
    out_dir = Path(out_dir)
    loaded = load_runs(inputs, perf_metrics)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = loaded.runs
    if device_label:
        runs.loc[runs["device"].isna(), "device"] = device_label
    analysis = analyse(runs)
    notes = loaded.notes + analysis.notes
    plots = draw_all(analysis, out_dir / "plots")
    summary, stats_path, html_path = out_dir / "summary.csv", out_dir / "stats.csv", out_dir / "report.html"
    csvs = {"summary.csv": summary_table(runs, analysis).to_csv(index=False), "stats.csv": analysis.tests.to_csv(index=False)}
    atomic_write_text(summary, csvs["summary.csv"])
    atomic_write_text(stats_path, csvs["stats.csv"])
    title = title or f"gpu-pairs report: {', '.join(Path(str(i)).name for i in inputs)}"
    atomic_write_text(html_path, render(title, analysis, plots, loaded.inputs, notes, device_label, csvs))
    files = [summary, stats_path, html_path] + [p.path for p in plots if p.path is not None]
    return Report(out_dir, analysis, plots, notes, files)
