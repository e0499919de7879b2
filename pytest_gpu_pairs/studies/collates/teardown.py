"""The teardown study's report: the card's state read from NVML before, during and after two faults
(a foreground out of memory, SIGTERM to pytest mid-case), one row per phase with its verdict, and
each case's outcome, from the evidence its run left (``evidence.jsonl``, one observation a line).

    gpu-pairs study collect teardown --out reports/reference/teardown
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.inputs import JsonProblem, SettingsError, parse_json, read_capped
from pytest_gpu_pairs.record.store import atomic_write_text

EVIDENCE = "evidence.jsonl"
REPORT = "teardown.md"
PHASES = (("during_case_t02", None), ("after_fg_oom", "pytest_exit_part1"), ("after_sigterm", "pytest_exit_part2"))


def read_evidence(path: Path) -> dict[str, dict[str, Any]]:
    """Each observation by its label; one ``SettingsError`` line for a line that is not one."""
    try:
        lines = read_capped(path).splitlines()
    except OSError as exc:
        raise SettingsError(path, "$", f"expected the teardown run's evidence ({exc.strerror or exc})") from None
    found: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = parse_json(line)
        except JsonProblem as problem:
            raise SettingsError(path, f"line {number}: {problem.path}", problem.reason) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
            raise SettingsError(path, f"line {number}: $.label", "expected an object with a label")
        found[entry["label"]] = entry
    if not isinstance(found.get("idle_before", {}).get("mem_used_mb"), (int, float)):
        raise SettingsError(path, "idle_before: $.mem_used_mb", "expected the idle card's memory in use")
    return found


def _counts(entry: dict[str, Any]) -> tuple[str, str, str]:
    return (str(len(entry.get("compute_processes") or [])), f"{entry['mem_used_mb']:.0f}",
            str(len(entry.get("job_processes") or [])))


def rows(evidence: dict[str, dict[str, Any]]) -> list[tuple[str, ...]]:
    idle = evidence["idle_before"]
    procs, memory, jobs = _counts(idle)
    table: list[tuple[str, ...]] = [("phase", "pytest exit", "compute procs", "mem used MB", "job procs", "verdict"),
                                    ("idle, before", "-", procs, memory, jobs, "baseline")]
    for label, exit_label in PHASES:
        entry = evidence.get(label)
        if entry is None or not isinstance(entry.get("mem_used_mb"), (int, float)):
            table.append((label, "-", "-", "-", "-", "MISSING"))
            continue
        verdict = ("held (expected)" if "idle_reached" not in entry else
                   f"OK, idle after {entry.get('waited_s')} s" if entry["idle_reached"] else "NOT IDLE")
        code = str(evidence.get(exit_label, {}).get("exit", "-")) if exit_label else "-"
        table.append((label, code, *_counts(entry), verdict))
    return table


def outcomes(evidence: dict[str, dict[str, Any]]) -> list[str]:
    return [f"{label[len('result_'):]}: " + json.dumps({k: v for k, v in entry.items() if k != "label"})
            for label, entry in evidence.items() if label.startswith("result_")]


def markdown(evidence: dict[str, dict[str, Any]]) -> str:
    table = rows(evidence)
    lines = ["# Teardown on the GPU (gpu-pairs study run teardown)", "",
             "NVML state of the card before, during and after two fault cases: a foreground that runs out of "
             "CUDA memory under a background holding 60 % of the card, and SIGTERM to pytest while a case trains.",
             "", "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
    lines += ["", "Case results:", ""] + [f"- `{line}`" for line in outcomes(evidence)]
    return "\n".join(lines) + "\n"


def write(folder: Path, root: Path) -> str:
    text = markdown(read_evidence(folder / EVIDENCE))
    atomic_write_text(folder / REPORT, text)
    return text
