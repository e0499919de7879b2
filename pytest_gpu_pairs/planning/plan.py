"""`gpu-pairs plan SETTINGS [--gpu-memory-mb N] [--sharing ...] [--gpus 1,2,4]`: which pairs fit, how well they share, on how many GPUs.

For every pair of the selected cases (``planning``): the groups that select it (``-k g10``), its
fit on a card of N MB with a margin, its predicted concurrency efficiency with an interval, the
energy it saves, the mechanism to use and its rank, each saying whether it rests on a measured pair
or on solo profiles only. The model learns from the reference pairs the package carries for the card and
from the measured pairs of every ``--results`` folder (which replace the reference's where both
measured a pair). A workload the package's profiles do not know (a user's command workload) is
taken from the profiles ``gpu-pairs profile`` stored in a results folder (``--out``, else the first
``--results``, else ``gpu-pairs-results``), and its rows say so.

With ``--gpus``, for each GPU count the selected cases' estimates (``planning.estimate``) are list-scheduled longest
first (``planning.schedule``), as the xdist workers take them: the predicted makespan, the GPU-hours
held (every GPU is paid until the last case ends), the idle GPU time at the tail, the speedup over
one GPU, and, where earlier results of the cases say how much memory they took, the memory headroom
of the tightest GPU. Each GPU is a session of its own, so a solo baseline needed on two GPUs is
measured, and charged, on both. Nothing runs; of the device only its model is read (NVML), to
choose the package's table of that card (``planning.cards``).
"""
from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import DuplicateCaseError
from pytest_gpu_pairs.experiment.vocabulary import METHODS, sharing_modes
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning.cards import card_for_gpu, chosen_card
from pytest_gpu_pairs.planning.estimate import case_costs, clock, earlier_results, standalone
from pytest_gpu_pairs.planning.fit import CONFIDENCE
from pytest_gpu_pairs.planning.measured import Measured, read_measured
from pytest_gpu_pairs.planning.memory import WholeRun
from pytest_gpu_pairs.planning.model import MECHANISMS
from pytest_gpu_pairs.planning.own_profiles import (
    OwnProfiles,
    ProfilesHereError,
    busy_measured_here,
    profiles_here,
    read_own_profiles,
    with_own,
)
from pytest_gpu_pairs.planning.predict import HOST_Z, Planner, interval_basis, mps_basis, plan_pairs, timeslicing_basis
from pytest_gpu_pairs.planning.profiles import Profiles, read_profiles
from pytest_gpu_pairs.planning.schedule import MAX_BINS, Prediction, predict, small_count
from pytest_gpu_pairs.record.store import StoreError, case_records, fit_profiles, json_text, read_session
from pytest_gpu_pairs.run.options import GpuPairsOptions, OptionsError
from pytest_gpu_pairs.run.session import GpuPairsSession

DEFAULT_GPUS = "1,2,4,6,8"
H100_MB = 81_559.0  # a table that names no card size is planned for the H100's
MPS_UNDER_LIMITS = ("{n} measured MPS pair(s) ran each job under an MPS thread limit in its solo phases, not alone on "
                    "the whole card: their efficiencies, and the MPS figures learnt from them, are against that "
                    "slower pace, and read high for jobs that fill the card")
MPS_WHOLE_CARD = ("MPS figures are for MPS with no thread limit: each job's baseline is its pace alone on the "
                  "whole card, as for time-slicing")


MAX_GPU_COUNTS = 64  # GPU counts in one --gpus: each is a schedule and a row of the table


def _gpu_counts(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    counts = [small_count(p) for p in parts[:MAX_GPU_COUNTS + 1]]
    if len(parts) > MAX_GPU_COUNTS or not all(counts):
        raise argparse.ArgumentTypeError(f"expected at most {MAX_GPU_COUNTS} GPU counts from 1 to {MAX_BINS} such "
                                         f"as 1,2,4, got {text[:80]!r}")
    return tuple(sorted({count for count in counts if count is not None}))


def card_size_mb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a card size in MB above 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("settings", nargs="+", metavar="SETTINGS", help="experiment files, as --gpu-pairs-settings")
    parser.add_argument("--gpu-memory-mb", type=card_size_mb, default=None, metavar="N",
                        help="the card the pairs are planned for (default: the profiled card's memory)")
    parser.add_argument("--sharing", type=sharing_modes, default=MECHANISMS, metavar="MODES",
                        help="mechanisms to predict and choose from: timeslice, mps or timeslice,mps (default)")
    add_table_arguments(parser)
    parser.add_argument("--gpus", type=_gpu_counts, default=None, metavar="G,...",
                        help=f"also predict makespan and GPU-hours on these GPU counts (e.g. {DEFAULT_GPUS})")
    parser.add_argument("-k", dest="keyword", default=None, metavar="EXPR",
                        help="select cases as pytest's -k does, matched against the case ids")
    parser.add_argument("--scale", type=float, default=1.0, help="as --gpu-pairs-scale (default: 1)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the jobs would train")
    parser.add_argument("--results", action="append", default=[], metavar="DIR",
                        help="a --gpu-pairs-out folder (or benchmark JSON) of measured pairs the planner learns "
                             "from; repeatable. The first folder also gives --gpus its earlier timings and peak memory")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="the results folder whose profiles (gpu-pairs profile) the plan uses "
                             "(default: the first --results, else gpu-pairs-results)")
    parser.add_argument("--method", choices=METHODS, default=None,
                        help="as --gpu-pairs-method: how the concurrent cases would be measured")
    parser.add_argument("--max-case-s", type=float, default=None, metavar="S",
                        help="as --gpu-pairs-max-case-s: the device-time cap of an interleaved case")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the solo profiles and reference pairs: plan's and plan-validate's."""
    parser.add_argument("--card", default=None, metavar="NAME",
                        help="plan with the table the package carries for this GPU model (NVIDIA H100 80GB HBM3 or "
                             "NVIDIA H200; a part of the name will do; default: the GPU found here, else the H100)")
    parser.add_argument("--profiles", default=None, metavar="FILE",
                        help="solo workload profiles of your own card in place of the package's table")
    parser.add_argument("--profiles-here", action="store_true",
                        help="the solo profiles `gpu-pairs profile` stored in --out and the --results folders, in "
                             "place of the package's table: the plan made for the GPU they were measured on (its "
                             "memory, idle power and power limit from those folders' session.json; the package's "
                             "reference pairs then stay out)")
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help="leave out the reference pairs the package carries for the card: learn only from --results")


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
    return [i for i in case_ids if expression.evaluate(_keyword_matcher(i))]


def _keyword_matcher(case_id: str) -> Callable[..., bool]:
    """What ``-k`` asks of a name: is it part of the case id (case-insensitive), as pytest matches ids."""
    lowered = case_id.lower()
    return lambda name, **_: name.lower() in lowered


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


def _interval(figure: dict[str, Any], percent: bool = False) -> str:
    """The value with its interval; where no interval could be estimated, the value alone and
    ``(no interval)``, not the physical range, which says nothing."""
    value = figure["value"]
    if value is None:
        return "-"
    scale, unit = (100, " %") if percent else (1, "")
    digits = 0 if percent else 2
    low, high = figure["interval"] or (None, None)
    text = f"{value * scale:.{digits}f}"
    if not figure.get("interval_estimated", True):
        return text + unit + " (no interval)"
    if low is not None and high is not None:
        text += f" [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"
    return text + unit


def _fit_text(fit: dict[str, Any]) -> str:
    if fit["need_mb"] is None:
        return f"{fit['verdict']} ({fit['basis']})"
    return f"{fit['verdict']} ({fit['need_mb']:.0f} MB, {fit['basis']})"


def pair_table(pairs: Sequence[dict[str, Any]], mechanisms: Sequence[str]) -> list[str]:
    header = ("rank", "groups", "pair", "fit (need, basis)", *(f"{m} eff [{CONFIDENCE:.0%}]" for m in mechanisms),
              *(f"{m} energy saved" for m in mechanisms), "use", "rests on")
    cells = [header]
    for p in pairs:
        figures = p["mechanisms"]
        cells.append((str(p["rank"]), ",".join(p.get("groups") or ["-"]), "+".join(p["pair"]), _fit_text(p["fit"]),
                      *(_interval(figures[m]["efficiency"]) for m in mechanisms),
                      *(_interval(figures[m]["energy_saved"], percent=True) for m in mechanisms),
                      p.get("use") or p["recommended"] or "-", p["rests_on"]))
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def _pairs_of(cases) -> dict[tuple[str, ...], list]:
    """The selected cases by the workloads they share a GPU with: each pair, and each group of more."""
    found: dict[tuple[str, ...], list] = {}
    for case in cases:
        if case.bg is not None:
            found.setdefault(tuple(sorted(case.models)), []).append(case)
    return found


def with_reference(measured: Measured, profiles, wanted: bool) -> tuple[Measured, Optional[str]]:
    """The measured pairs over the reference pairs the package carries for the card the profiles
    are of (its corrections are residuals against that card's profiles)."""
    card = card_for_gpu(profiles.device_name)
    if not wanted or card is None:
        return measured, None
    reference = card.pairs()
    return measured.over(reference.measured), reference.source


def reference_wanted(args: argparse.Namespace) -> bool:
    """The package's reference pairs, unless left out or the profiles are the user's own (measured
    here: the reference's corrections are residuals against the package's table)."""
    return getattr(args, "reference", True) and not getattr(args, "profiles_here", False)


def whole_runs(results: Sequence[Path]) -> dict[tuple[str, float], WholeRun]:
    """The whole-run fit profiles of the results folders, at the built-ins' default hyperparameters,
    by workload and card (a command workload by its name): what the cases measured, the planner reuses."""
    found: dict[tuple[str, float], WholeRun] = {}
    for folder in results:
        for profile in fit_profiles(folder):
            defaults = BUILTINS[profile.workload].defaults() if profile.builtin and profile.workload in BUILTINS else None
            if profile.card_mb is None or profile.need_mb is None or profile.steady_mb is None:
                continue
            if defaults is not None and profile.hyperparameters != defaults:
                continue
            found.setdefault((profile.workload, profile.card_mb), WholeRun(profile.need_mb, profile.steady_mb,
                                                                            f"measured here ({folder})"))
    return found


def planning_table(args: argparse.Namespace, folders: Sequence[Path], device: str = "cuda",
                   detect: bool = True) -> tuple[Profiles, Optional[str]]:
    """The table the plan judges by, and a note where it is not of the GPU found here: ``--profiles``,
    with ``--profiles-here`` the profiles measured on ``device`` in ``folders`` (a plan, or a
    validation, for the card they were measured on), else the package's table of ``--card`` or, with
    ``detect``, of the GPU here (else the H100's)."""
    chosen = [name for name, given in (("--card", args.card), ("--profiles", args.profiles),
                                       ("--profiles-here", args.profiles_here)) if given]
    if len(chosen) > 1:
        raise ProfilesHereError(f"give one of --card, --profiles and --profiles-here, not {' and '.join(chosen)}")
    if args.profiles:
        return read_profiles(Path(args.profiles)), None
    if args.profiles_here:
        return profiles_here(folders, device), None
    card, note = chosen_card(args.card, detect and device == "cuda")
    return card.table(), note


def plan_for_pairs(cases, args: argparse.Namespace, results: Sequence[Path], own: OwnProfiles,
                   table: Profiles, card_note: Optional[str] = None) -> dict[str, Any]:
    """The pair predictions of the selected cases; ``SettingsError``/``StoreError`` on bad input."""
    measured, reference = with_reference(read_measured(results), table, reference_wanted(args))
    profiles, here = with_own(table, own, args.device)
    busy_here = {} if getattr(args, "profiles_here", False) else busy_measured_here(table, own, args.device)
    planner = Planner(profiles, measured, here, whole_runs(results), busy_here)
    card_mb = args.gpu_memory_mb or profiles.memory_total_mb or H100_MB
    pairs = _pairs_of(cases)
    predictions = plan_pairs(planner, list(pairs), card_mb, args.sharing)
    for p in predictions:
        selected = pairs[tuple(p["pair"])]
        p["cases"] = [c.id for c in selected]
        p["groups"] = sorted({c.group for c in selected})
    model = {"profiles": profiles.source, "profiled_device": profiles.device_name,
             "measured_pairs": {m: planner.measured_count(m) for m in args.sharing},
             "reference_pairs": {m: measured.reference_count(m) for m in args.sharing},
             "reference": reference,
             "card_note": card_note,
             "profiled_here": sorted(here),
             "busy_measured_here": sorted(planner.busy_here),
             "other_method_records_skipped": measured.skipped,
             "mps_pairs_under_limits": measured.under_mps_limits() if "mps" in args.sharing else 0,
             "efficiency_interval": interval_basis(planner), "timeslicing": timeslicing_basis(planner),
             "mps_base": mps_basis(planner)}
    return {"card_mb": card_mb, "sharing": list(args.sharing), "model": model, "pairs": predictions}


def _measured_text(model: dict[str, Any]) -> str:
    parts = []
    for mechanism, n in model["measured_pairs"].items():
        reference = model["reference_pairs"].get(mechanism, 0)
        parts.append(f"{n} {mechanism}" + (f" ({reference} of them the package's reference)" if reference else ""))
    return ", ".join(parts)


def _mps_basis(plan: dict[str, Any]) -> list[str]:
    """What the MPS figures are against: a user running MPS under a thread limit measures another baseline."""
    limited = plan["model"].get("mps_pairs_under_limits")
    if limited:
        return [MPS_UNDER_LIMITS.format(n=limited)]
    return [MPS_WHOLE_CARD] if "mps" in plan["sharing"] else []


def _print_pairs(plan: dict[str, Any]) -> None:
    model = plan["model"]
    counts = _measured_text(model)
    skipped = model["other_method_records_skipped"]
    print(f"gpu-pairs plan: {len(plan['pairs'])} pair(s) on a {plan['card_mb']:.0f} MB card; solo profiles of "
          f"{model['profiled_device'] or 'an unnamed device'} ({model['profiles']}); measured pairs: {counts}"
          + (f" ({skipped} record(s) of the epoch method not used)" if skipped else ""))
    if model["card_note"]:
        print(f"note: {model['card_note']}")
    if model["profiled_here"]:
        print(f"profiled here (gpu-pairs profile): {', '.join(model['profiled_here'])}")
    if model["busy_measured_here"]:
        print(f"busy fractions measured on this host (gpu-pairs profile), the table's for the rest: "
              f"{', '.join(model['busy_measured_here'])}")
    for line in pair_table(plan["pairs"], plan["sharing"]):
        print(line)
    notes = sorted({p["note"] for p in plan["pairs"] if p["note"]})
    for note in (*notes, *_mps_basis(plan)):
        print(f"note: {note}")
    print("fit: fits, tight (within the margin: max(256 MB, 5 % of the card)), no; (no interval): too few pairs "
          "measured under that mechanism to estimate one (the physical range 0-2 applies); groups: select a pair's "
          "cases with -k GROUP")
    print(_host_term_line(model["efficiency_interval"]))


def _host_term_line(basis: dict[str, Any]) -> str:
    """What an efficiency interval holds beyond the held-out errors: a user reads a wide one near
    contention as the host's doing, and learns how to narrow the doubt."""
    factor = math.exp(HOST_Z * basis["host_spread"])
    return (f"efficiency intervals (90 %) also hold how far each figure moves where this host runs both jobs "
            f"{100 * (factor - 1):.0f} % busier or {100 * (1 - 1 / factor):.0f} % idler than the profiles read them (a host-bound "
            "job's pace is its host's): gpu-pairs profile on this host, under the load the pairs will run beside, "
            "gives the busy fractions read here")


def _gpu_rows(cases, options, args, results: Optional[Path], earlier,
              own: OwnProfiles) -> tuple[list[dict[str, Any]], Counter]:
    costs = case_costs(cases, options, args.device, earlier, own)
    bases = Counter(standalone(c, options, args.device, earlier, own).basis for c in cases)
    one = predict(costs, 1)
    rows = []
    for gpus in args.gpus:
        prediction = predict(costs, gpus)
        rows.append(_row(prediction, one, memory_headroom(results, prediction.bins)))
    return rows, bases


def run(args: argparse.Namespace) -> int:
    folders = [Path(r).absolute() for r in args.results]
    results = next((f for f in folders if f.is_dir()), None)
    try:
        options = GpuPairsOptions(settings=tuple(Path(p) for p in args.settings), device=args.device,
                                  scale=args.scale, vram_budget_mb=None, min_efficiency=None, sample_hz=10.0,
                                  out_dir=results or Path("gpu-pairs-results").absolute(), method=args.method,
                                  **({"max_case_s": args.max_case_s} if args.max_case_s else {}))
        cases = GpuPairsSession(options).cases()
        wanted = set(select([c.id for c in cases], args.keyword))
        cases = [c for c in cases if c.id in wanted]
        earlier = earlier_results(results, options.scale, args.device)
        profiled_in = Path(args.out).absolute() if args.out else options.out_dir
        own = read_own_profiles(profiled_in)
        solo_table, card_note = planning_table(args, [profiled_in, *(f for f in folders if f != profiled_in)],
                                               args.device)
        pairs = plan_for_pairs(cases, args, folders, own, solo_table, card_note) if cases else {}
        rows, bases = _gpu_rows(cases, options, args, results, earlier, own) if args.gpus and cases else ([], Counter())
    except (SettingsError, DuplicateCaseError, OptionsError, StoreError, ValueError) as exc:
        print(f"error: {exc}")
        return 2
    if not cases:
        print("error: no case selected")
        return 2
    if args.json:
        gpu_part = {"bases": dict(bases), "predictions": rows} if args.gpus else {}
        print(json_text({"cases": len(cases), "device": args.device, "scale": args.scale, **gpu_part, **pairs}))
        return 0
    if args.gpus:
        basis_text = ", ".join(f"{n} {b}" for b, n in sorted(bases.items()))
        print(f"gpu-pairs plan: {len(cases)} case(s) on {args.device} at scale {args.scale:g} (estimates: {basis_text}); "
              "longest first onto the least loaded GPU, each GPU measuring its own solo baselines")
        for line in table(rows):
            print(line)
        print()
    _print_pairs(pairs)
    return 0
