"""``gpu-pairs sharing-report``: each pair under time-slicing and under MPS, side by side, with a
recommendation.

Reads the records of a run (pytest-benchmark JSON, result folders, or a .tgz of them), groups the
rounds of each pair by mechanism, and reports mean and spread (sample standard deviation over the
rounds) of the concurrency efficiency and of the energy saved against running the same work one job
after the other. The recommendation is the mechanism whose efficiency is higher by more than the
two spreads together; failing that, the one that saves more energy by more than its spreads;
failing that, time-slicing, which needs no daemon. Writes ``<out>.json``, ``<out>.md`` and (with
matplotlib) ``<out>.png``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from pytest_gpu_pairs.inputs import open_regular
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import StoreError, atomic_write_json, atomic_write_text, case_records, load_run

MECHANISMS = ("timeslice", "mps")
FIGURES = ("concurrency_efficiency", "energy_saved_vs_serial", "fg_slowdown", "bg_progress_ratio", "gpu_energy_j",
           "serial_energy_j", "gpu_power_avg_w", "peak_vram_mb")
RULE = ("recommend the mechanism whose mean concurrency efficiency is higher by more than the sum of the two "
        "standard deviations; else the one whose mean energy saved is higher by more than the sum of its two "
        "standard deviations; else timeslice (no difference beyond the spread, and it needs no daemon)")


class ReportInputError(ValueError):
    pass


# --- loading ------------------------------------------------------------------------------

CaseFigures = Union[Record, Mapping[str, Any]]  # a record as read, or its figures as a plain mapping (a round)


def _records_from_benchmark(path: Path) -> list[Record]:
    try:
        return list(load_run(path).records.values())
    except StoreError as exc:
        raise ReportInputError(str(exc)) from None


def _records_from_dir(folder: Path) -> list[Record]:
    """Case records only: a case with repeats also saves each round's record (same case id) in
    ``round-NN/``, and those are already in the case record's ``rounds``."""
    found, problems = case_records(folder, nested=True)
    if problems:
        raise ReportInputError(problems[0])
    return [record for _, record in found if record.complete]


def _records_from_tgz(path: Path) -> list[Record]:
    """The case records in an archive: only its ``result.json`` members, extracted as plain files
    (tarfile's data filter refuses links, devices and paths leaving the folder)."""
    try:
        with tempfile.TemporaryDirectory() as tmp, open_regular(path) as handle, \
                tarfile.open(fileobj=handle, mode="r:*") as archive:
            archive.extractall(tmp, members=[m for m in archive.getmembers() if m.name.endswith("result.json")
                                             and m.isfile()], filter="data")
            return _records_from_dir(Path(tmp))
    except (OSError, tarfile.TarError) as exc:
        raise ReportInputError(f"{path}: $: expected a readable .tgz of results folders ({exc})") from None


def load_records(paths: Iterable[str | Path]) -> list[Record]:
    """Every case record in ``paths``; a case found in two inputs is refused in one line naming
    both (a stale copy must not silently stand in for the case)."""
    by_id: dict[str, tuple[Record, Path]] = {}
    for path in map(Path, paths):
        if path.is_dir():
            found = _records_from_dir(path)
        elif path.name.endswith((".tgz", ".tar.gz")):
            found = _records_from_tgz(path)
        else:
            found = _records_from_benchmark(path)
        for record in found:
            first = by_id.setdefault(record["case_id"], (record, path))[1]
            if first != path:
                raise ReportInputError(f"{path}: case {record['case_id']!r} is also in {first}; pass each case's "
                                       "run once (remove the stale copy)")
    return [record for record, _ in by_id.values()]


# --- analysis -----------------------------------------------------------------------------

def pair_id(record: CaseFigures) -> str:
    """The case id without its mechanism suffix: what both mechanisms of one pair share."""
    case_id, sharing = record["case_id"], record.get("sharing") or "timeslice"
    return case_id[: -len(sharing) - 1] if sharing != "timeslice" and case_id.endswith(f"-{sharing}") else case_id


def _rounds(record: CaseFigures) -> Sequence[CaseFigures]:
    return record.get("rounds") or [record]


def _spread(values: list[Optional[float]]) -> dict[str, Any]:
    present = [float(v) for v in values if v is not None]
    if not present:
        return {"mean": None, "std": None, "n": 0, "values": []}
    return {"mean": statistics.fmean(present), "std": statistics.stdev(present) if len(present) > 1 else 0.0,
            "n": len(present), "values": present}


def summarise_mechanism(record: CaseFigures) -> dict[str, Any]:
    rounds = _rounds(record)
    summary: dict[str, Any] = {key: _spread([r.get(key) for r in rounds]) for key in FIGURES}
    summary.update({"case_id": record["case_id"], "repeats": len(rounds),
                    "failed_rounds": sum(1 for r in rounds if r.get("failure")), "failure": record.get("failure"),
                    "oom": bool(record.get("oom")), "energy_split_method": record.get("energy_split_method"),
                    "mps": record.get("mps")})
    return summary


def _beats(a: dict[str, Any], b: dict[str, Any]) -> Optional[bool]:
    """True/False when ``a``'s mean beats/loses to ``b``'s by more than both spreads; None if within."""
    if a["mean"] is None or b["mean"] is None:
        return None
    margin = (a["std"] or 0.0) + (b["std"] or 0.0)
    if abs(a["mean"] - b["mean"]) <= margin:
        return None
    return a["mean"] > b["mean"]


def recommend(mechanisms: dict[str, dict[str, Any]]) -> tuple[Optional[str], str]:
    usable = {m: s for m, s in mechanisms.items()
              if s["concurrency_efficiency"]["n"] and not s["oom"] and s["failed_rounds"] < s["repeats"]}
    if not usable:
        return None, "no mechanism gave a usable measurement"
    unmeasured = [m for m in MECHANISMS if m not in mechanisms]
    if unmeasured:
        return None, f"not compared: {', '.join(unmeasured)} was not measured"
    if len(usable) == 1:
        only = next(iter(usable))
        missing = [m for m in MECHANISMS if m != only]
        return only, f"only {only} measured usably ({', '.join(missing)} failed)"
    ts, mps = usable["timeslice"], usable["mps"]
    rounds = min(ts["concurrency_efficiency"]["n"], mps["concurrency_efficiency"]["n"])
    if rounds < 2:
        better = "mps" if mps["concurrency_efficiency"]["mean"] > ts["concurrency_efficiency"]["mean"] else "timeslice"
        return None, (f"undecided: {rounds} usable round of one mechanism, so no spread to judge a difference by "
                      f"(single rounds favour {better})")
    for key, what in (("concurrency_efficiency", "efficiency"), ("energy_saved_vs_serial", "energy saved")):
        verdict = _beats(mps[key], ts[key])
        if verdict is not None:
            better, worse = ("mps", "timeslice") if verdict else ("timeslice", "mps")
            return better, (f"{what} {usable[better][key]['mean']:.3g} vs {usable[worse][key]['mean']:.3g} "
                            f"({worse}), beyond the spread")
    return "timeslice", "no difference beyond the spread; timeslice needs no daemon"


def compare(records: Sequence[CaseFigures]) -> list[dict[str, Any]]:
    """One entry per pair of concurrent cases, in the order the records came."""
    pairs: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("mode", "concurrent") != "concurrent":
            continue
        entry = pairs.setdefault(pair_id(record), {"pair": pair_id(record), "fg_model": record.get("fg_model"),
                                                   "bg_model": record.get("bg_model"), "mechanisms": {}})
        entry["mechanisms"][record.get("sharing") or "timeslice"] = summarise_mechanism(record)
    for entry in pairs.values():
        entry["recommended"], entry["reason"] = recommend(entry["mechanisms"])
    return list(pairs.values())


# --- output -------------------------------------------------------------------------------

def _cell(spread: dict[str, Any], percent: bool = False) -> str:
    if spread["mean"] is None:
        return "-"
    scale = 100.0 if percent else 1.0
    unit = " %" if percent else ""
    return f"{spread['mean'] * scale:.2f} ± {spread['std'] * scale:.2f}{unit}"


def markdown(entries: list[dict[str, Any]], device: Optional[str], sources: list[str]) -> str:
    lines = ["# Time-slicing vs MPS, per pair", "",
             f"Device: {device or 'unknown'}. Sources: {', '.join(sources)}.", "",
             "Efficiency = 1/fg_slowdown + bg_progress_ratio (2.0: sharing is free; below 1.0: serial is faster). "
             "Energy saved = 1 - (GPU energy of the shared window) / (the same steps run one job after the other, "
             "each at its solo energy per step). Mean ± sample standard deviation over the rounds (n).", "",
             "| pair | mechanism | n | efficiency | energy saved vs serial | fg slowdown | bg progress | "
             "energy split | recommended |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for entry in entries:
        for mechanism in MECHANISMS:
            s = entry["mechanisms"].get(mechanism)
            if s is None:
                continue
            mark = "**yes**" if entry["recommended"] == mechanism else ""
            problem = f" (failed rounds: {s['failed_rounds']})" if s["failed_rounds"] else ""
            lines.append(f"| {entry['pair']} | {mechanism}{problem} | {s['concurrency_efficiency']['n']} | "
                         f"{_cell(s['concurrency_efficiency'])} | {_cell(s['energy_saved_vs_serial'], True)} | "
                         f"{_cell(s['fg_slowdown'])} | {_cell(s['bg_progress_ratio'])} | "
                         f"{s['energy_split_method'] or '-'} | {mark} |")
    lines += ["", "## Recommendations", ""]
    lines += [f"- {e['pair']}: **{e['recommended'] or 'none'}** ({e['reason']})" for e in entries]
    lines += ["", f"Rule: {RULE}.", ""]
    return "\n".join(lines)


def plot(entries: list[dict[str, Any]], path: Path) -> Optional[str]:
    """Bars of efficiency and energy saved per pair and mechanism; returns why not, if not drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib not importable ({exc})"
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 2.2 * len(entries)), 4.5))
    width = 0.38
    for ax, key, title, scale in ((axes[0], "concurrency_efficiency", "concurrency efficiency", 1.0),
                                  (axes[1], "energy_saved_vs_serial", "energy saved vs serial (%)", 100.0)):
        for offset, mechanism in ((-width / 2, "timeslice"), (width / 2, "mps")):
            spreads = [e["mechanisms"].get(mechanism, {}).get(key) or {"mean": None} for e in entries]
            xs = [i + offset for i, s in enumerate(spreads) if s["mean"] is not None]
            ax.bar(xs, [s["mean"] * scale for s in spreads if s["mean"] is not None], width, label=mechanism,
                   yerr=[s["std"] * scale for s in spreads if s["mean"] is not None], capsize=3)
        ax.set_xticks(range(len(entries)))
        ax.set_xticklabels([f"{e['pair'].split('-')[0]}\n{e['fg_model']}+\n{e['bg_model']}" for e in entries],
                           fontsize=8)
        ax.set_title(title)
        ax.legend()
    axes[0].axhline(1.0, color="grey", linewidth=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def write_report(records: Sequence[CaseFigures], out: Path, sources: list[str]) -> dict[str, Any]:
    entries = compare(records)
    device = next((r.get("device") for r in records if r.get("device")), None)
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")
    plot_problem = plot(entries, png) if entries else "no pairs"
    report = {"device": device, "sources": sources, "rule": RULE, "pairs": entries,
              "plot": png.name if plot_problem is None else None, "plot_problem": plot_problem}
    atomic_write_json(out.with_suffix(".json"), report)
    atomic_write_text(out.with_suffix(".md"), markdown(entries, device, sources))
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="pytest-benchmark JSON, a results folder, or a .tgz of one (later inputs win per case)")
    parser.add_argument("--out", default="reports/sharing", metavar="PATH",
                        help="output stem: PATH.json, PATH.md and PATH.png are written (default: reports/sharing)")


def run(args: argparse.Namespace) -> int:
    try:
        records = load_records(args.inputs)
    except ReportInputError as exc:
        print(f"gpu-pairs sharing-report: {exc}", file=sys.stderr)
        return 2
    if not records:
        print(f"gpu-pairs sharing-report: no case records in {', '.join(args.inputs)}", file=sys.stderr)
        return 2
    report = write_report(records, Path(args.out), [Path(p).name for p in args.inputs])
    print(markdown(report["pairs"], report["device"], report["sources"]))
    return 0
