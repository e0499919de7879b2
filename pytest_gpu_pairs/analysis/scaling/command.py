"""`gpu-pairs scale RESULTS... [--current-gpus C] [--gpus 4,6] [--remaining-steps N | --remaining-hours H]`:
how one data-parallel job scales, and whether to move it from C GPUs to N.

For each workload measured by a scaling study (``design: "scaling"``) in the results folders
(or benchmark JSON files): its step time, scaling efficiency, throughput, all-reduce share and
memory per GPU at every measured count, the same predicted for the counts asked by a scaling
model fitted to the measured ones (``analysis.scaling.model``; predictions say so, with their
interval and the other models' values; with two measured counts the model is not extrapolated),
bounds beyond the largest measured count (``analysis.scaling.bounds``; ``--bandwidth`` adds the
host's timed all-reduce to the worst case), and the decision for each target count with every
criterion's value, threshold and verdict (``analysis.scaling.decision``). Nothing runs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.analysis.scaling.bounds import Bandwidth, read_bandwidth, step_bounds
from pytest_gpu_pairs.analysis.scaling.decision import LR_RULE, Decision, Job, Thresholds, decide
from pytest_gpu_pairs.analysis.scaling.measured import Case, Scaling, Workload, read_scaling
from pytest_gpu_pairs.analysis.scaling.model import DEFAULT_MODEL, MODEL_TEXT, MODELS, Fit, FitError
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.scaling import Estimate, ratio
from pytest_gpu_pairs.record.store import StoreError

DEFAULT_TARGETS = "2,4,6,8"
INTERVAL_TEXT = ("95 % intervals; a predicted figure's interval carries the measured step times' intervals through "
                 "the fitted model (delta method) and does not cover the model's own error: the other models' values "
                 "beside it show that spread")


def _counts(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected GPU counts such as 4,6, got {text!r}")
    return tuple(sorted({int(p) for p in parts}))


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def _not_negative(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else _positive(text)


def _fraction(text: str) -> float:
    value = _positive(text)
    if value > 1.5:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.85 (not a percentage), got {text!r}")
    return value


def _whole(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {text!r}")
    return int(text)


def _count(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a GPU count of 1 or more, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results folders (--gpu-pairs-out), benchmark JSON or result.json files of scaling cases")
    parser.add_argument("--current-gpus", type=_count, default=1, metavar="C", help="GPUs the job runs on now (default: 1)")
    parser.add_argument("--gpus", type=_counts, default=_counts(DEFAULT_TARGETS), metavar="N,...",
                        help=f"GPU counts to predict and decide for (default: {DEFAULT_TARGETS})")
    work = parser.add_mutually_exclusive_group()
    work.add_argument("--remaining-steps", type=_positive, default=None, metavar="N",
                      help="optimiser steps the job has left at its current count")
    work.add_argument("--remaining-hours", type=_positive, default=None, metavar="H",
                      help="hours the job has left at its current count")
    parser.add_argument("--work", choices=("samples", "steps"), default="samples",
                        help="what the remaining work fixes: its samples (epochs; default), or its optimiser steps")
    parser.add_argument("--restart-cost-min", type=_not_negative, default=0.0, metavar="M",
                        help="minutes a restart costs (checkpoint, requeue, warm-up); default 0")
    parser.add_argument("--step-time-s", type=_positive, default=None, metavar="S",
                        help="the job's own step time at its current count: anchors the predicted times "
                             "(default: the measured workload's)")
    parser.add_argument("--memory-fraction", type=_fraction, default=None, metavar="F",
                        help="the job's memory in use per GPU at its current count, as a share of the card (0.935)")
    parser.add_argument("--card-memory-mb", type=_positive, default=None, metavar="MB",
                        help="the memory of the job's card (32768), for its headroom in MB with --memory-fraction")
    parser.add_argument("--utilization", type=_fraction, default=None, metavar="U",
                        help="the job's GPU utilisation at its current count (0.9); default: measured, if it was")
    parser.add_argument("--iterations-done", type=_whole, default=None, metavar="K", help="iterations the job has done")
    parser.add_argument("--learning-rate", type=_positive, default=None, metavar="LR",
                        help="the job's learning rate now: the rules' values are printed for it")
    parser.add_argument("--memory-threshold", type=_fraction, default=Thresholds.memory, metavar="F",
                        help=f"switch only below this memory share per GPU (default {Thresholds.memory})")
    parser.add_argument("--util-threshold", type=_fraction, default=Thresholds.utilization, metavar="U",
                        help=f"switch only below this GPU utilisation (default {Thresholds.utilization})")
    parser.add_argument("--max-iterations-done", type=_whole, default=Thresholds.max_iterations_done, metavar="K",
                        help=f"switch only with fewer iterations done (default {Thresholds.max_iterations_done})")
    parser.add_argument("--max-global-batch", type=_count, default=Thresholds.max_global_batch, metavar="B",
                        help=f"switch only while the global batch is below this (default {Thresholds.max_global_batch})")
    parser.add_argument("--bandwidth", default=None, metavar="FILE",
                        help="the host's all-reduce as the scaling study timed it (run/bandwidth.json): "
                             "its slowest bus bandwidth bounds the worst case beyond the measured counts")
    parser.add_argument("--model", choices=tuple(MODELS), default=DEFAULT_MODEL,
                        help=f"the scaling model fitted to the measured counts (default {DEFAULT_MODEL})")
    parser.add_argument("--workload", default=None, metavar="NAME",
                        help="only this workload (its <group>-<model>, or its model)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def job_of(args: argparse.Namespace) -> Job:
    return Job(args.current_gpus, args.remaining_steps, args.remaining_hours, args.step_time_s, args.restart_cost_min,
               args.iterations_done, args.memory_fraction, args.card_memory_mb, args.utilization, args.learning_rate,
               args.work)


def _ci(estimate: Optional[Estimate]) -> Optional[list[float]]:
    return estimate.interval() if estimate is not None else None


def _throughput(gpus: int, batch: Optional[int], step: Estimate) -> tuple[Optional[float], Optional[list[float]]]:
    if not batch:
        return None, None
    ci = step.interval()
    value = gpus * batch / step.mean
    return value, [gpus * batch / ci[1], gpus * batch / ci[0]] if ci and ci[0] > 0 else None


def measured_row(case: Case, one: Optional[Case], batch: Optional[int]) -> dict[str, Any]:
    """A measured count's figures; its efficiency against the one-GPU case's step time (1 for that case itself)."""
    efficiency = (Estimate(1.0, None, 0.0) if case is one else ratio(one.step, case.step)) if one is not None else None
    samples, samples_ci = _throughput(case.gpus, batch, case.step)
    return {"gpus": case.gpus, "basis": "measured", "step_time_s": case.step.mean, "step_time_ci": case.step.interval(),
            "scaling_efficiency": efficiency.mean if efficiency else None, "scaling_efficiency_ci": _ci(efficiency),
            "samples_per_s": samples, "samples_per_s_ci": samples_ci, "comm_share": case.comm_share,
            "comm_share_ci": case.comm_share_ci, "memory_fraction": case.memory_fraction,
            "memory_headroom_mb": case.headroom_mb, "util_pct": case.util_pct,
            "energy_per_sample_j": case.energy_per_sample_j, "source": case.source}


def predicted_row(fit: Fit, gpus: int, batch: Optional[int]) -> dict[str, Any]:
    step, efficiency = fit.step_time(gpus), fit.efficiency(gpus)
    samples, samples_ci = _throughput(gpus, batch, step)
    return {"gpus": gpus, "basis": f"predicted ({fit.model})", "step_time_s": step.mean, "step_time_ci": step.interval(),
            "scaling_efficiency": efficiency.mean, "scaling_efficiency_ci": efficiency.interval(),
            "samples_per_s": samples, "samples_per_s_ci": samples_ci,
            "alternatives_step_time_s": fit.alternatives(gpus)}


def bounds_row(workload: Workload, gpus: int, bandwidth: Optional[Bandwidth]) -> Optional[dict[str, Any]]:
    found = step_bounds(workload, gpus, bandwidth)
    if found is None:
        return None
    return {"best_s": found.best_s, "worst_s": found.worst_s, "worst_basis": found.worst_basis,
            "allreduce_s": found.allreduce_s}


def unmeasured_row(workload: Workload, fit: Fit, gpus: int, bandwidth: Optional[Bandwidth]) -> dict[str, Any]:
    """A count not measured: the fitted model's figures where the fit has a degree of freedom to
    spare (or the count lies between measured ones), else bounds alone."""
    bounds = bounds_row(workload, gpus, bandwidth)
    if fit.free > 0 or bounds is None:
        return {**predicted_row(fit, gpus, workload.per_gpu_batch), "bounds": bounds}
    return {"gpus": gpus, "basis": "bounded (two counts: no fit)", "step_time_s": None, "step_time_ci": None,
            "scaling_efficiency": None, "scaling_efficiency_ci": None, "samples_per_s": None,
            "samples_per_s_ci": None, "bounds": bounds}


def workload_figures(workload: Workload, fit: Optional[Fit], job: Job, targets: tuple[int, ...],
                     thresholds: Thresholds, why_no_fit: Optional[str], bandwidth: Optional[Bandwidth] = None) -> dict[str, Any]:
    batch = workload.per_gpu_batch
    ones = workload.at(1)
    rows = [measured_row(case, ones[0] if ones else None, batch) for case in sorted(workload.cases, key=lambda c: c.gpus)]
    unmeasured = sorted((set(targets) | {job.current_gpus}) - set(workload.counts))
    figures: dict[str, Any] = {"workload": workload.name, "model": workload.model, "hparams": workload.hparams,
                               "per_gpu_batch": batch, "devices": workload.devices, "measured_gpus": workload.counts}
    if fit is None:
        return {**figures, "rows": rows, "fit": None, "why_no_fit": why_no_fit, "decisions": []}
    rows += [unmeasured_row(workload, fit, gpus, bandwidth) for gpus in unmeasured]
    t1, c = fit.parameters
    asked = [target for target in targets if target != job.current_gpus]
    decisions = [decide(workload, fit, job, target, thresholds, bandwidth) for target in asked]
    return {**figures, "rows": sorted(rows, key=lambda r: r["gpus"]),
            "fit": {"model": fit.model, "formula": MODEL_TEXT[fit.model], "t1_s": t1, "c_s": c,
                    "fitted_to": workload.counts, "inflation": fit.inflation, "degrees_of_freedom": fit.free,
                    "c_held_at_zero": fit.bounded},
            "decisions": [decision_figures(d) for d in decisions]}


def decision_figures(d: Decision) -> dict[str, Any]:
    data = asdict(d)
    for key in ("step_ratio", "time_current_h", "time_target_h", "saved_h"):
        estimate = getattr(d, key)
        data[key] = None if estimate is None else {"value": estimate.mean, "ci": estimate.interval()}
    data["global_batch"] = {"current": d.global_batch[0], "target": d.global_batch[1]}
    data["learning_rate_rule"] = LR_RULE
    return data


def fitted(workload: Workload, model: str) -> tuple[Optional[Fit], Optional[str]]:
    from pytest_gpu_pairs.analysis.scaling.model import Point

    try:
        return Fit(model, tuple(Point(c.gpus, c.step) for c in workload.cases)), None
    except FitError as exc:
        return None, str(exc)


def figures(scaling: Scaling, args: argparse.Namespace) -> dict[str, Any]:
    job = job_of(args)
    thresholds = Thresholds(args.memory_threshold, args.util_threshold, args.max_iterations_done, args.max_global_batch)
    bandwidth = read_bandwidth(Path(args.bandwidth)) if args.bandwidth else None
    found = []
    for workload in scaling.workloads.values():
        if args.workload not in (None, workload.name, workload.model):
            continue
        fit, why = fitted(workload, args.model)
        found.append(workload_figures(workload, fit, job, args.gpus, thresholds, why, bandwidth))
    return {"model": args.model, "model_text": MODEL_TEXT[args.model], "intervals": INTERVAL_TEXT,
            "learning_rate_rule": LR_RULE, "job": asdict(job), "workloads": found, "skipped_records": scaling.skipped}


# --- the table ---------------------------------------------------------------------------------

def _num(value: Optional[float], digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def _with_ci(value: Optional[float], ci: Optional[list[float]], digits: int = 3) -> str:
    if value is None:
        return "-"
    return _num(value, digits) + (f" [{_num(ci[0], digits)}, {_num(ci[1], digits)}]" if ci else "")


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1%}"


def _comm(value: Optional[float], ci: Optional[list[float]]) -> str:
    """The all-reduce's share of a step; a step cannot be quicker than itself without its
    all-reduce, so a negative reading whose interval reaches 0 is shown as 0, the reading beside."""
    if value is None or value >= 0:
        return _percent(value)
    if ci is not None and ci[1] >= 0:
        return f"0 (read {value:.1%} [{ci[0]:.1%}, {ci[1]:.1%}])"
    return f"{value:.1%} ! (below 0)"


def _hours(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value / 24:.3g} d" if abs(value) >= 48 else f"{value:.3g} h"


def _hours_ci(estimate: Optional[dict[str, Any]]) -> str:
    if estimate is None:
        return "-"
    ci = estimate["ci"]
    return _hours(estimate["value"]) + (f" [{_hours(ci[0])}, {_hours(ci[1])}]" if ci else "")


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def workload_lines(w: dict[str, Any]) -> list[str]:
    lines = [f"{w['workload']}: {w['model']}, per-GPU batch {w['per_gpu_batch'] or '-'}, measured on "
             f"{', '.join(w['devices']) or '?'} at {', '.join(map(str, w['measured_gpus']))} GPU(s)"]
    if w["fit"] is None:
        lines.append(f"  no prediction: {w['why_no_fit']}")
    else:
        f = w["fit"]
        held = ", held at 0: the measured step got shorter with more GPUs" if f.get("c_held_at_zero") else ""
        lines.append(f"  model {f['model']}: {f['formula']}; fitted to {', '.join(map(str, f['fitted_to']))} GPU(s) "
                     f"({f.get('degrees_of_freedom', 0)} degree(s) of freedom): t1 {_num(f['t1_s'], 4)} s, "
                     f"c {_num(f['c_s'], 3)} s{held}")
    header = ["GPUs", "basis", "step s [95 %]", "efficiency", "samples/s", "comm", "mem/GPU", "bounds step s (best, worst)",
              "other models (step s)"]
    body = [[str(r["gpus"]), r["basis"], _with_ci(r["step_time_s"], r["step_time_ci"], 4),
             _with_ci(r["scaling_efficiency"], r["scaling_efficiency_ci"]), _with_ci(r["samples_per_s"], r["samples_per_s_ci"]),
             _comm(r.get("comm_share"), r.get("comm_share_ci")), _percent(r.get("memory_fraction")),
             _bounds(r.get("bounds")),
             ", ".join(f"{k} {_num(v, 4)}" for k, v in (r.get("alternatives_step_time_s") or {}).items())]
            for r in w["rows"]]
    lines += ["  " + line for line in _table([header] + body)]
    for d in w["decisions"]:
        lines += decision_lines(d)
    return lines


def _bounds(bounds: Optional[dict[str, Any]]) -> str:
    return "-" if bounds is None else f"{_num(bounds['best_s'], 4)} to {_num(bounds['worst_s'], 4)}"


def _criterion_value(c: dict[str, Any]) -> str:
    if c["value"] is None:
        return "-"
    if c["unit"] == "fraction":
        return _percent(c["value"])
    if c["unit"] == "h":
        ci = c["interval"]
        return _hours(c["value"]) + (f" [{_hours(ci[0])}, {_hours(ci[1])}]" if ci else "")
    return f"{c['value']:g}"


def _threshold(c: dict[str, Any]) -> str:
    sign = "<" if c["below"] else ">"
    value = _percent(c["threshold"]) if c["unit"] == "fraction" else _hours(c["threshold"]) if c["unit"] == "h" else f"{c['threshold']:g}"
    return f"{sign} {value}"


def decision_lines(d: dict[str, Any]) -> list[str]:
    current, target = d["current_gpus"], d["target_gpus"]
    ratio_ = d["step_ratio"]
    batch = d["global_batch"]
    fitted = (f"step time x{_with_ci(ratio_['value'], ratio_['ci'])}; " if ratio_ else "no fitted step time (two counts); ")
    lines = [f"  decision: {current} -> {target} GPUs ({d['basis']})",
             f"    {fitted}time to finish on {current}: {_hours_ci(d['time_current_h'])}, on {target}: "
             f"{_hours_ci(d['time_target_h'])}",
             f"    memory per GPU on {target}: {_percent(d['memory_fraction'])} ({d['memory_basis']})"
             + (f", headroom {d['headroom_mb']:.0f} MB" if d["headroom_mb"] is not None else "")]
    if batch["current"]:
        factor = batch["target"] / batch["current"]
        rates = d["learning_rates"]
        rate_text = (f": lr {rates['linear']:.3g} (linear) or {rates['square_root']:.3g} (square root)" if rates else "")
        lines.append(f"    global batch {batch['current']} -> {batch['target']} (x{factor:.3g}): learning rate x{factor:.3g} "
                     f"by the linear rule with warm-up, x{math.sqrt(factor):.3g} by the square-root rule{rate_text}")
    bounds = d.get("bounds")
    if bounds is not None:
        best, worst = bounds["step_ratio"]
        energy = bounds["energy_per_sample_j"]
        lines.append(f"    beyond the measured counts: step time x{best:.3g} (best) to x{worst:.3g} (worst: "
                     f"{bounds['worst_basis']})" + (f"; energy per sample {energy[0]:.3g} to {energy[1]:.3g} J"
                                                    if energy else ""))
    header = ["criterion", "value", "threshold", "verdict", "basis"]
    body = [[c["name"], _criterion_value(c), _threshold(c), c["verdict"], c["why"]] for c in d["criteria"]]
    lines += ["    " + line for line in _table([header] + body)]
    lines.append(f"    recommendation: {_recommendation_text(d)} ({'; '.join(d['reasons'])})")
    return lines


def _recommendation_text(d: dict[str, Any]) -> str:
    if d["recommendation"] == "switch":
        return f"switch to {d['target_gpus']} GPUs"
    if d["recommendation"] == "stay":
        return f"stay on {d['current_gpus']} GPU(s)"
    return "uncertain"


def table_lines(data: dict[str, Any]) -> list[str]:
    if not data["workloads"]:
        return ["no scaling cases in the results (design \"scaling\"): nothing to predict"]
    lines = []
    for w in data["workloads"]:
        lines += workload_lines(w) + [""]
    lines += [f"intervals: {data['intervals']}", f"learning rate: {data['learning_rate_rule']}"]
    if data["skipped_records"]:
        lines.append(f"left out: {data['skipped_records']} failed or incomplete scaling record(s)")
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        scaling = read_scaling(args.results)
    except StoreError as exc:
        print(f"gpu-pairs scale: {exc}", file=sys.stderr)
        return 2
    try:
        data = figures(scaling, args)
    except SettingsError as exc:
        print(f"gpu-pairs scale: {exc}", file=sys.stderr)
        return 2
    if args.workload is not None and not data["workloads"]:
        print(f"gpu-pairs scale: no workload {args.workload!r} in the results "
              f"(there: {', '.join(w.name for w in scaling.workloads.values()) or 'none'})", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print("\n".join(table_lines(data)))
    return 0
