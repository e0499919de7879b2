"""The faster-together probe: why the hyperparameter study's host-bound jobs stepped faster beside
each other than alone. DenseNet121 (hp01's B) beside MNIST (hp01's A), beside a keeper that keeps the
card a little busy and the host idle, and beside a spinner that keeps one CPU busy and leaves the card
alone; MNIST beside the spinner. Each case is measured by the default method, whose solo and pair
phases alternate every half second to a few seconds, so a host drifting over minutes cannot read as a
speed-up.

- A foreground slowdown whose 95 % interval lies wholly below 1 is a speed-up beside that companion;
  one wholly above 1, a slow-down; else no change the case could tell.
- Beside the spinner a speed-up is the host's (the card is left to the foreground), beside the keeper
  the card's; each phase's mean SM clock (alone, together) says whether the card clocked differently.
- The background's progress interval reads the same way the other way round (wholly above 1: faster).
- Each phase's slowest P-state and lowest PCIe link generation (alone, together) say whether the card
  or its link idled down beside one light job (records from before they were read show "-").
- The variant ``long`` (folder ``long-phases/``) measures hp01's pair with phases of about 30 s: an
  effect that takes longer than the main variant's phases to set in shows there only.

    gpu-pairs study collect hp_study_faster_together --out reports/reference/hp_study/faster-together
"""
from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import load_run
from pytest_gpu_pairs.studies.collates.default_method import card_of
from pytest_gpu_pairs.studies.collates.default_method_awake_probe import interval_cell, number_cell

RESULTS = ("probe", "long-phases")
FIGURES = ("fg_model", "bg_model", "failure", "n_rounds", "fg_solo_steps_per_s", "fg_solo_gpu_busy", "pair_gpu_busy",
           "fg_slowdown", "fg_slowdown_ci", "bg_progress_ratio", "bg_progress_ratio_ci", "concurrency_efficiency",
           "concurrency_efficiency_ci")


def verdict(ci: Any) -> Optional[str]:
    """What the foreground's slowdown interval says: faster, slower, or no change it could tell."""
    numbers = isinstance(ci, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ci)
    if not (numbers and len(ci) == 2):
        return None
    if ci[1] < 1.0:
        return "faster"
    if ci[0] > 1.0:
        return "slower"
    return "no change"


def pace_verdict(ci: Any) -> Optional[str]:
    """What a progress ratio's interval says (above 1: faster beside the other job)."""
    said = verdict(ci)
    return {"faster": "slower", "slower": "faster"}.get(said, said) if said else None


def pair_phase_s(record: Record) -> Optional[float]:
    """How long the pair phases lasted on average: the base ``phase_s`` grows to the steps a job takes."""
    spans = [phase["end"] - phase["start"] for phase in _phases(record)
             if phase.get("name") == "pair" and _number(phase.get("start")) and _number(phase.get("end"))]
    return statistics.fmean(spans) if spans else None


def _phases(record: Record) -> Iterator[dict[str, Any]]:
    """Every readable phase of every round (records on disk are read as they are)."""
    for one in record.get("rounds") or []:
        for phase in (one.get("phases") if isinstance(one, dict) else None) or []:
            if isinstance(phase, dict):
                yield phase


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def phase_clocks(record: Record) -> dict[str, Optional[float]]:
    """The mean SM clock over every round's phases of each kind: the foreground alone, the
    background alone, both together."""
    by_name: dict[str, list[float]] = {}
    for phase in _phases(record):
        if _number(phase.get("sm_clock_mhz")):
            by_name.setdefault(str(phase.get("name")), []).append(float(phase["sm_clock_mhz"]))
    return {name: statistics.fmean(by_name[name]) if by_name.get(name) else None for name in ("fg", "bg", "pair")}


def link_states(record: Record) -> dict[str, dict[str, Optional[int]]]:
    """The slowest P-state and lowest PCIe link generation seen in the solo phases and in the pair
    phases: a card or link that idles down beside one light job would show here."""
    seen: dict[str, dict[str, list[int]]] = {"alone": {"pstate": [], "pcie_gen": []},
                                             "together": {"pstate": [], "pcie_gen": []}}
    for phase in _phases(record):
        kind = seen["together" if phase.get("name") == "pair" else "alone"]
        for key, field in (("pstate", "pstate_max"), ("pcie_gen", "pcie_gen_min")):
            value = phase.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                kind[key].append(value)
    return {kind: {"pstate": max(v["pstate"]) if v["pstate"] else None,
                   "pcie_gen": min(v["pcie_gen"]) if v["pcie_gen"] else None} for kind, v in seen.items()}


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    runs = [load_run(folder / name) for name in RESULTS if (folder / name).is_dir()]
    if not runs:
        return {"measured": False,
                "why": f"no results folder {RESULTS[0]}/ yet: run `gpu-pairs study run hp_study_faster_together` on a GPU"}
    cases = {case_id: {**{key: record.get(key) for key in FIGURES}, "sm_clock_mhz": phase_clocks(record),
                       "link": link_states(record), "pair_phase_s": pair_phase_s(record), "verdict": verdict(record.get("fg_slowdown_ci")),
                       "bg_verdict": pace_verdict(record.get("bg_progress_ratio_ci"))}
             for run in runs for case_id, record in sorted(run.records.items())}
    return {"measured": True, "gpu": card_of(runs[0].machine), "cases": cases,
            "faster_together": sorted(c for c, v in cases.items() if v["verdict"] == "faster"),
            "background_faster": sorted(c for c, v in cases.items() if v["bg_verdict"] == "faster")}


def table(summary: dict[str, Any]) -> str:
    lines = ["# Faster together: DenseNet121 and MNIST beside a job, a card keeper and a CPU spinner", ""]
    if not summary["measured"]:
        return "\n".join([*lines, f"Not measured yet: {summary['why']}."]) + "\n"
    lines += [f"GPU: {summary['gpu'] or 'none (ran on the CPU: no clocks, no card figures)'}", "",
              "| case | rounds | pair phase s | fg alone steps/s | fg busy alone / pair busy | SM MHz fg alone / together | "
              "P-state, PCIe gen alone / together | "
              "`fg_slowdown` [95 %] | bg progress [95 %] | efficiency [95 %] | reads (fg; bg) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for case_id, c in summary["cases"].items():
        clocks = c["sm_clock_mhz"]
        lines.append(
            f"| {case_id.split('-')[0]} {c['fg_model']} + {c['bg_model']} | {number_cell(c['n_rounds'], 'd')} | "
            f"{number_cell(c['pair_phase_s'], '.1f')} | {number_cell(c['fg_solo_steps_per_s'], '.1f')} | {number_cell(c['fg_solo_gpu_busy'], '.2f')} / "
            f"{number_cell(c['pair_gpu_busy'], '.2f')} | {number_cell(clocks['fg'], '.0f')} / {number_cell(clocks['pair'], '.0f')} | "
            f"{_link_cell(c['link'])} | "
            f"{number_cell(c['fg_slowdown'], '.3f')} {interval_cell(c['fg_slowdown_ci'])} | "
            f"{number_cell(c['bg_progress_ratio'], '.3f')} {interval_cell(c['bg_progress_ratio_ci'])} | "
            f"{number_cell(c['concurrency_efficiency'], '.3f')} {interval_cell(c['concurrency_efficiency_ci'])} | "
            f"{_reads(c)} |")
    lines += ["", f"Foregrounds that stepped faster beside their companion, beyond the interval: {_ids(summary['faster_together'])}.",
              f"Backgrounds that stepped faster beside the foreground, beyond the interval: {_ids(summary['background_faster'])}."]
    return "\n".join(lines) + "\n"


def _reads(case: dict[str, Any]) -> str:
    if case["verdict"] is None:
        return case["failure"] or "-"
    return f"{case['verdict']}; {case['bg_verdict'] or '-'}"


def _ids(case_ids: list[str]) -> str:
    return ", ".join(c.split("-")[0] for c in case_ids) if case_ids else "none"


def _link_cell(link: dict[str, dict[str, Optional[int]]]) -> str:
    def one(state: dict[str, Optional[int]]) -> str:
        return (f"P{state['pstate'] if state['pstate'] is not None else '-'}, "
                f"Gen{state['pcie_gen'] if state['pcie_gen'] is not None else '-'}")
    if all(v is None for state in link.values() for v in state.values()):
        return "-"
    return f"{one(link['alone'])} / {one(link['together'])}"
