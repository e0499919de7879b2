"""Collate the run-spread probes: many runs of one case on one machine, each an independently
started pair measured with the default method to a time cap (``phase_probe.sh``).

A run's interval holds the noise of its own rounds. Whether it also holds what differs between
runs is Cochran's Q over the runs of one machine (the run means weighted by their intervals; Q
follows chi-square with k - 1 degrees of freedom when it does), and the part of the spread the
intervals leave out is the DerSimonian-Laird between-run standard deviation. From both, and from
how fast a run's interval narrows with its rounds, the summary says how likely three sessions of
such runs agree within the default-method study's spread limit, with one start per case or with
the case's rounds spread over several starts.

    python -m tools.default_method.run_spread FOLDER [FOLDER ...] --out reports/reference/default_method/run-spread
"""
from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path
from typing import Any

from scipy import integrate, stats

from pytest_gpu_pairs.record.stats import bracketed_interval, t_quantile
from pytest_gpu_pairs.record.store import StoreError, load_run
from pytest_gpu_pairs.studies.collates.default_method import EFFICIENCY_SPREAD_LIMIT
from tools.summary_files import write_collated

MAX_CASE_S = 180.0  # the product's time cap when these probes were taken and collated

SESSIONS = 3  # the default-method study's sessions per case
MAX_STARTS = 4
PRECISIONS = (0.03, 0.02)  # the default target before and after these probes


def run_entry(path: Path) -> dict[str, Any]:
    """One run's efficiency: its mean, interval, standard error, and the seconds its rounds took."""
    records = load_run(path).records
    if len(records) != 1:
        raise StoreError(f"{path}: $.benchmarks: expected one case per run, found {len(records)}")
    record = next(iter(records.values()))
    rounds = [r for r in record.get("rounds") or [] if r.get("complete")]
    if len(rounds) < 2:
        raise StoreError(f"{path}: $.benchmarks[0].extra_info.rounds: expected at least 2 complete rounds, found {len(rounds)}")
    interval = bracketed_interval([r["concurrency_efficiency"] for r in rounds])
    standard_error = interval.half_width / t_quantile(0.975, max(1.0, interval.n_effective - 1.0))
    warmup_s, rounds_s = round_timing(record)
    return {"run": path.stem, "phase_s": record.get("phase_s"), "n_rounds": len(rounds),
            "n_rounds_effective": interval.n_effective, "efficiency": interval.mean,
            "efficiency_ci": interval.as_list(), "standard_error": standard_error,
            "precision": interval.relative_half_width, "rounds_s": rounds_s,
            "warmup_to_rounds_s": warmup_s,
            "precision_per_100_s": interval.relative_half_width * math.sqrt(rounds_s / 100.0),
            "fg_slowdown": record.get("fg_slowdown"), "bg_progress_ratio": record.get("bg_progress_ratio")}


def round_timing(record: dict[str, Any]) -> tuple[float, float]:
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


def machine_entry(folder: Path) -> dict[str, Any]:
    paths = sorted(folder.glob("run*.json"))
    if len(paths) < 2:
        raise StoreError(f"{folder}: expected at least two run*.json files, found {len(paths)}")
    runs = [run_entry(p) for p in paths]
    gpu_file = folder / "gpu.txt"
    spread = heterogeneity(runs)
    by_phase: dict[str, list[float]] = {}
    for r in runs:
        by_phase.setdefault(f"{r['phase_s']:g}", []).append(r["precision_per_100_s"])
    return {"gpu": gpu_file.read_text(encoding="utf-8").strip() if gpu_file.exists() else "", "runs": runs,
            "spread": spread, "precision_per_100_s_by_phase": {k: statistics.median(v) for k, v in by_phase.items()},
            "agreement": what_agreement_takes(runs, spread)}


def collate(folders: list[Path]) -> dict[str, Any]:
    return {"spread_limit": EFFICIENCY_SPREAD_LIMIT, "cap_s": MAX_CASE_S, "sessions": SESSIONS,
            "machines": {f.name: machine_entry(f) for f in folders}}


def render(summary: dict[str, Any]) -> str:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="one folder per machine, holding gpu.txt and run*.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return write_collated(lambda: collate(args.folders), render, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
