"""The unseen pairs' summary: each measured pair beside what the planner said of it, before and now.

Each pair the study measured (``timeslice/``, ``mps/``) stands beside what ``gpu-pairs plan`` said of
it before any case ran (``plan.json``, which ``gpu-pairs study run`` writes for the GPU it finds) and
what the planner of this commit predicts for the card it ran on.

    gpu-pairs study run planner_validation_unseen       # on a GPU: plan.json, then the pairs time-sliced and under MPS
    gpu-pairs study collect planner_validation_unseen --out reports/reference/planner_validation/unseen

Records are read through the store; a card the package carries no table for gets no prediction of
this commit, only the plan made before the run. Pairs the plan named and no session measured are
listed as not measured.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.planning.cards import card_for_gpu
from pytest_gpu_pairs.planning.measured import read_measured
from pytest_gpu_pairs.planning.predict import Figure, Planner
from pytest_gpu_pairs.planning.validate import held_out_row
from pytest_gpu_pairs.record.store import case_result_paths, machine_from_session, read_session
from pytest_gpu_pairs.studies.collates.planner_validation import PLAN, planned, planned_text

FOLDERS = ("timeslice", "mps")
BEFORE = "before"  # before/<session>/plan.json: the plan of a runner that measured that session alone
NO_TABLE = "the package carries no table for this GPU: only the plan made before the run"


def _sessions(folder: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each of the study's session folders that holds cases, with the machine its session.json names."""
    found = {}
    for name in FOLDERS:
        path = folder / name
        if case_result_paths(path):
            session = read_session(path)
            found[name] = (path, machine_from_session(session) if session is not None else {})
    return found


def plan_before(folder: Path, session: str) -> dict[tuple[tuple[str, ...], str], dict[str, Any]]:
    """The plan a session was measured against: its own runner's (``before/<session>/plan.json``),
    where each mechanism ran on a GPU of its own with its own profile step, else the study's."""
    own = folder / BEFORE / session
    return planned(own) if (own / PLAN).exists() else planned(folder)


def _any_plan(folder: Path) -> bool:
    return (folder / PLAN).exists() or any((folder / BEFORE / name / PLAN).exists() for name in FOLDERS)


def planner_for(gpu: Optional[str]) -> Optional[Planner]:
    """The planner of the package's table for this GPU, None where the package has none."""
    card = card_for_gpu(gpu)
    return Planner(card.table(), card.pairs().measured) if card else None


def _predicted(planner: Optional[Planner], models: tuple[str, ...], sharing: str) -> Figure:
    """This commit's figure for a pair, or for a group by its rule (no measured group teaches it)."""
    if planner is None:
        return Figure(None, None, None, NO_TABLE)
    if len(models) == 2:
        return planner.efficiency((models[0], models[1]), sharing)
    return planner.group_efficiency(models, sharing, measured=False)


def measured_pairs(sessions: dict[str, tuple[Path, dict[str, Any]]],
                   before: dict[str, dict[tuple[tuple[str, ...], str], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every pair and group the sessions measured, with this commit's prediction and the plan made before
    each session (``before``, by session); a measured mean above the number of jobs (noise around sharing
    for free) reads as that number."""
    rows = []
    for name, (path, machine) in sessions.items():
        gpu = machine.get("gpu_name")
        planner = planner_for(gpu)
        measured = read_measured([path])
        for pair in sorted([*measured.pairs.values(), *measured.groups.values()], key=lambda p: (p.models, p.sharing)):
            if pair.efficiency is None:
                continue
            row = held_out_row(pair, "pair" if len(pair.models) == 2 else "nothing",
                               _predicted(planner, pair.models, pair.sharing))
            rows.append({**row.as_dict(), "gpu": gpu,
                         "planned_before": before[name].get((tuple(sorted(pair.models)), pair.sharing))})
    return rows


def _waiting_plan(before: dict[str, dict[tuple[tuple[str, ...], str], dict[str, Any]]],
                  key: tuple[tuple[str, ...], str]) -> dict[str, Any]:
    """A pair not measured yet, as the plan of the session named for its mechanism says, else any plan."""
    own = before.get(key[1], {})
    return own[key] if key in own else next(plan[key] for plan in before.values() if key in plan)


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    sessions = _sessions(folder)
    before = {name: plan_before(folder, name) for name in FOLDERS}
    rows = measured_pairs(sessions, before)
    done = {(tuple(sorted(r["pair"])), r["sharing"]) for r in rows}
    every = {key for plan in before.values() for key in plan}
    waiting = [{"pair": list(key[0]), "sharing": key[1], "planned_before": _waiting_plan(before, key)}
               for key in sorted(every) if key not in done]
    on_cpu = [name for name, (_, machine) in sessions.items() if machine.get("device") == "cpu"]
    return {"plan": _any_plan(folder), "measured": rows, "not_measured": waiting, "on_cpu": on_cpu}


def _error(row: dict[str, Any]) -> str:
    return "-" if row["error"] is None else f"{100 * row['error']:.1f} %"


def _measured_row(p: dict[str, Any]) -> str:
    ci = f" [{p['measured_ci'][0]:.3f}, {p['measured_ci'][1]:.3f}]" if p["measured_ci"] else ""
    interval = f" [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]" if p["interval"] else ""
    predicted = "-" if p["predicted"] is None else f"{p['predicted']:.3f}{interval}"
    return (f"| {'+'.join(p['pair'])} | {p['sharing']} | {p['gpu'] or '-'} | {p['measured']:.3f}{ci} | "
            f"{planned_text(p['planned_before'])} | {predicted} | {_error(p)} | {p['covered']} |")


def table(summary: dict[str, Any], title: str = "Pairs the planner never saw",
          study: str = "planner_validation_unseen") -> str:
    lines = [f"# {title}", ""]
    if not summary["plan"]:
        lines += [f"No plan.json: `gpu-pairs study run {study}` writes it before any case.", ""]
    lines += ["| pair | mechanism | GPU | measured [95 %] | planned before the run [90 %] | this commit [90 %] | "
              "error | covered |", "|---|---|---|---|---|---|---|---|"]
    lines += [_measured_row(p) for p in summary["measured"]]
    if summary["on_cpu"]:
        lines += ["", f"Sessions on the CPU ({', '.join(summary['on_cpu'])}): their pairs shared no GPU, so no "
                  "GPU-sharing figure was measured to set beside the plan."]
    if summary["not_measured"]:
        lines += ["", "Planned, not measured yet: " + ", ".join(
            f"{'+'.join(p['pair'])} ({p['sharing']}, {planned_text(p['planned_before'])})" for p in summary["not_measured"])]
    return "\n".join(lines) + "\n"
