"""The predecessor's feasibility analysis held against measurements: its three predicted pairs and its
three stress tests (the three-job group among them), each written into the settings as the group's
``expect`` and judged by ``studies.expectations``.

    gpu-pairs study collect predecessor_predictions --out reports/reference/predecessor_predictions

Per group and session (``session-1``, ``session-2``, ...): the efficiency with its 95 % interval over
starts, the whole-run memory need on the emulated 10 GB card and the phase that set it, the memory
verdict against the 7500 MB budget, the foreground's slowdown and the energy saved. Across sessions
the efficiency is the sessions' mean and its interval the span of every session's interval; the
memory need is the largest session's. Beside each pair, the predecessor's own foreground slowdown
on its RTX 3080 where it ever ran the pair. A reading above the group's job count, which no sharing
can give, must carry its record's suspect flag, or the collate stops naming the record.

The collate writes ``summary.json``, ``table.md`` and ``README.md`` (the package's template, filled
from the figures).
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from string import Template
from typing import Any, Optional

from pytest_gpu_pairs.experiment.load import load_experiment
from pytest_gpu_pairs.experiment.schema import Expectation, PairSpec
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import read_session
from pytest_gpu_pairs.studies.collates import rtx3080
from pytest_gpu_pairs.studies.collates.across_sessions import (
    bounds,
    group_records,
    numbered_folders,
    overlap,
    spread,
    write_summary,
)
from pytest_gpu_pairs.studies.expectations import VRAM_TOLERANCE, Measured, judge

SETTINGS = "settings/predecessor_predictions.json"
SESSION_FOLDER = re.compile(r"session-([1-9][0-9]*)")
TEMPLATE = Path(__file__).with_name("predecessor_predictions_readme.md")


def _flag(record: Record, path: Path) -> Optional[str]:
    """The suspect flag a reading above the job count must carry; refused where it has none."""
    value, ceiling = record.concurrency_efficiency, record.n_jobs or 2
    if value is None or value <= ceiling:
        return None
    note = (record.notes or {}).get("concurrency_efficiency")
    if not (isinstance(note, str) and note.startswith("suspect")):
        raise ValueError(f"{path}: $.notes.concurrency_efficiency: expected a suspect flag on the efficiency "
                         f"{value:.3f}, above {ceiling}, which no sharing of {ceiling} jobs can give")
    return note


def session_row(record: Record, path: Path, folder: Path) -> dict[str, Any]:
    gpu = (read_session(path.parent.parent) or {}).get("gpu") or {}
    return {"record": str(path.parent.relative_to(folder)), "gpu": gpu.get("uuid"),
            "efficiency": record.concurrency_efficiency, "efficiency_ci95": bounds(record.concurrency_efficiency_ci),
            "efficiency_bound": record.efficiency_bound, "n_jobs": record.n_jobs, "n_starts": record.n_starts,
            "n_rounds": record.n_rounds, "gpu_seconds": record.gpu_seconds,
            "fg_slowdown": record.fg_slowdown, "fg_slowdown_ci95": bounds(record.fg_slowdown_ci),
            "need_mb": record.vram_fit_mb, "steady_mb": record.vram_steady_mb, "sampled_peak_mb": record.peak_vram_mb,
            "transient_mb": record.vram_transient_mb, "peak_phase": record.vram_peak_phase,
            "vram_verdict": record.vram_verdict, "energy_saved": record.energy_saved_vs_serial,
            "energy_saved_ci95": bounds(record.energy_saved_vs_serial_ci), "flag": _flag(record, path),
            "solo_steps_per_s": [job.solo_steps_per_s for job in record.jobs or []]}


def pooled(rows: list[dict[str, Any]]) -> Measured:
    """The sessions together: the mean efficiency, an interval spanning every session's, the largest
    steady need."""
    values = [r["efficiency"] for r in rows if r["efficiency"] is not None]
    intervals = [r["efficiency_ci95"] for r in rows if r["efficiency_ci95"]]
    steady = [r["steady_mb"] for r in rows if r["steady_mb"] is not None]
    span = (min(i[0] for i in intervals), max(i[1] for i in intervals)) if intervals else None
    return Measured(efficiency=statistics.fmean(values) if values else None, efficiency_ci=span,
                    steady_mb=max(steady) if steady else None, verdicts=[r["vram_verdict"] for r in rows])


def _models(pair: PairSpec) -> list[str]:
    return [ref.model for _, ref in pair.job_refs()]


def group_row(pair: PairSpec, rows: dict[str, dict[str, Any]], found: rtx3080.Slowdowns) -> dict[str, Any]:
    models = _models(pair)
    measured = pooled(list(rows.values()))
    intervals = [r["efficiency_ci95"] for r in rows.values() if r["efficiency_ci95"]]
    needs = [r["need_mb"] for r in rows.values() if r["need_mb"] is not None]
    return {"group": pair.group, "jobs": models, "note": pair.note, "sessions": rows, "n_sessions": len(rows),
            "efficiency": measured.efficiency, "efficiency_ci95": list(measured.efficiency_ci or []) or None,
            "efficiency_spread": spread([r["efficiency"] for r in rows.values() if r["efficiency"] is not None]),
            "intervals_overlap": overlap(intervals) if len(intervals) > 1 else None,
            "steady_mb": measured.steady_mb, "need_mb": max(needs) if needs else None,
            "vram_verdicts": [r["vram_verdict"] for r in rows.values()],
            "rtx3080": rtx3080.pair_slowdown(found, models[0], models[1]) if len(models) == 2 else None}


def prediction_row(pair: PairSpec, expectation: Expectation, group: dict[str, Any]) -> dict[str, Any]:
    measured = pooled(list(group["sessions"].values()))
    return {"name": expectation.name, "group": pair.group, "jobs": group["jobs"], "source": expectation.source,
            "said": expectation.said, "predicted": expectation.model_dump(exclude={"name", "source", "said"},
                                                                          exclude_none=True),
            "n_sessions": group["n_sessions"], **judge(expectation, measured)}


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    experiment = load_experiment(root / SETTINGS)
    sessions = numbered_folders(folder, SESSION_FOLDER)
    by_session = {s: group_records(folder / s) for s in sessions}
    found = rtx3080.slowdowns(root / rtx3080.PREDECESSOR)
    groups, predictions = [], []
    for pair in experiment.pairs:
        rows = {s: session_row(*by_session[s][pair.group], folder) for s in sessions if pair.group in by_session[s]}
        group = group_row(pair, rows, found)
        groups.append(group)
        predictions += [prediction_row(pair, e, group) for e in pair.expect or []]
    verdicts = [p["verdict"] for p in predictions]
    return {"card_mb": experiment.defaults.card_mb, "vram_budget_mb": experiment.defaults.vram_budget_mb,
            "vram_tolerance": VRAM_TOLERANCE, "sessions": sessions, "groups": groups, "predictions": predictions,
            "verdict_counts": {v: verdicts.count(v) for v in sorted(set(verdicts))},
            "sessions_per_group": min((g["n_sessions"] for g in groups), default=0),
            "interval_covers_sessions": all(g["intervals_overlap"] is not False for g in groups),
            "intervals_apart": [g["group"] for g in groups if g["intervals_overlap"] is False],
            "efficiency_spread_max": max((g["efficiency_spread"] for g in groups
                                          if g["efficiency_spread"] is not None), default=None),
            "gpus": sorted({r["gpu"] for g in groups for r in g["sessions"].values() if r["gpu"]})}


def _n(value: Any, spec: str = ".2f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def _ci(value: Any, ci: Optional[list[float]], spec: str = ".2f", scale: float = 1.0, unit: str = "") -> str:
    if value is None:
        return "not measured"
    text = format(value * scale, spec) + unit
    return text + (f" [{format(ci[0] * scale, spec)}, {format(ci[1] * scale, spec)}]" if ci else "")


def _predicted_cell(predicted: dict[str, Any]) -> str:
    parts = []
    if "efficiency" in predicted:
        parts.append("efficiency {:.2f}-{:.2f}".format(*predicted["efficiency"]))
    if "time_saved" in predicted:
        parts.append("time saved {:.0f}-{:.0f} %".format(*(100 * v for v in predicted["time_saved"])))
    if "vram_mb" in predicted:
        parts.append(f"{predicted['vram_mb']:.0f} MB")
    if "fits" in predicted:
        parts.append("fits the budget" if predicted["fits"] else "does not fit the budget")
    return "; ".join(parts)


def _measured_cell(p: dict[str, Any], group: dict[str, Any]) -> str:
    parts, judged = [], p["parts"]
    if "efficiency" in judged:
        parts.append(f"efficiency {_ci(group['efficiency'], group['efficiency_ci95'])} ({judged['efficiency']})")
    if "time_saved" in judged:
        parts.append(f"time saved {_ci(p['measured_time_saved'], p['measured_time_saved_ci95'], '.0f', 100, ' %')} "
                     f"({judged['time_saved']})")
    if "vram_mb" in judged:
        error = "" if p["vram_error"] is None else f", {100 * p['vram_error']:+.0f} %"
        parts.append(f"steady {_n(group['steady_mb'], '.0f')} MB{error} ({judged['vram_mb']})")
    if "fits" in judged:
        fits = sum(v == "fits" for v in group["vram_verdicts"])
        parts.append(f"whole run {_n(group['need_mb'], '.0f')} MB, fits in {fits} of {len(group['vram_verdicts'])} "
                     f"sessions ({judged['fits']})")
    return "; ".join(parts)


def predictions_table(summary: dict[str, Any]) -> list[str]:
    groups = {g["group"]: g for g in summary["groups"]}
    lines = ["| prediction | group: jobs | the analysis said | predicted | measured (sessions' mean [span of their 95 % "
             "intervals]) | verdict |", "|" + " --- |" * 6]
    for p in summary["predictions"]:
        g = groups[p["group"]]
        lines.append(f"| {p['name']} | {p['group']}: {' + '.join(p['jobs'])} | {p['said']} | "
                     f"{_predicted_cell(p['predicted'])} | {_measured_cell(p, g)} ({g['n_sessions']} sessions) | "
                     f"**{p['verdict']}** |")
    return lines


def _need_cell(row: dict[str, Any]) -> str:
    if row["need_mb"] is None:
        return "not measured"
    return (f"{row['need_mb']:.0f} ({_n(row['steady_mb'], '.0f')} + {_n(row['transient_mb'], '.0f')}: "
            f"{row['peak_phase']}), {row['vram_verdict']}")


def sessions_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| group | session (GPU) | efficiency [95 %] (starts, rounds) | bound | each job's solo steps/s | "
             "fg slowdown [95 %] | whole-run need MB (steady + transient: phase), verdict | energy saved [95 %] | "
             "RTX 3080: fg slowdown |", "|" + " --- |" * 9]
    for g in summary["groups"]:
        for session, row in g["sessions"].items():
            flag = ", above the job count: flagged suspect" if row["flag"] else ""
            paces = ", ".join(_n(p, ".0f") for p in row["solo_steps_per_s"]) or "–"
            lines.append(f"| {g['group']} | {session.rsplit('-', 1)[1]} ({(row['gpu'] or '–')[:12]}) | "
                         f"{_ci(row['efficiency'], row['efficiency_ci95'])} ({_n(row['n_starts'], 'd')}, "
                         f"{_n(row['n_rounds'], 'd')}){flag} | {_n(row['efficiency_bound'])} | {paces} | "
                         f"{_ci(row['fg_slowdown'], row['fg_slowdown_ci95'])} | {_need_cell(row)} | "
                         f"{_ci(row['energy_saved'], row['energy_saved_ci95'], '.0f', 100, ' %')} | "
                         f"{rtx3080.cell(g['rtx3080']) if len(g['jobs']) == 2 else 'not run (three jobs)'} |")
        if not g["sessions"]:
            lines.append(f"| {g['group']} | – | not measured | – | – | – | – | – | – |")
    return lines


def table(summary: dict[str, Any]) -> str:
    lines = ["## Each prediction against the measurement", "", *predictions_table(summary), "",
             "## Each group in every session", "", *sessions_table(summary)]
    return "\n".join(lines) + "\n"


def answer(summary: dict[str, Any]) -> str:
    """The headline, every figure from the summary."""
    counts = ", ".join(f"{n} {v}" for v, n in summary["verdict_counts"].items())
    lines = [f"- Of {len(summary['predictions'])} predictions: {counts}, over {summary['sessions_per_group']} "
             f"sessions per group."]
    for p in summary["predictions"]:
        parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in p["parts"].items())
        lines.append(f"- {p['name']} ({' + '.join(p['jobs'])}): **{p['verdict']}** ({parts}).")
    spread = summary["efficiency_spread_max"]
    apart = [g["group"] for g in summary["groups"] if g["intervals_overlap"] is False]
    lines.append(f"- Between sessions a group's efficiency moved by at most "
                 f"{'–' if spread is None else f'{100 * spread:.1f} %'}; every two sessions' intervals overlap in "
                 f"every group: {'yes' if not apart else '**no** (' + ', '.join(apart) + ')'}, on "
                 f"{len(summary['gpus'])} GPU(s).")
    return "\n".join(lines)


def beyond_card(summary: dict[str, Any]) -> str:
    """Each group whose whole-run need by the sum exceeds the card itself, beside what its case sampled."""
    card, lines = summary["card_mb"], []
    for g in summary["groups"]:
        rows = [r for r in g["sessions"].values() if r["need_mb"] is not None]
        if card is None or not rows or g["need_mb"] <= card:
            continue
        sampled = [r["sampled_peak_mb"] for r in rows if r["sampled_peak_mb"] is not None]
        row = max(rows, key=lambda r: r["need_mb"])
        seen = f"{min(sampled):.0f}-{max(sampled):.0f} MB" if sampled else "not sampled"
        lines.append(f"{g['group']} needs {row['need_mb']:.0f} MB by that sum, more than the {card:.0f} MB card holds "
                     f"(the larger transient, {row['transient_mb']:.0f} MB: {row['peak_phase']}), while the peak "
                     f"its case sampled with both jobs training was {seen}.")
    return " ".join(lines) or "No group's need by that sum exceeds the card."


def readme(summary: dict[str, Any], table_text: str) -> str:
    template = Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(answer=answer(summary), table=table_text.rstrip("\n"),
                               gpus=", ".join(summary["gpus"]) or "none", beyond_card=beyond_card(summary),
                               apart=", ".join(summary["intervals_apart"]) or "none",
                               tolerance=f"{100 * summary['vram_tolerance']:.0f} %")


def write(folder: Path, root: Path) -> str:
    """summary.json, table.md and README.md, each made before any is written."""
    summary = summarize(folder, root)
    text = table(summary)
    write_summary(folder, summary, text, readme(summary, text))
    return text
