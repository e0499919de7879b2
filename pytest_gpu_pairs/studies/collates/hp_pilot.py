"""Collate the hyperparameter pilot: does sharing the GPU change how the learning rate and the
epochs act on a run's energy and on its accuracy?

For each pair, factor (learning_rate, epochs) and outcome (the foreground's GPU energy above idle
for its whole run, ``fg_gpu_energy_j``; the whole card's over the same run, ``gpu_energy_j``, the
background's share included, as the predecessor counted a parallel run; its accuracy, the
workload's primary metric or the one ``ACCURACY_METRICS`` declares for it), the runs that vary
that factor alone (the default variant and the factor's two bounds, solo and concurrent, every
repeat) are fitted with ``y ~ 1 + x + mode + x*mode`` (x: log10 of the learning rate, the epochs as
they are); the interaction coefficient, the concurrent slope minus the solo slope, is the answer,
with its 95 % Student-t interval and p-value.
Energy is taken relative to the varied model's solo baseline run (so pairs compare, and a slope
reads "fraction of the baseline's energy per unit of x"); accuracy as a fraction. Pooled over the
pairs: one least-squares fit of every run once (``analysis.report.analysis.joint_interaction``).

    gpu-pairs study collect hp_pilot --out reports/reference/hp_pilot

The study's results folders are ``results/`` (hp01) and ``results-mrt_oast/`` (hp02, hp03), read
through the store, each case's repeats from its round folders.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import numpy as np

from pytest_gpu_pairs.analysis.report.analysis import interaction_estimate, joint_interaction
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import RESULT, load_run, read_record

FOLDERS = ("results", "results-mrt_oast")

FACTORS = {"learning_rate": ("lr_min", "lr_max"), "epochs": ("epochs_min", "epochs_max")}
OUTCOMES = ("energy", "card_energy", "accuracy")
ENERGIES = ("energy", "card_energy")
ACCURACY_METRICS = {"mrt_oast": "auc"}
"""The accuracy a varied model is judged by where its primary metric cannot move in a pilot-length
run: mrt_oast's accuracy is taken at a 0.9 score threshold that no clone pair crosses this early
(chance in every run at scales 0.25 and 0.5), while the ROC AUC of its scores on the same test pairs
needs no threshold. Every other model is judged by its record's ``perf_metric``."""


def round_records(record: Record, folder: Optional[Path]) -> list[Record]:
    """Each repeat of a case: its round folders' records where it has them, else the record itself."""
    if folder is not None:
        rounds = sorted(path for path in folder.glob("round-*") if (path / RESULT).is_file())
        if rounds:
            return [read_record(path / RESULT) for path in rounds]
    return [record]


def accuracy_metric(record: Record) -> Optional[str]:
    return ACCURACY_METRICS.get(record.get("fg_model"), record.get("perf_metric"))


def observations(paths: list[Path]) -> list[dict[str, Any]]:
    """One row per repeat: pair, variant, mode, the varied hyperparameters, energy and accuracy."""
    rows = []
    for path in paths:
        run = load_run(path)
        for case_id, record in run.records.items():
            folder = path / case_id if path.is_dir() else None
            for repeat, r in enumerate(round_records(record, folder), start=1):
                metric = accuracy_metric(record)
                perf = (r.get("perf") or {}).get(metric) if metric else None
                rows.append({"pair": case_id.split("-")[0], "case_id": case_id, "variant": record.get("variant"),
                             "mode": record.get("mode"), "model": record.get("fg_model"), "repeat": repeat,
                             "hparams": record.get("fg_hparams") or {}, "energy": _number(r.get("fg_gpu_energy_j")),
                             "card_energy": _number(r.get("gpu_energy_j")),
                             "accuracy": _number(perf), "metric": metric, "failure": r.get("failure")})
    return rows


def _number(value: Any) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _varied_model(rows: list[dict[str, Any]]) -> Optional[str]:
    varied = {r["model"] for r in rows if r["variant"] not in (None, "default", "bg_default")}
    return varied.pop() if len(varied) == 1 else None


def factor_rows(rows: list[dict[str, Any]], factor: str) -> list[dict[str, Any]]:
    """The repeats of the varied model at its default and at the factor's two bounds."""
    model = _varied_model(rows)
    wanted = ("default", *FACTORS[factor])
    return [r for r in rows if r["model"] == model and r["variant"] in wanted and r["failure"] is None]


def _x(row: dict[str, Any], factor: str) -> float:
    value = float(row["hparams"][factor])
    return math.log10(value) if factor == "learning_rate" else value


def _missing(reason: str) -> dict[str, Any]:
    return {"estimate": None, "reason": reason}


def pair_rows(rows: list[dict[str, Any]], pair: str) -> list[dict[str, Any]]:
    """A pair's own runs and the solo runs of its varied model, wherever they ran: a solo job that
    several pairs need is one case, recorded under the first pair that needs it."""
    mine = [r for r in rows if r["pair"] == pair]
    model = _varied_model(mine)
    shared = [r for r in rows if r["pair"] != pair and r["mode"] == "solo" and r["model"] == model]
    return mine + shared


def metric_name(rows: list[dict[str, Any]]) -> Optional[str]:
    """The accuracy metric these rows read, so an answer or its reason says which it is about."""
    return "/".join(sorted({r["metric"] for r in rows if r["metric"]})) or None


def prepared(rows: list[dict[str, Any]], factor: str, outcome: str) -> tuple[list[dict[str, Any]], Optional[str]]:
    """The runs that can answer for this factor and outcome, each with its ``x`` and ``y`` (energy
    relative to the solo baseline), or none and the reason."""
    varied = factor_rows(rows, factor)
    if not {r["variant"] for r in varied} - {"default"}:
        return [], f"no run varies {factor} (its bounds have not run yet)"
    name = outcome if outcome in ENERGIES else metric_name(varied) or "an accuracy"
    data = [r for r in varied if r[outcome] is not None]
    if not data:
        unit = "GPU energy (measured on a GPU only)" if outcome in ENERGIES else name
        return [], f"no run of this factor recorded {unit}"
    values = [r[outcome] for r in data]
    if max(values) == min(values):
        return [], f"every run's {name} was the same ({values[0]:g}): no slope to compare"
    scale = 1.0
    if outcome in ENERGIES:
        baseline = [r[outcome] for r in data if r["variant"] == "default" and r["mode"] == "solo"]
        if not baseline:
            return [], "no solo baseline run recorded energy"
        scale = sum(baseline) / len(baseline)
    return [{**r, "x": _x(r, factor), "y": r[outcome] / scale} for r in data], None


def _arrays(data: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([r["x"] for r in data]), np.array([r["y"] for r in data]),
            np.array([r["mode"] == "concurrent" for r in data]))


def pair_answer(rows: list[dict[str, Any]], factor: str, outcome: str) -> dict[str, Any]:
    """The interaction for one pair, factor and outcome, or a null estimate with the reason; an
    accuracy answer names its metric, as the varied models are judged by different ones."""
    answer = _pair_estimate(rows, factor, outcome)
    if outcome == "accuracy":
        answer["metric"] = metric_name(factor_rows(rows, factor))
    return answer


def _pair_estimate(rows: list[dict[str, Any]], factor: str, outcome: str) -> dict[str, Any]:
    data, reason = prepared(rows, factor, outcome)
    if reason:
        return _missing(reason)
    found = interaction_estimate(*_arrays(data))
    if found is None:
        return _missing(f"too few runs: {len(data)}, and two values of {factor} in each mode are needed")
    return found.as_dict()


def pooled_answer(rows: list[dict[str, Any]], pairs: list[str], factor: str, outcome: str) -> dict[str, Any]:
    """One interaction over the pairs that each gave one, fitted together with every run once; an
    accuracy answer names each pair's metric, as it pools different ones."""
    runs: dict[tuple, dict[str, Any]] = {}
    answered: dict[str, Optional[str]] = {}
    for pair in pairs:
        data, reason = prepared(pair_rows(rows, pair), factor, outcome)
        if reason or interaction_estimate(*_arrays(data)) is None:
            continue
        answered[pair] = metric_name(data)
        for r in data:
            runs[(r["case_id"], r["repeat"])] = {**r, "fit_pair": pair}
    if len(answered) < 2:
        return _missing("fewer than two pairs have an estimate")
    data = list(runs.values())
    found = joint_interaction(*_arrays(data), np.array([r["model"] for r in data]),
                              np.array([r["fit_pair"] for r in data]))
    if found is None:
        return _missing("the joint fit has no residual freedom")
    answer = {**found.as_dict(), "pairs": list(answered)}
    return {**answer, "metrics": answered} if outcome == "accuracy" else answer


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    return collate([folder / name for name in FOLDERS if (folder / name).is_dir()])


def table(summary: dict[str, Any]) -> str:
    return markdown(summary)


def collate(paths: list[Path]) -> dict[str, Any]:
    rows = observations(paths)
    pairs = sorted({r["pair"] for r in rows})
    summary: dict[str, Any] = {
        "pairs": {}, "pooled": {}, "n_runs": len(rows),
        "model": "y ~ 1 + x + mode + x*mode per pair; x = log10(learning_rate) or epochs; energies relative to the "
                 "varied model's solo baseline, accuracy as a fraction (the varied model's primary metric; "
                 "mrt_oast's ROC AUC, as its thresholded accuracy sits at chance in runs this short); pooled: one "
                 "least-squares fit over the pairs that gave an estimate, a solo line per varied model, a concurrent "
                 "offset per pair and one common x*mode term, every run once (pairs that vary one model share its "
                 "solo runs)"}
    for pair in pairs:
        mine = pair_rows(rows, pair)
        entry: dict[str, Any] = {"n_runs": len(mine), "varied": _varied_model(mine)}
        summary["pairs"][pair] = entry
        for factor in FACTORS:
            entry[factor] = {outcome: pair_answer(mine, factor, outcome) for outcome in OUTCOMES}
    for factor in FACTORS:
        summary["pooled"][factor] = {outcome: pooled_answer(rows, pairs, factor, outcome) for outcome in OUTCOMES}
    return summary


def _cell(answer: dict[str, Any]) -> str:
    if answer.get("estimate") is None:
        return f"not estimated: {answer['reason']}"
    low, high = answer["ci95"]
    return f"{answer['estimate']:+.3f} [{low:+.3f}, {high:+.3f}], p={answer['p']:.2g}, n={answer['n_runs']}"


def _accuracy_cell(answer: dict[str, Any]) -> str:
    metrics = answer.get("metrics") or {}
    named = ", ".join(f"{pair} {metric}" for pair, metric in metrics.items()) or answer.get("metric")
    return f"{named}: {_cell(answer)}" if named else _cell(answer)


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# Hyperparameter pilot: the change sharing makes to each slope", "",
             "concurrent slope minus solo slope, 95 % interval, p, runs", "",
             "| pair | factor | energy, the foreground's share (fraction of the solo baseline per unit of x) | "
             "energy, the whole card's | accuracy (fraction per unit of x) |",
             "|---|---|---|---|---|"]
    for pair, entry in summary["pairs"].items():
        for factor in FACTORS:
            answers = entry.get(factor, {})
            lines.append(f"| {pair} ({entry['varied']}) | {factor} | {_cell(answers.get('energy'))} | "
                         f"{_cell(answers.get('card_energy'))} | {_accuracy_cell(answers.get('accuracy'))} |")
    for factor, answers in summary["pooled"].items():
        lines.append(f"| pooled | {factor} | {_cell(answers.get('energy'))} | {_cell(answers.get('card_energy'))} | "
                     f"{_accuracy_cell(answers.get('accuracy'))} |")
    return "\n".join(lines) + "\n"
