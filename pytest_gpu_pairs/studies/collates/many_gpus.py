"""The two-GPU check, collated: speedup of two GPUs over one, every case's figures on one GPU
against two (do the GPUs disturb each other?), and the planner's predicted makespan against the
measured one. Reads each run's results folder (or its benchmark JSON) through the store, its wall
time (``wall-one.json`` as the committed study keeps it, else the study runner's ``runs.json``),
``plan.json`` and, if kept, ``plan-on-device.json`` (the plan made before the runs); the summary is
``many_gpus.json`` and ``many_gpus.md``.

    gpu-pairs study collect many_gpus --out reports/reference/many_gpus

A figure agrees between the runs when its 95 % intervals (interleaved cases) overlap; an epoch case
has no interval, so its figures are listed with their relative difference and not judged. A figure
missing from either run is reported as not compared, never as agreeing. The pair's power is judged,
not its energy per phase: a phase lasts a whole multiple of ``phase_s`` chosen from the jobs'
cadence, which can differ between runs. Each job's absolute step rate is listed beside them,
unjudged: the ratios do not depend on the host's speed, the power of host-bound jobs does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.inputs import read_json
from pytest_gpu_pairs.record.store import load_run

FIGURES = ("concurrency_efficiency", "fg_slowdown", "bg_progress_ratio", "gpu_power_avg_w")
HOST_RATES = ("fg_steps_per_s", "bg_steps_per_s")  # not judged: how fast the host ran the jobs, for context
SPEEDUP_GOAL, PLAN_WITHIN = 1.9, 0.10


def _wall(folder: Path, run: str) -> Optional[float]:
    """The run's wall time where its pytest session ran to the end (exit 0, or 1: a case failed)."""
    path = folder / f"wall-{run}.json"
    if path.is_file():
        attempts = [read_json(path)]
    elif (folder / "runs.json").is_file():
        attempts = read_json(folder / "runs.json").get(run) or []
    else:
        return None
    ended = [a for a in attempts if isinstance(a, dict) and a.get("exit") in (0, 1)]
    return float(ended[-1]["wall_s"]) if ended else None


def _interval(record: dict[str, Any], key: str) -> Optional[tuple[float, float]]:
    ci = record.get(f"{key}_ci")
    return (float(ci[0]), float(ci[1])) if isinstance(ci, (list, tuple)) and len(ci) == 2 and None not in ci else None


def compare_case(one: dict[str, Any], two: dict[str, Any]) -> dict[str, Any]:
    figures = {}
    for key in FIGURES:
        a, b = one.get(key), two.get(key)
        if a is None or b is None:
            figures[key] = {"one": a, "two": b, "agree": None, "why": "missing in a run"}
            continue
        ia, ib = _interval(one, key), _interval(two, key)
        agree = None if ia is None or ib is None else (ia[0] <= ib[1] and ib[0] <= ia[1])
        figures[key] = {"one": a, "two": b, "one_ci": ia, "two_ci": ib, "agree": agree,
                        "rel_diff": (b - a) / a if a else None}
    for key in HOST_RATES:
        a, b = one.get(key), two.get(key)
        figures[key] = {"one": a, "two": b, "agree": None, "why": "context, not judged",
                        "rel_diff": (b - a) / a if a and b is not None else None}
    return figures


def _run(folder: Path, name: str):
    """A run's results folder, or its benchmark JSON where the folder did not come back."""
    return load_run(folder / name if (folder / name).is_dir() else folder / f"{name}.json")


def _predicted(path: Path) -> dict[int, float]:
    if not path.is_file():
        return {}
    return {row["gpus"]: row["makespan_s"] for row in read_json(path)["predictions"]}


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    return collate(folder)


def table(result: dict[str, Any]) -> str:
    return markdown(result)


def collate(folder: Path) -> dict[str, Any]:
    one, two = _run(folder, "one"), _run(folder, "two")
    predicted = _predicted(folder / "plan.json")
    first = _predicted(folder / "plan-on-device.json")
    one_s, two_s = _wall(folder, "one"), _wall(folder, "two")
    cases = {case_id: compare_case(one.records[case_id], two.records[case_id])
             for case_id in sorted(set(one.records) & set(two.records))}
    judged = [f["agree"] for c in cases.values() for f in c.values() if f["agree"] is not None]
    return {
        "one_gpu_s": one_s, "two_gpus_s": two_s,
        "speedup": one_s / two_s if one_s and two_s else None, "speedup_goal": SPEEDUP_GOAL,
        "predicted_one_s": predicted.get(1), "predicted_two_s": predicted.get(2),
        "plan_error_two": (predicted[2] - two_s) / two_s if two_s and 2 in predicted else None,
        "plan_within": PLAN_WITHIN,
        "first_predicted_two_s": first.get(2),
        "first_plan_error_two": (first[2] - two_s) / two_s if two_s and 2 in first else None,
        "cases_only_in_one_run": sorted(set(one.records) ^ set(two.records)),
        "figures_judged": len(judged), "figures_agreeing": sum(judged), "cases": cases,
    }


def markdown(result: dict[str, Any]) -> str:
    def fmt(value, spec=".1f"):
        return "n/a" if value is None else format(value, spec)

    lines = ["# Two GPUs against one", "",
             f"- one GPU: {fmt(result['one_gpu_s'])} s (planned {fmt(result['predicted_one_s'])} s)",
             f"- two GPUs: {fmt(result['two_gpus_s'])} s (planned {fmt(result['predicted_two_s'])} s, "
             f"error {fmt(result['plan_error_two'], '+.1%')}; goal within ±{result['plan_within']:.0%})",
             f"- the plan made on the device before the runs, with the estimate of that time: "
             f"{fmt(result.get('first_predicted_two_s'))} s for two GPUs "
             f"(error {fmt(result.get('first_plan_error_two'), '+.1%')})",
             f"- speedup: {fmt(result['speedup'], '.2f')}x (goal at least {result['speedup_goal']}x)",
             f"- figures whose 95 % intervals overlap between the runs: {result['figures_agreeing']} of "
             f"{result['figures_judged']} judged", "",
             "| case | figure | one GPU | two GPUs | agree |", "| --- | --- | --- | --- | --- |"]
    for case_id, figures in result["cases"].items():
        for key, f in figures.items():
            agree = {True: "yes", False: "NO", None: "not judged"}[f["agree"]]
            lines.append(f"| {case_id} | {key} | {f['one']} | {f['two']} | {agree} |")
    return "\n".join(lines) + "\n"
