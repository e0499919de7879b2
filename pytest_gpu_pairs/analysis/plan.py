"""`gpu-pairs plan SETTINGS... --gpus 1,2,4,6,8`: "4 or 6 GPUs?" answered with numbers before renting.

For each GPU count the selected cases' estimates (``run.estimate``) are list-scheduled longest
first (``run.schedule``), as the xdist workers take them: the predicted makespan, the GPU-hours
held (every GPU is paid until the last case ends), the idle GPU time at the tail, the speedup over
one GPU, and, where earlier results of the cases say how much memory they took, the memory headroom
of the tightest GPU. Each GPU is a session of its own, so a solo baseline needed on two GPUs is
measured, and charged, on both. Nothing runs and no device is opened.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import DuplicateCaseError
from pytest_gpu_pairs.experiment.vocabulary import METHODS
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.store import StoreError, case_records, read_session
from pytest_gpu_pairs.run.estimate import case_costs, earlier_results, standalone
from pytest_gpu_pairs.run.options import GpuPairsOptions, OptionsError
from pytest_gpu_pairs.run.schedule import Prediction, predict
from pytest_gpu_pairs.run.session import GpuPairsSession

DEFAULT_GPUS = "1,2,4,6,8"


def _gpu_counts(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected GPU counts such as 1,2,4, got {text!r}")
    return tuple(sorted({int(p) for p in parts}))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("settings", nargs="+", metavar="SETTINGS", help="experiment files, as --gpu-pairs-settings")
    parser.add_argument("--gpus", type=_gpu_counts, default=_gpu_counts(DEFAULT_GPUS), metavar="G,...",
                        help=f"GPU counts to predict (default: {DEFAULT_GPUS})")
    parser.add_argument("-k", dest="keyword", default=None, metavar="EXPR",
                        help="select cases as pytest's -k does, matched against the case ids")
    parser.add_argument("--scale", type=float, default=1.0, help="as --gpu-pairs-scale (default: 1)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the jobs would train")
    parser.add_argument("--results", default=None, metavar="DIR",
                        help="a --gpu-pairs-out folder whose earlier results of the same cases are used "
                             "(their timings, and their peak memory for the headroom)")
    parser.add_argument("--method", choices=METHODS, default=None,
                        help="as --gpu-pairs-method: how the concurrent cases would be measured")
    parser.add_argument("--max-case-s", type=float, default=None, metavar="S",
                        help="as --gpu-pairs-max-case-s: the device-time cap of an interleaved case")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def select(case_ids: Sequence[str], keyword: Optional[str]) -> list[str]:
    """The ids a ``-k`` expression keeps: each name in it matches case-insensitively as a substring
    of the case id, as pytest's ``-k`` matches a parametrised test's id."""
    if not keyword:
        return list(case_ids)
    from _pytest.mark.expression import Expression

    try:
        expression = Expression.compile(keyword)
    except Exception as exc:  # pytest's own parse error (SyntaxError, ParseError in older releases)
        raise ValueError(f"-k {keyword!r}: {exc}") from None
    return [i for i in case_ids if expression.evaluate(lambda name, _id=i.lower(), **_: name.lower() in _id)]


def memory_headroom(results: Optional[Path], bins: Sequence[Sequence[str]]) -> Optional[dict[str, Any]]:
    """The tightest GPU's headroom: its card's memory less the largest peak of the cases it runs, in
    MB and percent of the card, from earlier records and the folder's ``session.json``; None where
    the folder says nothing of the card; ``unknown`` names the cases without a recorded peak."""
    if results is None:
        return None
    session = read_session(results) or {}
    total = (session.get("gpu") or {}).get("memory_total_mb")
    if not isinstance(total, (int, float)) or total <= 0:
        return None
    found, _ = case_records(results)
    peaks = {r.case_id: r.peak_vram_mb for _, r in found if r.complete and r.peak_vram_mb is not None}
    worst = max((peaks[i] for b in bins for i in b if i in peaks), default=None)
    unknown = sorted(i for b in bins for i in b if i not in peaks)
    if worst is None:
        return {"memory_total_mb": total, "headroom_mb": None, "headroom_pct": None, "unknown": unknown}
    return {"memory_total_mb": total, "headroom_mb": total - worst, "headroom_pct": 100 * (total - worst) / total,
            "unknown": unknown}


def clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _row(p: Prediction, one: Prediction, memory: Optional[dict[str, Any]]) -> dict[str, Any]:
    return {"gpus": p.gpus, "makespan_s": p.makespan_s, "gpu_hours": p.gpu_hours, "busy_gpu_hours": p.busy_s / 3600,
            "idle_s": p.idle_s, "speedup": one.makespan_s / p.makespan_s if p.makespan_s else None,
            "loads_s": list(p.loads_s), "cases_per_gpu": [list(b) for b in p.bins], "memory": memory}


def _memory_text(memory: Optional[dict[str, Any]]) -> str:
    if memory is None:
        return "unknown (no earlier results of this card)"
    if memory["headroom_mb"] is None:
        return "unknown (no earlier peak of these cases)"
    text = f"{memory['headroom_mb']:.0f} MB ({memory['headroom_pct']:.1f} %)"
    return text + (f", {len(memory['unknown'])} case(s) unknown" if memory["unknown"] else "")


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    header = ("gpus", "makespan", "speedup", "gpu-hours", "busy", "idle at tail", "memory headroom (tightest GPU)")
    cells = [header] + [(str(r["gpus"]), clock(r["makespan_s"]), f"{r['speedup']:.2f}x" if r["speedup"] else "-",
                         f"{r['gpu_hours']:.2f}", f"{r['busy_gpu_hours']:.2f}", clock(r["idle_s"]),
                         _memory_text(r["memory"])) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def run(args: argparse.Namespace) -> int:
    results = Path(args.results).absolute() if args.results else None
    try:
        options = GpuPairsOptions(settings=tuple(Path(p) for p in args.settings), device=args.device,
                                  scale=args.scale, vram_budget_mb=None, min_efficiency=None, sample_hz=10.0,
                                  out_dir=results or Path("gpu-pairs-results").absolute(), method=args.method,
                                  **({"max_case_s": args.max_case_s} if args.max_case_s else {}))
        cases = GpuPairsSession(options).cases()
        wanted = set(select([c.id for c in cases], args.keyword))
        cases = [c for c in cases if c.id in wanted]
        earlier = earlier_results(results, options.scale, args.device)
    except (SettingsError, DuplicateCaseError, OptionsError, StoreError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    if not cases:
        print("error: no case selected")
        return 2
    costs = case_costs(cases, options, args.device, earlier)
    bases = Counter(standalone(c, options, args.device, earlier).basis for c in cases)
    one = predict(costs, 1)
    rows = []
    for gpus in args.gpus:
        prediction = predict(costs, gpus)
        rows.append(_row(prediction, one, memory_headroom(results, prediction.bins)))
    if args.json:
        print(json.dumps({"cases": len(cases), "device": args.device, "scale": args.scale,
                          "bases": dict(bases), "predictions": rows}, indent=2))
        return 0
    basis_text = ", ".join(f"{n} {b}" for b, n in sorted(bases.items()))
    print(f"gpu-pairs plan: {len(cases)} case(s) on {args.device} at scale {args.scale:g} (estimates: {basis_text}); "
          "longest first onto the least loaded GPU, each GPU measuring its own solo baselines")
    for line in table(rows):
        print(line)
    return 0
