"""The parallel feasibility test on the predecessor's 10 GB card: the 12 groups with the default method
in several sessions, judged by the predecessor's own rule, with the earlier interleaved runs as history.

    gpu-pairs study collect feasibility_10g --out reports/reference/feasibility_10g

Per group and default-method session (``default-1``, ``default-2``, ...): the memory verdict against
the 7500 MB budget from the whole-run need (both jobs' fit profiles on the 10240 MB card: steady
training plus the larger transient, start-up, evaluation or checkpoint, and which job set it), the
efficiency with its 95 % interval over starts and the energy saved; per group across sessions:
whether the verdicts agree, how far the efficiencies spread, whether every two intervals overlap.
The predecessor's rule (all 12 groups under the budget, at least 95 % of them succeeding) is
counted over groups within the budget in every session.

A reading above 2, which no sharing can give, must carry its record's suspect flag: one that does
not stops the collate with one line naming the record. A group whose job trains on the CPU (the
catalog says so) is named, as its energy saved is the card's idle energy avoided, not shared work.

The collate writes ``summary.json``, ``table.md`` and ``README.md``; the README is the package's
template with the table, the sources and the answer filled in, so no figure in it is copied by hand.
Records are read through the store, ``sources.json`` and ``session.json`` as untrusted JSON.
"""
from __future__ import annotations

import re
from pathlib import Path
from string import Template
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, StrictStr, TypeAdapter, ValidationError

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.inputs import first_error, read_json
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import read_fit_profile
from pytest_gpu_pairs.studies.collates import feasibility_10g_history as history
from pytest_gpu_pairs.studies.collates import rtx3080
from pytest_gpu_pairs.studies.collates.across_sessions import (
    agreement,
    bounds,
    group_records,
    numbered_folders,
    write_summary,
)

SETTINGS = "settings/parallel_feasibility_test.json"
CARD_MB = 10240
BUDGET_MB = 7500.0  # the predecessor's budget on its RTX 3080
SUCCESS_SHARE = 0.95  # the predecessor's 12-group test: at least 95 % of the groups succeed
BOUND = 2.0  # no sharing gives more than two jobs' work in one job's time
SESSION_FOLDER = re.compile(r"default-([1-9][0-9]*)")
SOURCES = "sources.json"
FIT_FOLDER = "_fit"
TEMPLATE = Path(__file__).with_name("feasibility_10g_readme.md")
RULE = ("the predecessor's 12-group test: all 12 groups run under the 7500 MB budget, with at least 95 % "
        "of them succeeding; a group succeeds here when its whole-run need is within the budget in every session")


class _Source(BaseModel):
    """Where one group's records of a session came from."""

    model_config = ConfigDict(extra="forbid")
    run: StrictStr
    commit: StrictStr
    gpu: StrictStr
    date: StrictStr


_SOURCES = TypeAdapter(dict[str, _Source])


def session_folders(folder: Path) -> list[str]:
    """The default-method sessions present, in their number's order."""
    return numbered_folders(folder, SESSION_FOLDER)


def read_sources(path: Path) -> dict[str, dict[str, str]]:
    """A session's ``sources.json`` (group -> run, commit, GPU, date), or none where the folder has none."""
    if not path.is_file():
        return {}
    data = read_json(path)
    try:
        return {group: source.model_dump() for group, source in _SOURCES.validate_python(data).items()}
    except ValidationError as exc:
        raise first_error(exc, str(path), data) from None


def _flag(record: Record) -> Optional[str]:
    note = (record.notes or {}).get("concurrency_efficiency")
    return note if isinstance(note, str) and note.startswith("suspect") else None


def check_flagged(record: Record, path: Path) -> Optional[str]:
    """The record's suspect flag on an efficiency above 2; a reading above 2 without one is refused."""
    value = record.concurrency_efficiency
    if value is None or value <= BOUND:
        return None
    flag = _flag(record)
    if flag is None:
        raise ValueError(f"{path}: $.notes.concurrency_efficiency: expected a suspect flag on the efficiency "
                         f"{value:.3f}, above {BOUND:g}, which no sharing can give")
    return flag


def peak(record: Record) -> dict[str, Optional[str]]:
    """Which job and which part of its run set the group's larger transient (``vram_peak_phase``
    is "<role> <workload>: <words>"; the role's own need phase is the phase's key)."""
    text = record.vram_peak_phase or ""
    head, _, words = text.partition(": ")
    role = head.split(" ", 1)[0] if head[:3] in ("fg ", "bg ") else None
    phase = record.get(f"{role}_vram_need_phase") if role else None
    return {"job": head or None, "role": role, "phase": phase if isinstance(phase, str) else None,
            "words": words or None}


def within_budget(record: Record) -> Optional[bool]:
    """The whole-run need within the rule's budget; None where no need was measured (the CPU)."""
    need = record.vram_fit_mb
    return None if need is None else need <= BUDGET_MB


def session_row(record: Record, path: Path, folder: Path) -> dict[str, Any]:
    flag = check_flagged(record, path)
    saved_ci = bounds(record.energy_saved_vs_serial_ci)
    return {"record": str(path.parent.relative_to(folder)), "vram_verdict": record.vram_verdict,
            "within_budget": within_budget(record), "need_mb": record.vram_fit_mb,
            "steady_mb": record.vram_steady_mb, "transient_mb": record.vram_transient_mb, "peak": peak(record),
            "efficiency": record.concurrency_efficiency, "efficiency_ci95": bounds(record.concurrency_efficiency_ci),
            "n_starts": record.n_starts, "n_rounds": record.n_rounds,
            "fg_slowdown": record.fg_slowdown, "fg_slowdown_ci95": bounds(record.fg_slowdown_ci),
            "bg_slowdown": 1.0 / record.bg_progress_ratio if record.bg_progress_ratio else None,
            "starts": [s.get("concurrency_efficiency") for s in record.starts or []],
            "between_start_prior": record.between_start_prior,
            "energy_saved": record.energy_saved_vs_serial, "energy_saved_ci95": saved_ci,
            "above_bound": flag is not None, "flag": flag}


def cpu_jobs(record: Record) -> list[str]:
    """The group's jobs that the catalog says train on the CPU."""
    out = []
    for role in ("fg", "bg"):
        model = record.get(f"{role}_model")
        if isinstance(model, str) and model in BUILTINS and BUILTINS[model].cpu_only:
            out.append(f"{role} {model}")
    return out


def _holds_others(rows: dict[str, dict[str, Any]]) -> Optional[float]:
    """Of every session's interval and every other session's reading, the share the interval holds."""
    pairs = [(a["efficiency_ci95"], b["efficiency"]) for s, a in rows.items() for t, b in rows.items()
             if s != t and a["efficiency_ci95"] and b["efficiency"] is not None]
    return sum(lo <= value <= hi for (lo, hi), value in pairs) / len(pairs) if pairs else None


def against_rtx3080(rows: dict[str, dict[str, Any]], theirs: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The slowdown the predecessor measured on its RTX 3080, its foreground's, beside the same job's
    slowdown here over the sessions (this group's background where the predecessor swapped the roles)."""
    key = "bg_slowdown" if theirs is not None and theirs["roles"] == "swapped" else "fg_slowdown"
    ours = [row[key] for row in rows.values() if row[key] is not None]
    mean = sum(ours) / len(ours) if ours else None
    gap = None if mean is None or theirs is None else mean - theirs["fg_slowdown_median"]
    return {"job": key[:2], "h100_slowdown": mean, "h100_slowdown_range": [min(ours), max(ours)] if ours else None,
            "rtx3080": theirs, "gap": gap}


def group_row(pair: dict[str, Any], seen: dict[str, tuple[Record, Path]], folder: Path,
              sources: dict[str, dict[str, dict[str, str]]], slowdowns: rtx3080.Slowdowns) -> dict[str, Any]:
    group, fg, bg = pair["group"], pair["foreground"]["model"], pair["background"]["model"]
    rows = {s: session_row(r, p, folder) for s, (r, p) in seen.items()}
    verdicts = [row["within_budget"] for row in rows.values()]
    first = next(iter(seen.values()))[0] if seen else None
    return {"group": group, "foreground": fg, "background": bg,
            "sessions": rows, **agreement([r for r, _ in seen.values()]),
            "within_budget_every_session": None if not rows or None in verdicts else all(verdicts),
            "interval_holds_other_sessions": _holds_others(rows),
            "cpu_jobs": cpu_jobs(first) if first else [],
            "against_rtx3080": against_rtx3080(rows, rtx3080.pair_slowdown(slowdowns, fg, bg)),
            "sources": {s: sources[s][group] for s in seen if group in sources.get(s, {})}}


def misses(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each group not within the budget in every session: what set its peak, and the transient
    beside the steady need, from the session where its need was largest."""
    out = []
    for g in groups:
        if g["within_budget_every_session"]:
            continue
        rows = [row for row in g["sessions"].values() if row["need_mb"] is not None]
        if not rows:
            out.append({"group": g["group"], "reason": "no whole-run need measured"})
            continue
        row = max(rows, key=lambda r: r["need_mb"])
        out.append({"group": g["group"], "need_mb": row["need_mb"], "steady_mb": row["steady_mb"],
                    "transient_mb": row["transient_mb"], "over_by_mb": row["need_mb"] - BUDGET_MB,
                    "job": row["peak"]["job"], "phase": row["peak"]["phase"], "phase_words": row["peak"]["words"],
                    "steady_within_budget": row["steady_mb"] is not None and row["steady_mb"] <= BUDGET_MB,
                    "sessions_over": sorted(s for s, r in g["sessions"].items() if r["within_budget"] is False)})
    return out


def success_rule(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The predecessor's rule counted over all its groups: met only when it holds whatever the
    groups not measured would have shown, failed when it fails even if they all succeeded."""
    within = sum(g["within_budget_every_session"] is True for g in groups)
    unknown = sum(g["within_budget_every_session"] is None for g in groups)
    met: Optional[bool] = (within + unknown) / len(groups) >= SUCCESS_SHARE
    if met and unknown:
        met = None
    return {"success_rule": RULE, "success_rule_groups_within_budget": within,
            "success_rule_groups_not_measured": unknown, "success_rule_share": within / len(groups),
            "success_rule_met": met, "success_rule_misses": misses(groups)}


def _all_true(values: list[Optional[bool]]) -> Optional[bool]:
    """False where any is False; None where any could not be evaluated; else True."""
    return False if False in values else None if None in values or not values else True


def fit_profiles(folder: Path, sessions: list[str]) -> dict[str, dict[str, Any]]:
    """Per workload, when each session's fit profile of it was measured: a profile measured once
    and copied to every session makes the sessions' verdicts agree by construction."""
    out: dict[str, dict[str, Any]] = {}
    for session in sessions:
        for path in sorted((folder / session / FIT_FOLDER).glob("*.json")):
            profile = read_fit_profile(path)
            entry = out.setdefault(profile.workload, {"measured_at": [], "need_mb": []})
            entry["measured_at"].append(profile.measured_at)
            entry["need_mb"].append(profile.need_mb)
    for entry in out.values():
        entry["measurements"] = len(set(entry["measured_at"]))
    return out


def default_method(folder: Path, settings: dict[str, Any], slowdowns: rtx3080.Slowdowns) -> dict[str, Any]:
    sessions = session_folders(folder)
    by_session = {s: group_records(folder / s) for s in sessions}
    sources = {s: read_sources(folder / s / SOURCES) for s in sessions}
    groups = [group_row(pair, {s: r[pair["group"]] for s, r in by_session.items() if pair["group"] in r},
                        folder, sources, slowdowns) for pair in settings["pairs"]]
    compared = [g for g in groups if g["against_rtx3080"]["gap"] is not None]
    gaps = [abs(g["against_rtx3080"]["gap"]) for g in compared]
    spreads = [g["efficiency_spread"] for g in groups if g["efficiency_spread"] is not None]
    above = [{"group": g["group"], "session": s, "efficiency": row["efficiency"], "ci95": row["efficiency_ci95"],
              "flag": row["flag"]} for g in groups for s, row in g["sessions"].items() if row["above_bound"]]
    return {"card_mb": CARD_MB, "vram_budget_mb": BUDGET_MB, "sessions": sessions, "groups": groups,
            **success_rule(groups),
            "sessions_per_group": min((g["n_sessions"] for g in groups), default=0),
            "interval_covers_sessions": _all_true([g["intervals_overlap"] for g in groups]),
            "efficiency_spread_max": max(spreads, default=None),
            "efficiency_spread_max_group": max((g for g in groups if g["efficiency_spread"] is not None),
                                               key=lambda g: g["efficiency_spread"], default={}).get("group"),
            "efficiency_above_bound": above,
            "cpu_background_groups": [g["group"] for g in groups if any(j.startswith("bg ") for j in g["cpu_jobs"])],
            "rtx3080_groups_compared": len(gaps),
            "rtx3080_slowdown_gap_mean": sum(gaps) / len(gaps) if gaps else None,
            "rtx3080_slowdown_gap_max": max(gaps, default=None),
            "rtx3080_slowdown_gap_max_group": max(compared, key=lambda g: abs(g["against_rtx3080"]["gap"]),
                                                  default={}).get("group"),
            "verdicts_agree": _all_true([len(g["vram_verdicts"]) == 1 if g["n_sessions"] else None for g in groups]),
            "fit_profiles": fit_profiles(folder, sessions),
            "sources": {g["group"]: g["sources"] for g in groups}}


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    summary = default_method(folder, read_json(root / SETTINGS), rtx3080.slowdowns(root / rtx3080.PREDECESSOR))
    summary["history"] = history.summarize(folder, root)
    return summary


def _n(value: Any, spec: str = ".2f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def _ci(value: Any, ci: Optional[list[float]], spec: str = ".2f") -> str:
    return _n(value, spec) + (f" [{_n(ci[0], spec)}, {_n(ci[1], spec)}]" if ci else "")


def _need_cell(row: dict[str, Any]) -> str:
    if row["need_mb"] is None:
        return "not measured"
    return (f"{row['need_mb']:.0f} ({_n(row['steady_mb'], '.0f')} + {_n(row['transient_mb'], '.0f')}: "
            f"{row['peak']['job']}, {row['peak']['words']})")


def _verdict_cell(row: dict[str, Any]) -> str:
    """The record's verdict, in bold where it is not within the rule's budget."""
    verdict = row["vram_verdict"] or "not measured"
    return f"**{verdict}**" if row["within_budget"] is False else verdict


def _eff_cell(row: dict[str, Any]) -> str:
    starts = row["n_starts"]
    text = f"{_ci(row['efficiency'], row['efficiency_ci95'])} ({_n(starts, 'd')} start{'' if starts == 1 else 's'})"
    return text + ", above 2: flagged suspect" if row["above_bound"] else text


def _saved_cell(row: dict[str, Any], cpu: bool) -> str:
    saved, ci = row["energy_saved"], row["energy_saved_ci95"]
    if saved is None:
        return "–"
    text = f"{100 * saved:.0f} %" + (f" [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]" if ci else "")
    return text + " (idle energy avoided)" if cpu else text


def _yes(value: Optional[bool]) -> str:
    return {True: "yes", False: "**no**", None: "–"}[value]


def session_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| group | pair (fg + bg) | session | whole-run need MB (steady + transients: the larger one's job, phase) | "
             "7500 MB budget | efficiency [95 %] | energy saved [95 %] |", "|" + " --- |" * 7]
    for g in summary["groups"]:
        cpu = "bg " + g["background"] in g["cpu_jobs"]
        pair = f"{g['foreground']} + {g['background']}" + (" (CPU background)" if cpu else "")
        for session, row in g["sessions"].items():
            lines.append(f"| {g['group']} | {pair} | {session.rsplit('-', 1)[1]} | {_need_cell(row)} | "
                         f"{_verdict_cell(row)} | {_eff_cell(row)} | {_saved_cell(row, cpu)} |")
        if not g["sessions"]:
            lines.append(f"| {g['group']} | {pair} | – | not measured | – | – | – |")
    return lines


def across_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| group | sessions | within the budget in every session | verdicts agree | efficiency spread | "
             "every two intervals overlap | intervals holding the other sessions' readings |", "|" + " --- |" * 7]
    for g in summary["groups"]:
        spread, held = g["efficiency_spread"], g["interval_holds_other_sessions"]
        agree = len(g["vram_verdicts"]) == 1 if g["n_sessions"] else None
        lines.append(f"| {g['group']} | {g['n_sessions']} | {_yes(g['within_budget_every_session'])} | {_yes(agree)} | "
                     f"{'–' if spread is None else f'{100 * spread:.1f} %'} | {_yes(g['intervals_overlap'])} | "
                     f"{'–' if held is None else f'{100 * held:.0f} %'} |")
    return lines


def emulation_table(summary: dict[str, Any]) -> list[str]:
    """Per group, what the card emulates (its memory) and how far its compute, the H100's, moves the
    one figure the predecessor measured on its RTX 3080: the foreground's slowdown."""
    lines = ["| group | pair (fg + bg) | memory | the RTX 3080's foreground | H100: its slowdown (sessions' mean, "
             "range) | RTX 3080: its slowdown, median [IQR] (runs) | H100 less RTX 3080 |", "|" + " --- |" * 7]
    for g in summary["groups"]:
        a, cpu = g["against_rtx3080"], [j.split(" ", 1)[1] for j in g["cpu_jobs"]]
        memory = "10 GB card, emulated" + (f" ({', '.join(cpu)} on the CPU)" if cpu else "")
        ours = "–" if a["h100_slowdown"] is None else (
            f"{a['h100_slowdown']:.2f} ({a['h100_slowdown_range'][0]:.2f}-{a['h100_slowdown_range'][1]:.2f})")
        theirs = a["rtx3080"]
        their_cell = "never run" if theirs is None else (
            f"{theirs['fg_slowdown_median']:.2f} [{theirs['fg_slowdown_iqr'][0]:.2f}, {theirs['fg_slowdown_iqr'][1]:.2f}] "
            f"({theirs['n']})")
        job = "–" if theirs is None else g["background"] if a["job"] == "bg" else g["foreground"]
        gap = "–" if a["gap"] is None else f"{a['gap']:+.2f}"
        lines.append(f"| {g['group']} | {g['foreground']} + {g['background']} | {memory} | {job} | {ours} | "
                     f"{their_cell} | {gap} |")
    return lines


def figures_table(summary: dict[str, Any]) -> list[str]:
    spread = summary["efficiency_spread_max"]
    rows = [("groups within the budget in every session", f"{summary['success_rule_groups_within_budget']} of "
             f"{len(summary['groups'])} ({100 * summary['success_rule_share']:.0f} %)"),
            ("the predecessor's rule met (at least 95 %)", _yes(summary["success_rule_met"])),
            ("sessions per group (fewest)", str(summary["sessions_per_group"])),
            ("every two sessions' intervals overlap, every group", _yes(summary["interval_covers_sessions"])),
            ("efficiency spread between sessions, largest", "–" if spread is None else f"{100 * spread:.1f} %"),
            ("readings above 2 (each flagged suspect by its record)", str(len(summary["efficiency_above_bound"]))),
            ("groups with a CPU background", ", ".join(summary["cpu_background_groups"]) or "none")]
    return ["| figure | value |", "| --- | --- |", *[f"| {name} | {value} |" for name, value in rows]]


def table(summary: dict[str, Any]) -> str:
    lines = ["## Default method: each group in every session", "", *session_table(summary), "",
             "## Default method: each group across sessions", "", *across_table(summary), "",
             "## Default method: the answer", "", *figures_table(summary), "",
             "## What the card emulates: its memory, not its compute", "", *emulation_table(summary), "",
             "## History: interleaved rounds, time-sliced and MPS 52 % (peak VRAM sampled while training)", "",
             history.markdown(summary["history"]).rstrip("\n")]
    return "\n".join(lines) + "\n"


def answer(summary: dict[str, Any]) -> str:
    """The headline in sentences, every figure from the summary."""
    n, within = len(summary["groups"]), summary["success_rule_groups_within_budget"]
    inside = [g["group"] for g in summary["groups"] if g["within_budget_every_session"]]
    met = {True: "is met", False: "is not met", None: "could not be evaluated"}[summary["success_rule_met"]]
    lines = [f"- **{within} of {n} groups stay within the 7500 MB budget in every session** "
             f"({', '.join(inside) or 'none'}): the predecessor's rule, at least 95 % of the 12, {met} "
             f"({100 * summary['success_rule_share']:.0f} %)."]
    for m in summary["success_rule_misses"]:
        if "need_mb" not in m:
            lines.append(f"- {m['group']}: {m['reason']}.")
            continue
        steady = "the steady need alone is within it" if m["steady_within_budget"] else "even the steady need is over it"
        lines.append(f"- {m['group']} needs {m['need_mb']:.0f} MB, {m['over_by_mb']:.0f} MB over: steady "
                     f"{m['steady_mb']:.0f} MB plus transients of {m['transient_mb']:.0f} MB, the larger "
                     f"{m['job']}'s at {m['phase_words']}; {steady}.")
    spread, cover = summary["efficiency_spread_max"], summary["interval_covers_sessions"]
    moved = "–" if spread is None else f"{100 * spread:.1f} % ({summary['efficiency_spread_max_group']})"
    lines.append(f"- Between sessions the efficiency moves by at most {moved}; every two sessions' intervals "
                 f"overlap in every group: {_yes(cover)}. Sessions per group: at least {summary['sessions_per_group']}.")
    if summary["rtx3080_groups_compared"]:
        lines.append(f"- **The card emulates the RTX 3080's memory, not its compute.** For the "
                     f"{summary['rtx3080_groups_compared']} groups the predecessor ran, the slowdown of the job it ran "
                     f"as foreground lies here on average {summary['rtx3080_slowdown_gap_mean']:.2f} from its own "
                     f"median (largest {summary['rtx3080_slowdown_gap_max']:.2f}, "
                     f"{summary['rtx3080_slowdown_gap_max_group']}); the table below says it per group.")
    above = summary["efficiency_above_bound"]
    if above:
        readings = ", ".join(f"{a['group']} {a['efficiency']:.3f} ({a['session']})" for a in above)
        lines.append(f"- {len(above)} readings lie above 2, which no sharing can give, each flagged suspect by its "
                     f"record: {readings}.")
    return "\n".join(lines)


def _commits(summary: dict[str, Any]) -> str:
    """Each distinct commit and GPU the records came from, with its groups and sessions."""
    runs: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for group, by_session in summary["sources"].items():
        for session, source in by_session.items():
            groups, sessions = runs.setdefault((source["commit"], source["gpu"]), (set(), set()))
            groups.add(group)
            sessions.add(session)
    lines = ["| groups | sessions | commit | GPU |", "| --- | --- | --- | --- |"]
    for (commit, gpu), (groups, sessions) in sorted(runs.items(), key=lambda item: min(item[1][0])):
        lines.append(f"| {', '.join(sorted(groups))} | {', '.join(sorted(sessions))} | {commit} | {gpu} |")
    return "\n".join(lines)


def _profiles(summary: dict[str, Any]) -> str:
    once = sorted(w for w, e in summary["fit_profiles"].items() if e["measurements"] == 1)
    again = sorted(w for w, e in summary["fit_profiles"].items() if e["measurements"] > 1)
    return (f"The fit profiles of {len(once)} workloads ({', '.join(once) or 'none'}) were measured once and "
            f"every session read the same profile, so their verdicts agree across sessions by construction; "
            f"{', '.join(again) or 'none'} were measured again in each session.")


def readme(summary: dict[str, Any], table_text: str) -> str:
    template = Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(answer=answer(summary), table=table_text.rstrip("\n"), sources=_commits(summary),
                               profiles=_profiles(summary))


def write(folder: Path, root: Path) -> str:
    """summary.json, table.md and README.md, each made before any is written."""
    summary = summarize(folder, root)
    text = table(summary)
    write_summary(folder, summary, text, readme(summary, text))
    return text
