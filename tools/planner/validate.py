"""Leave-one-pair-out validation of the planner on the GPU study's output:

    python -m tools.planner.validate FETCHED/planner [--out reports/reference/planner]

reads ``workload_profiles_raw.json`` (min fits merged), the records under ``pairs-10g`` and
``pairs-full`` (efficiency and fit), and those of any other ``pairs-*`` folder (fit only:
``pairs-8g`` holds pairs run on a smaller card, where some must run out of memory;
``pairs-10g-long`` the noisiest pairs measured again with a longer cap, set beside the same
predictions to tell the model's error from the short measurement's). The card's
reserve (what the driver held before the ballast) comes from those records where the profile lacks
it, and the profile so completed is written beside the report as ``workload_profiles.json``, from
which ``tools.workload_profiles.package`` distils the package's one profile table.
For every measured pair, it predicts the efficiency, and the fit on each emulated card the pair
ran or ran out of memory on, from a planner that never saw the pair, and writes ``validation.json``
and ``validation.md``: the table of predicted vs measured, the median absolute error, the share of
fits predicted correctly per card, and the predecessor's memory classes and pair matrix beside what
was measured.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.planning.measured import Measured, pair_key, read_measured
from pytest_gpu_pairs.planning.predict import Planner
from pytest_gpu_pairs.planning.profiles import parse

CARD_MB = 10240.0
FIT_CARDS_MB = (CARD_MB, 8192.0)
EFFICIENCY_FOLDERS = ("pairs-10g", "pairs-full")
LONGER_FOLDER = "pairs-10g-long"
ROOT = Path(__file__).resolve().parents[2]
PREDECESSOR_SETTINGS = ROOT / "settings/parallel_feasibility_test.json"
_ESTIMATE = re.compile(r"seed estimate: (?P<cls>[\w -]+?) \((?P<mb>\d+) MB\)")


def _pair_rows(planner: Planner) -> list[dict[str, Any]]:
    rows = []
    for (models, sharing), pair in sorted(planner.measured.pairs.items()):
        if pair.efficiency is None:
            continue
        held = planner.without(models)
        predicted = held.efficiency(models, sharing)
        rows.append({"pair": list(models), "sharing": sharing, "measured": pair.efficiency,
                     "measured_ci": list(pair.efficiency_ci) if pair.efficiency_ci else None,
                     "predicted": predicted.value, "interval": [predicted.low, predicted.high],
                     "abs_error": abs(predicted.value - pair.efficiency) if predicted.value is not None else None,
                     "rel_error": (abs(predicted.value - pair.efficiency) / pair.efficiency
                                   if predicted.value is not None and pair.efficiency else None)})
    return rows


def _fit_check(planner: Planner, card_mb: float) -> dict[str, Any]:
    rows = _fit_rows(planner, card_mb)
    return {"card_mb": card_mb, "pairs": len(rows),
            "correct": sum(r["correct"] for r in rows) / len(rows) if rows else None, "rows": rows}


def _fit_rows(planner: Planner, card_mb: float) -> list[dict[str, Any]]:
    rows = []
    for models, evidence in sorted(planner.measured.fit.items()):
        measured = evidence.says(card_mb)
        if measured is None:
            continue
        fit = planner.without(models).fit(models, card_mb)
        rows.append({"pair": list(models), "measured_fits": measured, "predicted": fit.verdict,
                     "need_mb": fit.need_mb, "basis": fit.basis, "correct": fit.fits == measured})
    return rows


def _predecessor(planner: Planner, card_mb: float) -> dict[str, Any]:
    settings = json.loads(PREDECESSOR_SETTINGS.read_text())
    groups = []
    for pair in settings["pairs"]:
        models = pair_key(pair["foreground"]["model"], pair["background"]["model"])
        found = _ESTIMATE.search(pair.get("note", ""))
        fit = planner.fit(models, card_mb)
        evidence = planner.measured.fit.get(models)
        groups.append({"group": pair["group"], "pair": list(models),
                       "predecessor_class": found["cls"] if found else None,
                       "predecessor_mb": int(found["mb"]) if found else None,
                       "need_mb": fit.need_mb, "predicted_at_card": fit.verdict, "basis": fit.basis,
                       "measured_at_card": evidence.says(card_mb) if evidence else None})
    workloads = [{"model": m, "predecessor_mb": BUILTINS[m].seed_vram_mb, "nvml_peak_mb": p.peak_vram_mb,
                  "min_fit_mb": p.min_fit_mb} for m, p in sorted(planner.profiles.workloads.items())]
    return {"workloads": workloads, "groups": groups}


RESERVE_METHOD = ("NVML memory in use before the ballast and the jobs started (gpu_used_before_ballast_mb), "
                  "median over the validation's pair records")


def card_reserve(folder: Path) -> float | None:
    values = []
    for path in sorted(folder.glob("pairs-*/*/result.json")):
        value = json.loads(path.read_text()).get("gpu_used_before_ballast_mb")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values.append(float(value))
    return statistics.median(values) if values else None


def completed_profiles(folder: Path) -> dict[str, Any]:
    raw = json.loads((folder / "workload_profiles_raw.json").read_text())
    device = raw.setdefault("device", {})
    reserve = card_reserve(folder)
    if device.get("reserved_mb") is None and reserve is not None:
        device.update(reserved_mb=reserve, reserved_method=RESERVE_METHOD)
    return raw


def _remeasured(folder: Path, pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs measured again with a longer cap, beside their first measurement and the same
    leave-one-out prediction; the headline figures stay those of the first measurements."""
    if not (folder / LONGER_FOLDER).is_dir():
        return []
    again = read_measured([folder / LONGER_FOLDER])
    rows = []
    for row in pairs:
        longer = again.of(tuple(row["pair"]), row["sharing"])
        if longer is None or longer.efficiency is None:
            continue
        low, high = row["interval"]
        rows.append({"pair": row["pair"], "sharing": row["sharing"], "first": row["measured"],
                     "first_ci": row["measured_ci"], "again": longer.efficiency,
                     "again_ci": list(longer.efficiency_ci) if longer.efficiency_ci else None,
                     "predicted": row["predicted"], "interval": row["interval"],
                     "abs_error_first": row["abs_error"],
                     "abs_error_again": abs(row["predicted"] - longer.efficiency) if row["predicted"] is not None else None,
                     "inside": None if None in (low, high) else low <= longer.efficiency <= high})
    return rows


def _measured(folder: Path) -> Measured:
    """Efficiency from the validation's own folders; fit evidence from every ``pairs-*`` folder."""
    found = sorted(p for p in folder.glob("pairs-*") if p.is_dir())
    efficiency = read_measured([p for p in found if p.name in EFFICIENCY_FOLDERS])
    return Measured(efficiency.pairs, read_measured(found).fit, efficiency.skipped)


def validate(folder: Path, card_mb: float = CARD_MB, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = completed_profiles(folder) if raw is None else raw
    profiles = parse(raw, str(folder / "workload_profiles_raw.json"))
    planner = Planner(profiles, _measured(folder))
    pairs = _pair_rows(planner)
    checks = [_fit_check(planner, card) for card in dict.fromkeys((card_mb, *FIT_CARDS_MB))]
    checks = [checks[0]] + [c for c in checks[1:] if c["pairs"]]
    abs_errors = [r["abs_error"] for r in pairs if r["abs_error"] is not None]
    rel_errors = [r["rel_error"] for r in pairs if r["rel_error"] is not None]
    precise = [r["rel_error"] for r in pairs if r["rel_error"] is not None and _narrow(r["measured_ci"], r["measured"])]
    covered = [r["interval"][0] <= r["measured"] <= r["interval"][1] for r in pairs if None not in r["interval"]]
    return {"card_mb": card_mb, "measured_pairs": len(pairs),
            "median_abs_error": statistics.median(abs_errors) if abs_errors else None,
            "median_rel_error": statistics.median(rel_errors) if rel_errors else None,
            "median_rel_error_precise": statistics.median(precise) if precise else None, "precise_pairs": len(precise),
            "interval_coverage": sum(covered) / len(covered) if covered else None,
            "fit_pairs": checks[0]["pairs"], "fit_correct": checks[0]["correct"],
            "min_fit_method": profiles.min_fit_method, "card_reserve_mb": profiles.reserved_mb,
            "pairs": pairs, "remeasured": _remeasured(folder, pairs), "fit_checks": checks,
            "predecessor": _predecessor(planner, card_mb)}


PRECISE = 0.05  # a measured pair whose efficiency interval is within ±5 % of its mean


def _narrow(ci, value) -> bool:
    return bool(ci) and bool(value) and (ci[1] - ci[0]) / 2 / value <= PRECISE


def _f(value, digits=2, scale=1.0) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def _other_cards(report: dict[str, Any]) -> str:
    return "".join(f", on {c['card_mb']:.0f} MB for {_f(c['correct'], 0, 100)} % of {c['pairs']}"
                   for c in report["fit_checks"][1:])


def _remeasured_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    first = statistics.median(r["abs_error_first"] for r in rows)
    again = statistics.median(r["abs_error_again"] for r in rows)
    lines = ["", "## The noisiest pairs measured again with a longer cap", "",
             f"{len(rows)} pairs; median absolute error against the first measurement {first:.2f}, against the "
             f"second {again:.2f}; the second inside the planner's interval for "
             f"{sum(bool(r['inside']) for r in rows)} of {len(rows)}. The figures above keep the first.", "",
             "| pair | first [95 %] | again [95 %] | predicted [95 %] | abs. error first / again |",
             "|---|---|---|---|---|"]
    for r in rows:
        one, two = r["first_ci"] or [None, None], r["again_ci"] or [None, None]
        low, high = r["interval"]
        lines.append(f"| {'+'.join(r['pair'])} | {_f(r['first'])} [{_f(one[0])}, {_f(one[1])}] | {_f(r['again'])} "
                     f"[{_f(two[0])}, {_f(two[1])}] | {_f(r['predicted'])} [{_f(low)}, {_f(high)}] | "
                     f"{_f(r['abs_error_first'])} / {_f(r['abs_error_again'])} |")
    return lines


def _fit_table(check: dict[str, Any]) -> list[str]:
    lines = ["", f"## Fit on {check['card_mb']:.0f} MB", "",
             f"Predicted correctly for {_f(check['correct'], 0, 100)} % of {check['pairs']} pairs.", "",
             "| pair | measured | predicted | need MB | basis |", "|---|---|---|---|---|"]
    return lines + [f"| {'+'.join(r['pair'])} | {'fits' if r['measured_fits'] else 'OOM'} | {r['predicted']} "
                    f"| {_f(r['need_mb'], 0)} | {r['basis']} |" for r in check["rows"]]


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Planner validation: leave one pair out", "",
             f"{report['measured_pairs']} measured pairs; median absolute error of the predicted efficiency "
             f"{_f(report['median_abs_error'])} ({_f(report['median_rel_error'], 1, 100)} % of the measured); fit on an "
             f"emulated {report['card_mb']:.0f} MB card predicted correctly for {_f(report['fit_correct'], 0, 100)} % "
             f"of {report['fit_pairs']} pairs{_other_cards(report)}. Each pair is predicted by a planner that never saw "
             "it measured.", "",
             f"The error holds the measurement's own noise: over the {report['precise_pairs']} pairs measured within "
             f"±{PRECISE * 100:g} % the median relative error is {_f(report['median_rel_error_precise'], 1, 100)} %. "
             f"The planner's 95 % interval held the measured value for {_f(report['interval_coverage'], 0, 100)} % "
             f"of the pairs.", "",
             f"Min fit: {report['min_fit_method'] or 'not measured'}. Card reserve: "
             f"{_f(report['card_reserve_mb'], 0)} MB.", "",
             "| pair | mechanism | measured [95 %] | predicted [95 %] | abs. error |", "|---|---|---|---|---|"]
    for r in report["pairs"]:
        low, high = r["interval"]
        ci = r["measured_ci"] or [None, None]
        lines.append(f"| {'+'.join(r['pair'])} | {r['sharing']} | {_f(r['measured'])} [{_f(ci[0])}, {_f(ci[1])}] "
                     f"| {_f(r['predicted'])} [{_f(low)}, {_f(high)}] | {_f(r['abs_error'])} |")
    lines += _remeasured_table(report.get("remeasured") or [])
    for check in report["fit_checks"]:
        lines += _fit_table(check)
    pred = report["predecessor"]
    lines += ["", "## The predecessor's memory classes beside the measurements", "",
              "| workload | predecessor's estimate MB | NVML peak MB (H100) | min fit MB |", "|---|---|---|---|"]
    lines += [f"| {w['model']} | {_f(w['predecessor_mb'], 0)} | {_f(w['nvml_peak_mb'], 0)} | {_f(w['min_fit_mb'], 0)} |"
              for w in pred["workloads"]]
    lines += ["", f"## The predecessor's pair matrix on an RTX 3080 ({report['card_mb']:.0f} MB emulated)", "",
              "| group | pair | predecessor's class | predecessor's MB | need MB | predicted | measured |",
              "|---|---|---|---|---|---|---|"]
    for g in pred["groups"]:
        measured = {True: "fits", False: "OOM", None: "-"}[g["measured_at_card"]]
        lines.append(f"| {g['group']} | {'+'.join(g['pair'])} | {g['predecessor_class'] or '-'} | "
                     f"{_f(g['predecessor_mb'], 0)} | {_f(g['need_mb'], 0)} | {g['predicted_at_card']} | {measured} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--out", default=str(ROOT / "reports/reference/planner"))
    args = parser.parse_args(argv)
    raw = completed_profiles(Path(args.folder))
    report = validate(Path(args.folder), raw=raw)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "workload_profiles.json").write_text(json.dumps(raw, indent=1) + "\n")
    (out / "validation.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "validation.md").write_text(markdown(report))
    print(markdown(report).split("\n\n")[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
