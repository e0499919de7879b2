"""Leave-one-pair-out validation of the planner on the GPU study's output:

    python -m tools.planner.validate FETCHED/planner [--out reports/reference/planner]

reads ``workload_profiles_raw.json`` (min fits merged) and the records under ``pairs-10g`` and
``pairs-full``; for every measured pair, predicts its efficiency and its fit on an emulated 10 GB
card from a planner that never saw the pair, and writes ``validation.json`` and ``validation.md``:
the table of predicted vs measured, the median absolute error, the share of fits predicted
correctly, and the predecessor's memory classes and pair matrix beside what was measured.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.analysis.planner.measured import pair_key, read_measured
from pytest_gpu_pairs.analysis.planner.predict import Planner
from pytest_gpu_pairs.analysis.planner.profiles import parse
from pytest_gpu_pairs.catalog import BUILTINS

CARD_MB = 10240.0
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


def validate(folder: Path, card_mb: float = CARD_MB) -> dict[str, Any]:
    profiles = parse(json.loads((folder / "workload_profiles_raw.json").read_text()),
                     str(folder / "workload_profiles_raw.json"))
    measured = read_measured([p for p in (folder / "pairs-10g", folder / "pairs-full") if p.is_dir()])
    planner = Planner(profiles, measured)
    pairs, fits = _pair_rows(planner), _fit_rows(planner, card_mb)
    abs_errors = [r["abs_error"] for r in pairs if r["abs_error"] is not None]
    rel_errors = [r["rel_error"] for r in pairs if r["rel_error"] is not None]
    return {"card_mb": card_mb, "measured_pairs": len(pairs),
            "median_abs_error": statistics.median(abs_errors) if abs_errors else None,
            "median_rel_error": statistics.median(rel_errors) if rel_errors else None,
            "fit_pairs": len(fits), "fit_correct": (sum(r["correct"] for r in fits) / len(fits)) if fits else None,
            "min_fit_method": profiles.min_fit_method, "pairs": pairs, "fits": fits,
            "predecessor": _predecessor(planner, card_mb)}


def _f(value, digits=2, scale=1.0) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Planner validation: leave one pair out", "",
             f"{report['measured_pairs']} measured pairs; median absolute error of the predicted efficiency "
             f"{_f(report['median_abs_error'])} ({_f(report['median_rel_error'], 1, 100)} % of the measured); fit on an "
             f"emulated {report['card_mb']:.0f} MB card predicted correctly for {_f(report['fit_correct'], 0, 100)} % "
             f"of {report['fit_pairs']} pairs. Each pair is predicted by a planner that never saw it measured.", "",
             f"Min fit: {report['min_fit_method'] or 'not measured'}.", "",
             "| pair | mechanism | measured | predicted [95 %] | abs. error |", "|---|---|---|---|---|"]
    for r in report["pairs"]:
        low, high = r["interval"]
        lines.append(f"| {'+'.join(r['pair'])} | {r['sharing']} | {_f(r['measured'])} | {_f(r['predicted'])} "
                     f"[{_f(low)}, {_f(high)}] | {_f(r['abs_error'])} |")
    lines += ["", f"## Fit on {report['card_mb']:.0f} MB", "", "| pair | measured | predicted | need MB | basis |",
              "|---|---|---|---|---|"]
    for r in report["fits"]:
        lines.append(f"| {'+'.join(r['pair'])} | {'fits' if r['measured_fits'] else 'OOM'} | {r['predicted']} "
                     f"| {_f(r['need_mb'], 0)} | {r['basis']} |")
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
    report = validate(Path(args.folder))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "validation.md").write_text(markdown(report))
    print(markdown(report).split("\n\n")[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
