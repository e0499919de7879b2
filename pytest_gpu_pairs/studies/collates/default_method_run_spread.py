"""The run-spread study: many runs of one case on one machine, each an independently started pair
measured with the default method to a time cap (a precision target no run reaches).

A run's interval holds the noise of its own rounds. Whether it also holds what differs between
runs is Cochran's Q over the runs of one machine (the run means weighted by their intervals; Q
follows chi-square with k - 1 degrees of freedom when it does), and the part of the spread the
intervals leave out is the DerSimonian-Laird between-run standard deviation. From both, and from
how fast a run's interval narrows with its rounds, the summary says how likely three sessions of
such runs agree within the default-method study's spread limit, with one start per case or with
the case's rounds spread over several starts.

    gpu-pairs study collect default_method_run_spread --out reports/reference/default_method/run-spread

Each sub-folder holding runs is one machine's probe: the committed ones hold each run's benchmark
JSON (``run1-phase0.5.json``) and the card's ``gpu.txt``; a folder ``gpu-pairs study run`` made
holds each run's results folder (``phases/run1-phase0.5/``), and the card is the records' own.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from scipy import integrate, stats

from pytest_gpu_pairs.record.stats import bracketed_interval, t_quantile
from pytest_gpu_pairs.record.store import Run, StoreError, load_run
from pytest_gpu_pairs.studies.collates.default_method import EFFICIENCY_SPREAD_LIMIT, card_of

MAX_CASE_S = 180.0  # the product's time cap when these probes were taken and collated

SESSIONS = 3  # the default-method study's sessions per case
MAX_STARTS = 4
PRECISIONS = (0.03, 0.02)  # the default target before and after these probes


def run_name(path: Path) -> str:
    return path.name if path.is_dir() else path.stem


def run_entry(path: Path, run: Run) -> dict[str, Any]:
    """One run's efficiency: its mean, interval, standard error, and the seconds its rounds took."""
    records = run.records
    if len(records) != 1:
        raise StoreError(f"{path}: $.benchmarks: expected one case per run, found {len(records)}")
    record = next(iter(records.values()))
    rounds = [r for r in record.get("rounds") or [] if r.get("complete")]
    if len(rounds) < 2:
        raise StoreError(f"{path}: $.benchmarks[0].extra_info.rounds: expected at least 2 complete rounds, found {len(rounds)}")
    interval = bracketed_interval([r["concurrency_efficiency"] for r in rounds])
    half_width, precision = interval.half_width, interval.relative_half_width
    if half_width is None or precision is None:
        raise StoreError(f"{path}: $.benchmarks[0].extra_info.rounds: expected efficiencies an interval can be taken over")
    n_effective = interval.n_effective if interval.n_effective is not None else float(interval.n)
    standard_error = half_width / t_quantile(0.975, max(1.0, n_effective - 1.0))
    warmup_s, rounds_s = round_timing(record)
    return {"run": run_name(path), "phase_s": record.get("phase_s"), "n_rounds": len(rounds),
            "n_rounds_effective": interval.n_effective, "efficiency": interval.mean,
            "efficiency_ci": interval.as_list(), "standard_error": standard_error,
            "precision": precision, "rounds_s": rounds_s,
            "warmup_to_rounds_s": warmup_s,
            "precision_per_100_s": precision * math.sqrt(rounds_s / 100.0),
            "fg_slowdown": record.get("fg_slowdown"), "bg_progress_ratio": record.get("bg_progress_ratio")}


def round_timing(record: Any) -> tuple[float, float]:
    """Seconds from the case's start to its first round, and seconds its rounds took together."""
    phases = [p for r in record["rounds"] for p in r["phases"]]
    return phases[0]["switched_t"] - record["timeline"]["case_start_t"], phases[-1]["end"] - phases[0]["switched_t"]


def heterogeneity(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Cochran's Q of the run means, its p-value, and the DerSimonian-Laird between-run variance."""
    weights = [1.0 / r["standard_error"] ** 2 for r in runs]
    pooled = sum(w * r["efficiency"] for w, r in zip(weights, runs)) / sum(weights)
    q = sum(w * (r["efficiency"] - pooled) ** 2 for w, r in zip(weights, runs))
    df = len(runs) - 1
    scale = sum(weights) - sum(w * w for w in weights) / sum(weights)
    between_var = max(0.0, (q - df) / scale) if scale > 0 else 0.0
    return {"k": len(runs), "pooled": pooled, "sd_of_run_means": statistics.stdev(r["efficiency"] for r in runs),
            "median_standard_error": statistics.median(r["standard_error"] for r in runs),
            "q": q, "df": df, "p": float(stats.chi2.sf(q, df)), "between_run_sd": math.sqrt(between_var)}


def range_within(limit: float, sd: float, n: int = SESSIONS) -> float:
    """P(max - min of n normal draws with this sd <= limit)."""
    w = limit / sd
    density = integrate.quad(lambda x: stats.norm.pdf(x) * (stats.norm.cdf(x + w) - stats.norm.cdf(x)) ** (n - 1),
                             -math.inf, math.inf)[0]
    return n * density


def what_agreement_takes(runs: list[dict[str, Any]], spread: dict[str, Any]) -> list[dict[str, Any]]:
    """A session's standard error, and the chance that three such sessions fall within the spread
    limit: one start stopped by a precision target (or by the cap, if that comes first), and the whole cap spent, split over ``starts`` independently started pairs that each
    pay their warm-up again: (between-run variance + within-run variance of its rounds) / starts."""
    within_at_1_s = statistics.median(r["standard_error"] * math.sqrt(r["rounds_s"]) for r in runs)
    warmup_s = statistics.median(r["warmup_to_rounds_s"] for r in runs)
    limit = EFFICIENCY_SPREAD_LIMIT * spread["pooled"]
    between = spread["between_run_sd"]
    out = []
    for precision in PRECISIONS:
        at_target = max(precision * spread["pooled"] / 1.96, within_at_1_s / math.sqrt(MAX_CASE_S - warmup_s))
        sd = math.hypot(between, at_target)
        out.append({"stop": f"±{precision:.0%} target", "starts": 1, "session_standard_error": sd,
                    "p_three_sessions_within_limit": range_within(limit, sd)})
    for starts in range(1, MAX_STARTS + 1):
        rounds_s = MAX_CASE_S / starts - warmup_s
        if rounds_s <= 0:
            break
        sd = math.sqrt((between ** 2 + within_at_1_s ** 2 / rounds_s) / starts)
        out.append({"stop": "the cap", "starts": starts, "rounds_s_per_start": rounds_s, "session_standard_error": sd,
                    "p_three_sessions_within_limit": range_within(limit, sd)})
    return out


def run_paths(folder: Path) -> list[Path]:
    """The folder's runs: each ``run*.json`` benchmark file, and each ``run*/`` results folder whose
    name has no benchmark file beside it."""
    files = sorted(folder.glob("run*.json"))
    taken = {p.stem for p in files}
    dirs = sorted(p for p in folder.glob("run*") if p.is_dir() and p.name not in taken)
    return sorted([*files, *dirs], key=run_name)


def gpu_of(folder: Path, runs: list[Run]) -> str:
    """The card: ``gpu.txt`` as the device's adapter wrote it, else the name the runs' records give."""
    gpu_file = folder / "gpu.txt"
    if gpu_file.exists():
        return gpu_file.read_text(encoding="utf-8").strip()
    return "; ".join(sorted({card_of(r.machine) for r in runs} - {""}))


def machine_entry(folder: Path) -> tuple[float, dict[str, Any]]:
    """The machine's figures, and when its first run started (the summary lists machines in the
    order they were measured)."""
    paths = run_paths(folder)
    if len(paths) < 2:
        raise StoreError(f"{folder}: expected at least two run*.json files or run*/ results folders, found {len(paths)}")
    loaded = [load_run(p) for p in paths]
    runs = [run_entry(p, run) for p, run in zip(paths, loaded)]
    spread = heterogeneity(runs)
    by_phase: dict[str, list[float]] = {}
    for r in runs:
        by_phase.setdefault(f"{r['phase_s']:g}", []).append(r["precision_per_100_s"])
    first = min(record["timeline"]["case_start_t"] for run in loaded for record in run.records.values())
    return first, {"gpu": gpu_of(folder, loaded), "runs": runs, "spread": spread,
                   "precision_per_100_s_by_phase": {k: statistics.median(v) for k, v in by_phase.items()},
                   "agreement": what_agreement_takes(runs, spread)}


def collate(folders: list[Path]) -> dict[str, Any]:
    machines = sorted(((*machine_entry(f), f.name) for f in folders), key=lambda m: (m[0], m[2]))
    return {"spread_limit": EFFICIENCY_SPREAD_LIMIT, "cap_s": MAX_CASE_S, "sessions": SESSIONS,
            "machines": {name: entry for _, entry, name in machines}}


def probe_folders(folder: Path) -> list[Path]:
    """The study folder's sub-folders that hold runs, in name order."""
    found = sorted(p for p in folder.iterdir() if p.is_dir() and run_paths(p)) if folder.is_dir() else []
    if not found:
        raise StoreError(f"{folder}: no sub-folder with run*.json files or run*/ results folders: not a run-spread study")
    return found


def summarize(folder: Path, root: Path) -> dict[str, Any]:
    return collate(probe_folders(folder))


def table(summary: dict[str, Any]) -> str:
    lines = ["# Run spread: many runs of one case on one machine", ""]
    for name, m in summary["machines"].items():
        s = m["spread"]
        lines += [f"## {name}", "", f"GPU: {m['gpu']}", "",
                  "| run | phase s | rounds | efficiency | 95 % interval | fg slowdown | bg progress |",
                  "|---|---|---|---|---|---|---|"]
        for r in m["runs"]:
            low, high = r["efficiency_ci"]
            lines.append(f"| {r['run']} | {r['phase_s']:g} | {r['n_rounds']} | {r['efficiency']:.3f} | "
                         f"[{low:.3f}, {high:.3f}] | {r['fg_slowdown']:.3f} | {r['bg_progress_ratio']:.3f} |")
        lines += ["", f"Runs {s['k']}: sd of run means {s['sd_of_run_means']:.3f}, median standard error "
                      f"{s['median_standard_error']:.3f}; Cochran's Q {s['q']:.1f} on {s['df']} df, p = {s['p']:.4f}; "
                      f"between-run sd {s['between_run_sd']:.3f}.",
                  "Precision per 100 s of rounds by phase length: "
                  + ", ".join(f"{k} s: ±{v:.1%}" for k, v in m["precision_per_100_s_by_phase"].items()) + ".", "",
                  f"| a case stops at | starts in {summary['cap_s']:g} s | rounds s per start | session standard error | "
                  f"P({summary['sessions']} sessions within {summary['spread_limit']:.0%}) |", "|---|---|---|---|---|"]
        lines += [f"| {a['stop']} | {a['starts']} | {_seconds(a.get('rounds_s_per_start'))} | "
                  f"{a['session_standard_error']:.3f} | {a['p_three_sessions_within_limit']:.2f} |" for a in m["agreement"]]
        lines.append("")
    return "\n".join(lines)


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{value:.0f}"
