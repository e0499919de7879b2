"""The scaling study, collated: what ``gpu-pairs study run scaling`` left in its ``run/`` folder
becomes ``summary.json`` and a ``README.md``, from the raw results alone.

    gpu-pairs study collect scaling --out reports/reference/scaling

Reads the scaling records of ``run/results`` (through ``analysis.scaling.measured``), the host's
all-reduce (``run/bandwidth.json``), the convergence branches (``run/convergence.json`` and
``run/convergence/``) and the facts the run wrote (commit, devices, topology). The predecessor's
question is answered with the same code ``gpu-pairs scale`` runs, for the stand-in without a
loader worker (sc01: the predecessor's ``workers_per_gpu 0``), with sc02 (one worker per GPU) as
its first alternative. Every figure says whether it was measured or derived, and from what.
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.analysis.scaling import alternatives
from pytest_gpu_pairs.analysis.scaling.command import DEFAULT_MODEL, figures
from pytest_gpu_pairs.analysis.scaling.convergence import compare, read_branches
from pytest_gpu_pairs.analysis.scaling.decision import Thresholds
from pytest_gpu_pairs.analysis.scaling.measured import Case, Scaling, Workload, read_scaling
from pytest_gpu_pairs.inputs import SettingsError, read_capped, read_json
from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text, load_run

RUN = "run"
MAIN, WORKER = "sc01-dense_aspp", "sc02-dense_aspp"


@dataclass(frozen=True)
class Predecessor:
    """Its note on moving from 4 to 6 GPUs (shared/seed-docs), in its own figures."""

    current_gpus: int = 4
    target_gpus: int = 6
    card_memory_mb: int = 32768
    memory_fraction: float = 0.935
    step_time_s: float = 2.6
    data_time_s: float = 0.44
    iterations_per_epoch: int = 30895
    epochs: int = 10
    remaining_hours: float = 216.0
    utilization: tuple[float, float] = (0.96, 1.00)
    iterations_done: int = 350
    global_batch: int = 4
    learning_rate: float = 2e-5
    restart_cost_min: float = 30.0
    loader_workers: int = 0
    speed_up_guess: tuple[float, float] = (1.3, 1.4)
    loader_gain_guess: tuple[float, float] = (0.05, 0.10)


PREDECESSOR = Predecessor()
VAL_SET_FRACTION = 2000 / 20210  # ADE20K's validation set over its training set: the job's own was not given
STABILITY = "the loss fell steadily (6.9 to 5.7): do not break what works"


def _text(path: Path) -> Optional[str]:
    try:
        return read_capped(path, 1 << 16).decode("utf-8", errors="replace").strip() or None
    except OSError:
        return None


def _pair(value: Optional[tuple[float, float]]) -> Optional[list[float]]:
    return None if value is None else [min(value), max(value)]


def _case(workload: Optional[Workload], gpus: int) -> Optional[Case]:
    cases = workload.at(gpus) if workload is not None else []
    return cases[0] if cases else None


def _job_args(results: Path, bandwidth: Path, memory_threshold: float) -> argparse.Namespace:
    p = PREDECESSOR
    return argparse.Namespace(
        results=[str(results)], current_gpus=p.current_gpus, gpus=(p.target_gpus,), remaining_steps=None,
        remaining_hours=p.remaining_hours, work="samples", restart_cost_min=p.restart_cost_min,
        step_time_s=p.step_time_s, memory_fraction=p.memory_fraction, card_memory_mb=p.card_memory_mb,
        utilization=p.utilization[0], iterations_done=p.iterations_done, learning_rate=p.learning_rate,
        memory_threshold=memory_threshold, util_threshold=Thresholds.utilization,
        max_iterations_done=Thresholds.max_iterations_done, max_global_batch=Thresholds.max_global_batch,
        model=DEFAULT_MODEL, workload=None, json=True, bandwidth=str(bandwidth) if bandwidth.exists() else None)


def _decision(data: dict[str, Any], workload: str) -> Optional[dict[str, Any]]:
    found = next((w for w in data["workloads"] if w["workload"] == workload), None)
    return next((d for d in found["decisions"] if d["target_gpus"] == PREDECESSOR.target_gpus), None) if found else None


def measured_rows(scaling: Scaling) -> dict[str, dict[str, Any]]:
    """Per workload and GPU count, every measured figure the README shows."""
    rows: dict[str, dict[str, Any]] = {}
    for name, workload in sorted((w.name, w) for w in scaling.workloads.values()):
        one = _case(workload, 1)
        rows[name] = {str(c.gpus): {
            "step_time_s": c.step.mean, "step_time_ci": c.step.interval(),
            "scaling_efficiency": (one.step.mean / c.step.mean) if one is not None else None,
            "data_share": c.data_share, "comm_share": c.comm_share, "no_sync_step_time_s": c.no_sync_step_s,
            "memory_fraction": c.memory_fraction, "util_pct": c.util_pct, "energy_per_sample_j": c.energy_per_sample_j,
            "val_s_per_sample": c.val_s_per_sample} for c in sorted(workload.cases, key=lambda c: c.gpus)}
    return rows


def memory_by_phase(results: Path) -> dict[str, Any]:
    """Each case's allocator peaks per stretch and the stretch that set the peak, from its record."""
    found = {}
    for case_id, record in sorted(load_run(results).records.items()):
        if record.design == "scaling":
            found[case_id] = {"by_phase_mb": record.peak_mem_allocated_by_phase_mb, "peak_phase": record.peak_mem_phase,
                              "reserved_per_gpu_mb": record.peak_mem_reserved_per_gpu_mb,
                              "nvml_per_gpu_mb": record.peak_vram_per_gpu_mb}
    return found


def energy_to_solution(main: Workload, decision: dict[str, Any]) -> dict[str, Any]:
    """The predecessor's remaining samples at the stand-in's energy per sample on 4 GPUs (measured)
    and on 6 (bounded from 4's power per GPU), on these H200s."""
    p = PREDECESSOR
    samples = p.remaining_hours * 3600.0 / p.step_time_s * p.global_batch
    four = _case(main, p.current_gpus)
    bounds = decision.get("bounds") or {}
    six = bounds.get("energy_per_sample_j")
    now = four.energy_per_sample_j if four is not None else None
    return {"samples": samples, "basis": "the stand-in's energy per sample on these H200s (all GPUs' NVML counters "
            "over the measured steps, idle power included); 6 GPUs bounded at 4's power per GPU",
            "energy_per_sample_j": {"4": now, "6": _pair(six)},
            "kwh": {"4": alternatives.energy_to_solution_kwh(samples, now) if now is not None else None,
                    "6": [alternatives.energy_to_solution_kwh(samples, e) for e in sorted(six)] if six else None},
            "ratio_6_to_4": _pair(bounds.get("energy_ratio"))}


def alternatives_figures(main: Workload, worker: Optional[Workload], decision: dict[str, Any]) -> dict[str, Any]:
    p = PREDECESSOR
    ratios = tuple(decision["bounds"]["step_ratio"]) if decision.get("bounds") else (1.0, 1.0)
    epoch_h = p.iterations_per_epoch * p.step_time_s / 3600.0
    restart_h = p.restart_cost_min / 60.0
    lost_h = p.iterations_done * p.step_time_s / 3600.0
    now = alternatives.switch_savings("now", p.remaining_hours, 0.0, lost_h, restart_h, p.current_gpus,
                                      p.target_gpus, ratios)
    later = alternatives.switch_savings("after epoch 1, from its checkpoint", p.remaining_hours,
                                        epoch_h - lost_h, 0.0, restart_h, p.current_gpus, p.target_gpus, ratios)
    gains = {}
    for gpus in (1, 2, 4):
        without, with_worker = _case(main, gpus), _case(worker, gpus)
        if without is not None and with_worker is not None:
            gain = alternatives.loader_gain(without, with_worker)
            gains[str(gpus)] = {"value": gain.mean, "ci": gain.interval()}
    four = _case(main, p.current_gpus)
    val_share = alternatives.validation_share(four, VAL_SET_FRACTION) if four is not None else None
    data_share = p.data_time_s / p.step_time_s
    return {
        "switch": [{"when": s.when, "wait_h": s.wait_h, "lost_h": s.lost_h, "saved_h": list(s.saved_h)}
                   for s in (now, later)],
        "loader_worker": {"measured_step_saved": gains, "predecessor_guess": p.loader_gain_guess,
                          "predecessor_data_share": data_share,
                          "predecessor_saved_h_at_most": p.remaining_hours * data_share,
                          "basis": "measured: one worker per GPU against none, same counts, same job; the "
                                   "predecessor's step can lose at most its data time (0.44 of 2.6 s) when a worker "
                                   "hides it, as it hid 98 % or more of the stand-in's"},
        "validation": {"val_set_fraction": VAL_SET_FRACTION, "share_of_epoch_per_pass": val_share,
                       "saved_h_validating_every_second_epoch": (p.remaining_hours * val_share / (1 + val_share) / 2
                                                                 if val_share is not None else None),
                       "basis": "derived: the stand-in's measured time per validated sample on 4 GPUs over its time "
                                "per trained sample, times a validation set of ADE20K's share of its training set "
                                "(the job's own was not given)"}}


def _memory_reading(change: Optional[float]) -> str:
    if change is None:
        return "the stand-in's memory per GPU was not measured on 2 and 4 GPUs"
    grew = "did not grow" if abs(change) < 0.005 else f"changed by {change:+.1%} of the card"
    return (f"the job fits its card at {PREDECESSOR.memory_fraction:.1%}; the stand-in's memory per GPU {grew} from 2 "
            "to 4 GPUs, the counts with a peer, where the all-reduce's buffers already are")


def criteria_table(decision: dict[str, Any], main: Workload, convergence: dict[str, Any]) -> list[dict[str, Any]]:
    """The predecessor's own five criteria (and its batch rule), each with its value, the measured
    counterpart where one exists, and the verdict by its rule."""
    p = PREDECESSOR
    four, two = _case(main, 4), _case(main, 2)
    by_name = {c["name"]: c for c in decision["criteria"]}
    linear = convergence.get("linear", {}).get("mean_loss_minus_current", {})
    change = (four.memory_fraction - two.memory_fraction) if four and two and four.memory_fraction is not None \
        and two.memory_fraction is not None else None
    return [
        {"criterion": "memory per GPU", "rule": "< 85 %", "predecessor": p.memory_fraction,
         "measured": {"stand_in_on_4": four.memory_fraction if four else None, "change_2_to_4": change},
         "verdict": by_name["memory per GPU on 6"]["verdict"],
         "reading": "fails the rule; " + _memory_reading(change)},
        {"criterion": "iterations done", "rule": "< 100", "predecessor": p.iterations_done, "measured": None,
         "verdict": by_name["iterations done"]["verdict"],
         "reading": "fails the rule; switching from the epoch-1 checkpoint loses no iterations"},
        {"criterion": "global batch", "rule": "< 4", "predecessor": p.global_batch, "measured": None,
         "verdict": by_name[f"global batch on {p.current_gpus}"]["verdict"],
         "reading": "fails the rule: the batch is not small; what 6 does to learning is the convergence row"},
        {"criterion": "GPU utilisation", "rule": "< 80 %", "predecessor": p.utilization,
         "measured": {"stand_in_on_4_pct": four.util_pct if four else None},
         "verdict": by_name[f"GPU utilisation on {p.current_gpus}"]["verdict"],
         "reading": "fails the rule; the stand-in keeps an H200 far less busy (its step waits on the host), which "
                    "is where it differs most from the job"},
        {"criterion": "training stability", "rule": "do not break a falling loss", "predecessor": STABILITY,
         "measured": {"mean_loss_linear_minus_current": linear}, "verdict": "not a threshold",
         "reading": "from one checkpoint, batch 6 at the linear rule's rate trained as batch 4 did per sample: "
                    + linear.get("verdict", "not measured")},
        {"criterion": "time saved vs restart", "rule": "> 30 min", "predecessor": "about 3 days (its guess)",
         "measured": {"saved_h": by_name["time saved vs restart cost"]["interval"]},
         "verdict": by_name["time saved vs restart cost"]["verdict"],
         "reading": "bounded from the measured 1, 2 and 4 GPUs"},
    ]


def collate(folder: Path) -> dict[str, Any]:
    results = folder / "results"
    scaling = read_scaling([results])
    workloads = {w.name: w for w in scaling.workloads.values()}
    if MAIN not in workloads:
        raise SettingsError(results, "$", f"expected the scaling records of {MAIN}")
    main, worker = workloads[MAIN], workloads.get(WORKER)
    data = figures(scaling, _job_args(results, folder / "bandwidth.json", Thresholds.memory))
    whole_card = figures(scaling, _job_args(results, folder / "bandwidth.json", 1.0))
    decision, decision_card = _decision(data, MAIN), _decision(whole_card, MAIN)
    if decision is None or decision_card is None:
        raise SettingsError(results, "$", "expected the records to decide 4 -> 6 GPUs from")
    plan = read_json(folder / "convergence.json")
    convergence = compare(read_branches(folder, plan)) if isinstance(plan, dict) else {}
    fit = next(w["fit"] for w in data["workloads"] if w["workload"] == MAIN)
    predicted = next(r for w in data["workloads"] if w["workload"] == MAIN for r in w["rows"] if r["gpus"] == 6)
    bandwidth = read_json(folder / "bandwidth.json")
    return {
        "study": "scaling", "commit": _text(folder / "commit.txt"), "devices": _text(folder / "gpu.txt"),
        "card_memory_mb": PREDECESSOR.card_memory_mb, "measured_gpus": main.counts,
        "measured": measured_rows(scaling), "memory": memory_by_phase(results),
        "allreduce": {k: {"busbw_gb_s": v.get("busbw_gb_s"), "median_s": v.get("median_s")}
                      for k, v in bandwidth.get("counts", {}).items()} if isinstance(bandwidth, dict) else None,
        "gradient_bytes": bandwidth.get("bytes") if isinstance(bandwidth, dict) else None,
        "fit": fit, "predicted_6": predicted,
        "decision": {"with_the_predecessors_thresholds": decision["recommendation"], "reasons": decision["reasons"],
                     "with_memory_at_the_whole_card": decision_card["recommendation"],
                     "reasons_at_the_whole_card": decision_card["reasons"], "bounds": decision["bounds"],
                     "step_ratio_fit": decision["step_ratio"], "memory_fraction_on_6": decision["memory_fraction"],
                     "memory_basis": decision["memory_basis"], "learning_rates": decision["learning_rates"]},
        "criteria": criteria_table(decision, main, convergence),
        "energy_to_solution": energy_to_solution(main, decision),
        "alternatives": alternatives_figures(main, worker, decision),
        "convergence": {"plan": plan.get("plan") if isinstance(plan, dict) else None, "rules": convergence},
        "predecessor": asdict(PREDECESSOR),
    }


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"
    return str(value)


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1%}"


def _span(values: Optional[list[float]], digits: int = 3, unit: str = "") -> str:
    return "-" if not values else f"{_f(values[0], digits)}{unit} to {_f(values[1], digits)}{unit}"


def _ci(value: Optional[float], ci: Optional[list[float]], digits: int = 3) -> str:
    return _f(value, digits) + (f" [{_f(ci[0], digits)}, {_f(ci[1], digits)}]" if value is not None and ci else "")


def _measured_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| workload | GPUs | step ms [95 %] | efficiency | data share | no-sync step ms | comm share | "
             "memory of 32 GB | utilisation | J/sample | validation s/sample/GPU |", "|---" * 11 + "|"]
    for name, rows in summary["measured"].items():
        for gpus, r in rows.items():
            ci = r["step_time_ci"]
            lines.append(f"| {name} | {gpus} | {_ci(r['step_time_s'] * 1e3, [c * 1e3 for c in ci] if ci else None)} | "
                         f"{_f(r['scaling_efficiency'])} | {_pct(r['data_share'])} | "
                         f"{_f(r['no_sync_step_time_s'] * 1e3 if r['no_sync_step_time_s'] else None)} | "
                         f"{_pct(r['comm_share'])} | {_pct(r['memory_fraction'])} | {_f(r['util_pct'])} % | "
                         f"{_f(r['energy_per_sample_j'])} | {_f(r['val_s_per_sample'])} |")
    return lines


def _measured_text(measured: Optional[dict[str, Any]]) -> str:
    if not measured:
        return "-"
    parts = []
    for key, value in measured.items():
        if isinstance(value, dict):
            value = f"{_ci(value.get('mean'), value.get('ci'))}"
        elif isinstance(value, list):
            value = _span(value)
        parts.append(f"{key.replace('_', ' ')}: {_f(value)}")
    return "; ".join(parts)


def _criteria_lines(summary: dict[str, Any]) -> list[str]:
    lines = ["| criterion | its rule | its value | measured here | verdict by its rule | reading |", "|---" * 6 + "|"]
    for c in summary["criteria"]:
        value = c["predecessor"]
        shown = _span(list(value)) if isinstance(value, (list, tuple)) else _f(value)
        measured = _measured_text(c["measured"])
        lines.append(f"| {c['criterion']} | {c['rule']} | {shown} | {measured} | {c['verdict']} | {c['reading']} |")
    return lines


def _convergence_lines(summary: dict[str, Any]) -> list[str]:
    plan, rules = summary["convergence"]["plan"] or {}, summary["convergence"]["rules"]
    lines = [f"From one checkpoint ({_f(plan.get('checkpoint_samples'))} samples at global batch "
             f"{_f(plan.get('current_batch'))}), each branch trained {_f(plan.get('branch_samples'))} more samples, "
             f"evaluated every {_f(plan.get('eval_every'))} on {_f(plan.get('eval_samples'))} held-out scenes; seeds "
             f"{', '.join(map(str, plan.get('seeds') or []))} (the seed orders the data). Held-out loss, mean over "
             "seeds [95 %]; differences paired by seed:", "",
             "| rule | global batch | learning rate | loss at the end | mean loss over the branch | "
             "mean loss minus batch 4 | verdict |", "|---" * 7 + "|"]
    for rule, r in rules.items():
        diff = r.get("mean_loss_minus_current") or {}
        lines.append(f"| {rule} | {r['global_batch']} | {r['learning_rate']:.3g} | "
                     f"{_ci(r['final_loss']['mean'], r['final_loss']['ci'])} | "
                     f"{_ci(r['mean_loss']['mean'], r['mean_loss']['ci'])} | "
                     f"{_ci(diff.get('mean'), diff.get('ci'))} | {diff.get('verdict', '-')} |")
    return lines


PHASE_TEXT = {"start": "the first step (cuDNN's autotuning) and the warm-up", "train": "the timed training",
              "eval": "the validation", "after_eval": "the training after validation"}


def _memory_text(summary: dict[str, Any]) -> str:
    """Each stretch's highest allocator peak over the cases, and which stretch set the peak."""
    peaks: dict[str, float] = {}
    for entry in summary["memory"].values():
        for phase, mb in (entry["by_phase_mb"] or {}).items():
            peaks[phase] = max(peaks.get(phase, 0.0), mb)
    if not peaks:
        return "No allocator peaks were reported (a CPU run)."
    order = [k for k in PHASE_TEXT if k in peaks] + sorted(set(peaks) - set(PHASE_TEXT))
    top = max(peaks.values())
    highest = [PHASE_TEXT.get(k, k) for k in order if top - peaks[k] < 1.0]
    return ("Allocator peaks, the largest over the cases: " + "; ".join(f"{PHASE_TEXT.get(k, k)} {peaks[k]:.0f} MB"
                                                                        for k in order)
            + ". Highest" + (f": {highest[0]}" if len(highest) == 1 else f", within 1 MB of each other: {', '.join(highest)}")
            + " (`summary.json`, `memory`, has every case's).")


def _six_gpus(summary: dict[str, Any]) -> str:
    """The fit, where its prediction lies against the measured largest count, and the bounds."""
    fit, predicted, bounds = summary["fit"], summary["predicted_6"], summary["decision"]["bounds"]
    largest = summary["measured"][MAIN][str(max(summary["measured_gpus"]))]["step_time_s"]
    step = predicted.get("step_time_s")
    shape = (f", below the measured {max(summary['measured_gpus'])} GPUs' {largest * 1e3:.3g} ms: the points do not "
             "follow the model's shape" if step is not None and step < largest else "")
    others = predicted.get("alternatives_step_time_s") or {}
    text = (f"The ring model fitted to {', '.join(map(str, fit['fitted_to']))} GPUs ({fit['degrees_of_freedom']} degree(s) "
            f"of freedom) predicts {_ci(step * 1e3 if step else None, [c * 1e3 for c in predicted['step_time_ci'] or []] or None)}"
            f" ms on 6{shape}; " + ", ".join(f"{k} gives {v * 1e3:.3g} ms" for k, v in others.items()) + ". "
            f"The decision rests on bounds: a step on 6 is x{bounds['step_ratio'][0]:.3g} (no cost beyond "
            f"{max(summary['measured_gpus'])} GPUs) to x{bounds['step_ratio'][1]:.3g} ({bounds['worst_basis']}) the step "
            f"on {PREDECESSOR.current_gpus}.")
    transfer = bounds.get("allreduce_s")
    if transfer is not None:
        share = transfer / largest
        text += (f" The all-reduce's transfer alone takes {transfer * 1e3:.3g} ms on 6 at the slowest bus bandwidth "
                 f"measured, {share:.1%} of a step" + (": the link's bandwidth is not what limits this job." if share < 0.05
                                                      else "."))
    return text


def readme(summary: dict[str, Any]) -> str:
    d, a, e = summary["decision"], summary["alternatives"], summary["energy_to_solution"]
    switch = {s["when"]: s for s in a["switch"]}
    worker = a["loader_worker"]["measured_step_saved"].get("4") or {}
    lines = [
        "# The predecessor's 4-versus-6 GPU question, on a stand-in that resembles its job", "",
        f"Commit {summary['commit'] or 'unknown'}, on {len((summary['devices'] or '').splitlines())} NVIDIA H200s "
        "of one host (their links: `run/topology.txt`); each card emulated at the predecessor's 32 GB "
        "(`--gpu-pairs-gpu-memory-mb 32768`). Devices (name, UUID, driver, clocks, power limit, temperature):", "",
        *[f"- {line}" for line in (summary["devices"] or "unknown").splitlines()], "",
        "```", "gpu-pairs study run scaling                 # any machine; counts it lacks are skipped",
        "gpu-pairs study collect scaling --out reports/reference/scaling", "```", "",
        "The stand-in (`dense_aspp`): DeepLabv3, an ASPP head on a dilated ResNet-101 (output stride 8, "
        f"{summary['gradient_bytes'] / 4e6:.1f} M parameters, {summary['gradient_bytes'] / 1e6:.0f} MB of fp32 "
        "gradients), 600 x 600 inputs, fp16, one sample per GPU, its data pipeline (draw, random scale, crop, flip, "
        "photometric distortion, normalise) on the CPU in the training process as the job's `workers_per_gpu 0`. "
        "sc02 is the same job with one loader worker per GPU. Each case: 20 warm-up steps, 150 timed, a validation "
        "of 32 held-out samples shared among the ranks, 40 steps under `no_sync()` after it. `notes.md` says how "
        "close the stand-in is to the job and what each figure rests on.", "",
        "## Measured", "", *_measured_table(summary), "",
        "All-reduce of the gradients (NCCL, timed alone): bus bandwidth "
        + ", ".join(f"{k} GPUs {_f(v['busbw_gb_s'])} GB/s" for k, v in (summary["allreduce"] or {}).items())
        + ". " + _memory_text(summary), "",
        "## Six GPUs", "", _six_gpus(summary), "",
        "## The predecessor's decision", "",
        "Its job: 4 GPUs, 2.6 s per iteration (0.44 s data), 93.5 % of each 32 GB card, 96-100 % utilisation, 350 "
        "iterations done, about 9 days left; restart 30 min.", "",
        *_criteria_lines(summary), "",
        f"- **By its own thresholds: {d['with_the_predecessors_thresholds']}** ({'; '.join(d['reasons'])}).",
        f"- With memory judged against the whole card: **{d['with_memory_at_the_whole_card']}** "
        f"({'; '.join(d['reasons_at_the_whole_card'])}).",
        f"- Time saved switching now: {_span(switch['now']['saved_h'], unit=' h')}; after epoch 1 from its "
        f"checkpoint (22 h from now, nothing lost): {_span(switch['after epoch 1, from its checkpoint']['saved_h'], unit=' h')}"
        f" (its guess: 1.3-1.4x speed-up, about 3 days).",
        f"- One loader worker per GPU: the stand-in's step on 4 GPUs {_ci(worker.get('value'), worker.get('ci'))} "
        f"shorter; the job can save at most its data share, {a['loader_worker']['predecessor_data_share']:.0%} "
        f"({a['loader_worker']['predecessor_saved_h_at_most']:.0f} h of 216; its guess: 5-10 %).",
        f"- Validating every second epoch: {_f(a['validation']['saved_h_validating_every_second_epoch'])} h saved "
        f"({a['validation']['basis']}).",
        f"- Energy to solution for its remaining {e['samples']:.3g} samples, at the stand-in's energy per sample on "
        f"these H200s: {_f(e['kwh']['4'])} kWh on 4 GPUs, {_span(e['kwh']['6'])} kWh on 6 "
        f"(x{_span(e['ratio_6_to_4'])}).",
        f"- Global batch 4 to 6: learning rate {_f(d['learning_rates'].get('linear'))} by the linear rule or "
        f"{_f(d['learning_rates'].get('square_root'))} by the square-root rule (AdamW: square root).", "",
        "## Convergence: the larger global batch", "", *_convergence_lines(summary), "",
        "What this covers and what it does not: `notes.md`.",
    ]
    return "\n".join(lines) + "\n"


def write(folder: Path, root: Path) -> str:
    summary = collate(folder / RUN)
    text = readme(summary)
    atomic_write_json(folder / "summary.json", summary)
    atomic_write_text(folder / "README.md", text)
    return text
