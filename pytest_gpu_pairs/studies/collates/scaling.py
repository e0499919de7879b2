"""The scaling study, collated: what ``gpu-pairs study run scaling`` left in its ``run/`` folder
becomes ``summary.json`` and a ``README.md`` with the commands, the commit and the figures.

    gpu-pairs study collect scaling --out reports/reference/scaling

Reads ``run/scale.json`` (``gpu-pairs scale --json`` over the study's results, predicting 4 and 6
GPUs), ``run/predecessor.json`` and ``run/predecessor_fits.json`` (the predecessor's job: 4 GPUs,
2.6 s per iteration, 9 days left, 93.5 % of each card in use; with its thresholds, and with the
memory criterion at the whole card), and the run's ``commit.txt``, ``device.txt``, ``card.txt`` and
``restart_min.txt``. ``summary.json`` holds ``measured_gpus``, per workload ``scaling_efficiency``
per count and ``predicted`` 4 and 6 with intervals, and the ``recommendation``, answered with the
large workload, the one like the predecessor's job. A figure missing from the inputs stays null.
Where ``notes.md`` (written by hand: what one measurement's figures mean) sits beside the README,
the README points to it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.inputs import SettingsError, read_capped, read_json
from pytest_gpu_pairs.record.store import atomic_write_json, atomic_write_text

RUN = "run"  # the study's sessions and the files its steps wrote

PREDICTED = (4, 6)
NOTES = "notes.md"  # written by hand beside the README: the reading of one measurement
PROXY = "sc02-vulberta_mlp"  # one sample per GPU, fp16, near the card's memory limit: the predecessor's kind of job
PREDECESSOR = {"current_gpus": 4, "target_gpus": 6, "step_time_s": 2.6, "remaining_hours": 9 * 24.0,
               "memory_fraction": 0.935, "card": "32 GB", "precision": "fp16", "per_gpu_batch": 1}


def _json(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
        raise SettingsError(path, "$.workloads", "expected gpu-pairs scale --json output")
    return data


def _text(path: Path) -> Optional[str]:
    """A one-line fact a step of the run wrote (the commit, the card); None where there is none."""
    try:
        return read_capped(path, 1 << 16).decode("utf-8", errors="replace").strip() or None
    except OSError:
        return None


def _interval(value: Any, ci: Any) -> dict[str, Any]:
    return {"value": value, "ci": ci}


def workload_summary(workload: dict[str, Any]) -> dict[str, Any]:
    rows = {row["gpus"]: row for row in workload["rows"]}
    measured = {str(n): row for n, row in rows.items() if row["basis"] == "measured"}
    return {"model": workload["model"], "hparams": workload["hparams"], "per_gpu_batch": workload["per_gpu_batch"],
            "measured_gpus": workload["measured_gpus"], "fit": workload["fit"], "why_no_fit": workload.get("why_no_fit"),
            "scaling_efficiency": {n: _interval(r["scaling_efficiency"], r["scaling_efficiency_ci"])
                                   for n, r in measured.items()},
            "step_time_s": {n: _interval(r["step_time_s"], r["step_time_ci"]) for n, r in measured.items()},
            "comm_share": {n: _interval(r["comm_share"], r["comm_share_ci"]) for n, r in measured.items()},
            "memory_fraction": {n: r["memory_fraction"] for n, r in measured.items()},
            "energy_per_sample_j": {n: r["energy_per_sample_j"] for n, r in measured.items()},
            "predicted": {str(n): _predicted(rows.get(n)) for n in PREDICTED}}


def _predicted(row: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    if row is None:
        return None
    return {"basis": row["basis"], "step_time_s": _interval(row["step_time_s"], row["step_time_ci"]),
            "scaling_efficiency": _interval(row["scaling_efficiency"], row["scaling_efficiency_ci"]),
            "samples_per_s": _interval(row["samples_per_s"], row["samples_per_s_ci"]),
            "other_models_step_time_s": row.get("alternatives_step_time_s")}


def answer(workload: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The decision for the predecessor's 4 -> 6, as ``gpu-pairs scale`` gave it."""
    decision = next((d for d in workload["decisions"] if d["target_gpus"] == PREDECESSOR["target_gpus"]), None)
    if decision is None:
        return None
    return {"recommendation": decision["recommendation"], "reasons": decision["reasons"],
            "time_to_finish_h": {"current": decision["time_current_h"], "target": decision["time_target_h"]},
            "time_saved_h": decision["saved_h"], "step_time_ratio": decision["step_ratio"],
            "memory_fraction_on_target": decision["memory_fraction"], "memory_basis": decision["memory_basis"],
            "criteria": [{k: c[k] for k in ("name", "value", "interval", "threshold", "below", "verdict", "why")}
                         for c in decision["criteria"]]}


def collate(folder: Path) -> dict[str, Any]:
    scale = _json(folder / "scale.json")
    thresholds, fits = _json(folder / "predecessor.json"), _json(folder / "predecessor_fits.json")
    workloads = {w["workload"]: workload_summary(w) for w in scale["workloads"]}
    answers = {w["workload"]: answer(w) for w in thresholds["workloads"]}
    answers_fit = {w["workload"]: answer(w) for w in fits["workloads"]}
    proxy = PROXY if PROXY in answers else next(iter(answers), None)
    measured = sorted({n for w in workloads.values() for n in w["measured_gpus"]})
    return {"study": "scaling", "commit": _text(folder / "commit.txt"), "device": _text(folder / "device.txt"),
            "emulated_card_mb": _number(_text(folder / "card.txt")), "measured_gpus": measured,
            "model": scale["model"], "model_text": scale["model_text"], "intervals": scale["intervals"],
            "learning_rate_rule": scale["learning_rate_rule"], "workloads": workloads,
            "predecessor": {**PREDECESSOR, "restart_cost_min": _number(_text(folder / "restart_min.txt")),
                            "answers_with_its_thresholds": answers, "answers_with_memory_at_the_whole_card": answers_fit},
            "recommendation": _recommendation(proxy, answers.get(proxy), answers_fit.get(proxy))}


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _recommendation(proxy: Optional[str], strict: Optional[dict[str, Any]],
                    fits: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    if proxy is None or strict is None:
        return None
    return {"workload": proxy, "with_the_predecessors_thresholds": strict["recommendation"],
            "reasons": strict["reasons"], "with_memory_at_the_whole_card": fits["recommendation"] if fits else None,
            "time_saved_h": strict["time_saved_h"], "memory_fraction_on_6": strict["memory_fraction_on_target"],
            "memory_basis": strict["memory_basis"]}


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def _ci(entry: Optional[dict[str, Any]], digits: int = 3) -> str:
    if not entry or entry.get("value") is None:
        return "-"
    ci = entry.get("ci")
    return _fmt(entry["value"], digits) + (f" [{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]" if ci else "")


def readme(summary: dict[str, Any], notes: Optional[str] = None) -> str:
    card = summary["emulated_card_mb"]
    devices = (summary["device"] or "unknown").splitlines()
    lines = ["# Scaling study: one job on 1 and 2 GPUs, and the predecessor's 4-versus-6 question", "",
             f"Commit {summary['commit'] or 'unknown'}; emulated card: "
             f"{'the whole card' if card is None else f'{card:.0f} MB'}. Devices (index, name, memory, driver, UUID):",
             "", *[f"- {line}" for line in devices], "", *COMMANDS, "", f"Model: {summary['model_text']}. {summary['intervals']}.", "",
             "| workload | GPUs | basis | step time s | scaling efficiency | comm share | memory per GPU |",
             "|---|---|---|---|---|---|---|"]
    for name, w in summary["workloads"].items():
        for n in w["measured_gpus"]:
            key = str(n)
            lines.append(f"| {name} | {n} | measured | {_ci(w['step_time_s'].get(key), 4)} | "
                         f"{_ci(w['scaling_efficiency'].get(key))} | {_ci(w['comm_share'].get(key))} | "
                         f"{_fmt(w['memory_fraction'].get(key))} |")
        for key, p in w["predicted"].items():
            if p is not None:
                lines.append(f"| {name} | {key} | {p['basis']} | {_ci(p['step_time_s'], 4)} | "
                             f"{_ci(p['scaling_efficiency'])} | | |")
    rec = summary["recommendation"]
    lines += ["", "## The predecessor's question", ""]
    if rec is None:
        lines.append("Not answered: no decision in the inputs.")
    else:
        lines += [f"With {rec['workload']} standing in for the predecessor's job (4 GPUs, 2.6 s per iteration, 9 days "
                  f"left, 93.5 % of each card; restart cost {_fmt(summary['predecessor']['restart_cost_min'])} min):",
                  "", f"- with the predecessor's thresholds: **{rec['with_the_predecessors_thresholds']}** "
                  f"({'; '.join(rec['reasons'])})",
                  f"- with the memory criterion at the whole card: **{rec['with_memory_at_the_whole_card']}**",
                  f"- time saved, hours: {_ci(rec['time_saved_h'])}; memory per GPU on 6: "
                  f"{_fmt(rec['memory_fraction_on_6'])} ({rec['memory_basis']})"]
    if notes:
        lines += ["", f"What these figures mean, and what they do not cover: `{notes}`."]
    return "\n".join(lines) + "\n"


COMMANDS = ("Commands (repository root, on a machine with two GPUs; the pilot, the emulated card's size and "
            "`gpu-pairs scale` are steps of the run):", "", "```",
            "gpu-pairs study run scaling              # results in gpu-pairs-studies/scaling/run; again to resume",
            "gpu-pairs study collect scaling --out gpu-pairs-studies/scaling",
            "```", "",
            "On the CPU (`--device cpu --scale 0.01`) the pilot is skipped and the study runs on the whole cards.")


def write(folder: Path, root: Path) -> str:
    summary = collate(folder / RUN)
    text = readme(summary, NOTES if (folder / NOTES).is_file() else None)
    atomic_write_json(folder / "summary.json", summary)
    atomic_write_text(folder / "README.md", text)
    return text
