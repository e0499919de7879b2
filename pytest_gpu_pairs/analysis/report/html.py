"""``report.html``: one static, self-contained page (inline CSS, PNGs and the report's CSVs
embedded as base64, no script, no external request), so it opens from a file, an e-mail or a CI
artifact alike, and its links work wherever it was moved."""
from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from typing import Optional

import pandas as pd

from pytest_gpu_pairs.analysis.report.analysis import Analysis
from pytest_gpu_pairs.analysis.report.load import Input
from pytest_gpu_pairs.analysis.report.plots import Plot
from pytest_gpu_pairs.record.keys import meaning

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1150px;
padding:0 1rem;color:#222;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd}h3{font-size:1.05rem}
table{border-collapse:collapse;font-size:.8rem;margin:.6rem 0}th,td{border:1px solid #ddd;padding:.2rem .45rem;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85rem;color:#444}.skipped{color:#8a4b00;background:#fff6e5;padding:.4rem .6rem}
.note{font-size:.9rem}code{background:#f4f4f4;padding:0 .2rem}
"""


def _e(text) -> str:
    return html.escape(str(text))


def _table(frame: pd.DataFrame, empty: str = "nothing to show for these inputs") -> str:
    if frame is None or frame.empty:
        return f"<p class='note'>{_e(empty)}</p>"
    return frame.to_html(index=False, border=0, na_rep="–", float_format=lambda v: f"{v:.4g}", escape=True)


def _figure(plot: Plot) -> str:
    if plot.skipped:
        return (f"<h3>{_e(plot.title)}</h3><p class='skipped' data-plot='{_e(plot.name)}'>"
                f"Not drawn: {_e(plot.skipped)}.</p>")
    if plot.path is None:
        return f"<h3>{_e(plot.title)}</h3><p class='skipped' data-plot='{_e(plot.name)}'>Not drawn.</p>"
    data = base64.b64encode(plot.path.read_bytes()).decode("ascii")
    return (f"<h3>{_e(plot.title)}</h3><figure><img alt='{_e(plot.title)}' data-plot='{_e(plot.name)}' "
            f"src='data:image/png;base64,{data}'><figcaption>{_e(plot.caption)} "
            f"(<code>plots/{_e(plot.path.name)}</code>)</figcaption></figure>")


def _inputs(inputs: Iterable[Input], device_label: Optional[str]) -> pd.DataFrame:
    rows = []
    for item in inputs:
        machine = item.machine or {}
        gpu = machine.get("gpu_name") or machine.get("device")
        if gpu is None and item.kind == "seed_csv":
            gpu = f"{device_label} (stated, not recorded)" if device_label else "not recorded in the CSV"
        rows.append({"input": item.path, "kind": item.kind, "rows": item.rows, "GPU": gpu or "–",
                     "driver": machine.get("driver") or "–", "CUDA": machine.get("cuda_driver_version") or "–"})
    return pd.DataFrame(rows)


def _headline(a: Analysis) -> str:
    runs = a.runs
    solo, concurrent = (runs["mode"] == "solo").sum(), (runs["mode"] == "concurrent").sum()
    pairs = runs["pair"].dropna().nunique()
    return (f"<p>{len(runs)} runs analysed: {solo} solo, {concurrent} concurrent, "
            f"{runs['fg_model'].nunique()} foreground models, {pairs} named pairs.</p>")


NO_VRAM = "no input records a peak VRAM (the predecessor's CSV has no memory column; runs on the CPU have none)"
KEY_DEFINITIONS = {  # record keys: the key table's meaning, then what this report adds about its inputs
    "fg_slowdown": "predecessor rows: against solo runs of the same model and hyperparameters, random seed aside; "
                   "per epoch where only epochs differ",
    "concurrency_efficiency": "below 1.0 serial is faster",
    "gpu_energy_j": "predecessor rows: whole-card energy during the foreground job, the CSV's energy_gpu_total_joules",
    "peak_vram_mb": "maximum over samples; the budget check uses it",
}
OWN_DEFINITIONS = {  # the report's own columns, which are no record keys
    "energy ratio": "card energy during a concurrent foreground job / the same job's solo card energy",
    "q (BH)": "Benjamini-Hochberg adjusted p over every test of this report",
}


def definitions() -> list[tuple[str, str]]:
    """The glossary: each record key's meaning read from the key table, so it cannot drift from the
    record's documentation, then the report's own columns."""
    keys = [(name, f"{meaning(name)}; {extra}") for name, extra in KEY_DEFINITIONS.items()]
    return keys + list(OWN_DEFINITIONS.items())


MAX_EMBEDDED_CSV = 4 << 20  # a CSV up to this size travels inside the page; a larger one is linked beside it


def _csv_link(name: str, text: Optional[str]) -> str:
    """A link that downloads the CSV from the page itself (a data: URI), so it still works where the
    page was moved or mailed alone; a CSV too large to embed is linked beside the page."""
    if text is None or len(text.encode("utf-8")) > MAX_EMBEDDED_CSV:
        return f"<a href='{_e(name)}'>{_e(name)}</a> (beside this page, in the report folder)"
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f"<a download='{_e(name)}' href='data:text/csv;charset=utf-8;base64,{data}'>{_e(name)}</a>"


def render(title: str, analysis: Analysis, plots: list[Plot], inputs: list[Input], notes: list[str],
           device_label: Optional[str] = None, csvs: Optional[dict[str, str]] = None) -> str:
    """The page; ``csvs`` (file name -> text) are the report's CSVs, which the page carries along."""
    csvs = csvs or {}
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>", _headline(analysis),
             "<h2>Inputs</h2>", _table(_inputs(inputs, device_label)),
             f"<p class='note'>Per-run values: {_csv_link('summary.csv', csvs.get('summary.csv'))} (the predecessor's "
             f"columns, then ours); every statistical test: {_csv_link('stats.csv', csvs.get('stats.csv'))}.</p>"]
    if notes:
        parts += ["<h2>About these data</h2><ul>", *(f"<li>{_e(n)}</li>" for n in notes), "</ul>"]
    parts.append("<h2>Figures</h2>")
    parts += [_figure(plot) for plot in plots]
    parts += ["<h2>Concurrency overhead per foreground model</h2>",
              "<p class='note'>Geometric means of the per-run ratios; the one-sample t-tests on their logs are in the "
              "test table below.</p>", _table(analysis.overhead),
              "<h2>Interference: slowdown per pair</h2>", _table(analysis.interference),
              "<h2>Efficiency per pair</h2>", _table(analysis.efficiency),
              "<h2>Energy/performance Pareto front</h2>", _table(analysis.pareto),
              "<h2>Peak VRAM against the budget</h2>",
              _table(analysis.vram, NO_VRAM)]
    for hp, table in analysis.sensitivity.items():
        shown = table[table["n"] > 0] if not table.empty else table
        parts += [f"<h2>Sensitivity to {_e(hp)}, solo vs concurrent</h2>", _table(shown)]
    parts += ["<h2>Statistical tests</h2>",
              "<p class='note'>Each test with its n; p-values below 0.05 among this many tests are expected by chance "
              "alone, so read q (Benjamini-Hochberg) as well.</p>",
              _table(analysis.tests, "the inputs have too few repeats for any test"),
              "<h2>Definitions</h2><dl>",
              *(f"<dt><code>{_e(k)}</code></dt><dd>{_e(v)}</dd>" for k, v in definitions()),
              "</dl></body></html>"]
    return "\n".join(parts)
