"""`gpu-pairs study list|run|status|collect NAME`: a reference study on this machine's GPU (or its
CPU), resumed where it stopped, followed, and collated into its summary.

    gpu-pairs study list
    gpu-pairs study run feasibility_10g                       # results in gpu-pairs-studies/feasibility_10g
    gpu-pairs study run verdicts --device cpu --scale 0.01    # the whole pipeline on a CPU, small
    gpu-pairs study run hp_study --time-limit 28m             # a leased machine: start no replicate that would end past it
    gpu-pairs study status feasibility_10g
    gpu-pairs study collect feasibility_10g                   # summary.json and table.md beside the results
    gpu-pairs study collect verdicts --out reports/reference/verdicts   # the committed summary, rebuilt
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.store import StoreError
from pytest_gpu_pairs.run.time_limit import parse_duration
from pytest_gpu_pairs.studies.declaration import Study, all_studies, find_study
from pytest_gpu_pairs.studies.runner import (
    Request,
    StudyRunError,
    run_study,
    sessions_left,
    step_states,
    study_status,
)
from pytest_gpu_pairs.studies.summary import collect

DEFAULT_OUT = Path("gpu-pairs-studies")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="every declared study, with its reference folder")
    for action, text in (("run", "run the study's sessions not done yet (resumes a stopped run)"),
                         ("status", "which sessions are done, partly done, stopped short, begun elsewhere or not started"),
                         ("collect", "rebuild the study's summary.json and table from its results folders")):
        sub = actions.add_parser(action, help=text, description=text)
        sub.add_argument("name", help="a study named by `gpu-pairs study list`")
        sub.add_argument("--out", type=Path, default=None,
                         help=f"the study's folder (default {DEFAULT_OUT}/NAME)")
        sub.add_argument("--root", type=Path, default=Path("."),
                         help="the checkout whose suite and settings the study runs (default: here)")
        if action != "collect":
            _add_run_arguments(sub)


def _add_run_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--device", choices=("cuda", "cpu", "auto"), default="cuda",
                     help="where the jobs train (default cuda; cpu runs the whole pipeline, GPU figures null)")
    sub.add_argument("--scale", type=_positive, default=None, help="data-size scale (default: the study's)")
    sub.add_argument("-k", dest="select", default=None, help="only these of the cases the study (or --variant) selects (pytest -k), for a quick try")
    sub.add_argument("--sessions", type=_at_least_one, default=None,
                     help="at most this many sessions of each variant")
    sub.add_argument("--variant", default=None, help="only this variant of the study (default: all)")
    sub.add_argument("--time-limit", type=_duration, default=None, metavar="DURATION",
                     help="end within this (seconds, or 25m, 1h30m): each session is given what is left as "
                          "--gpu-pairs-time-limit, a replicate that would end past it is not started, and the "
                          "run exits 2 so that running it again resumes (default: no limit)")
    sub.add_argument("--pytest-arg", dest="extra", action="append", default=[], metavar="ARG",
                     help="one more pytest option, e.g. --pytest-arg=--gpu-pairs-max-rounds=1 (repeatable)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            return _list()
        study = find_study(args.name)
        out = args.out or DEFAULT_OUT / study.name
        if args.action == "collect":
            print(collect(study, out, args.root.resolve()), end="")
            return 0
        request = Request(device=args.device, scale=args.scale, select=args.select, sessions=args.sessions,
                          variant=args.variant, extra=tuple(args.extra),
                          time_limit_s=args.time_limit)
        if args.action == "status":
            return _status(study, args.root.resolve(), out.resolve(), request)
        _refuse_options_that_measure_nothing(request.extra)
        return _run_until_stopped(study, args.root.resolve(), out.resolve(), request)
    except (SettingsError, StoreError, StudyRunError, ValueError) as exc:
        print(f"gpu-pairs study: error: {exc}", file=sys.stderr)
        return 2


NOTHING_MEASURED = ("--gpu-pairs-plan", "--collect-only", "--co")


def _refuse_options_that_measure_nothing(extra: tuple[str, ...]) -> None:
    """A session that only plans or lists ends with exit 0, and the runner would take it as done."""
    given = [arg for arg in extra if arg.split("=", 1)[0] in NOTHING_MEASURED]
    if given:
        raise StudyRunError(f"--pytest-arg={given[0]}: a study's sessions measure, and one that only plans or lists "
                            "would be taken as done; run pytest with the session's options instead (its log's first "
                            "line names them)")


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {text}")
    return value


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _run_until_stopped(study: Study, root: Path, out: Path, request: Request) -> int:
    """The study's sessions; Ctrl-C or SIGTERM ends the running session (its jobs torn down on the way
    out of ``run_study``) and says, in one line, how to go on: 130, as a shell reports an interrupt."""
    signal.signal(signal.SIGTERM, _stop)
    try:
        return run_study(study, root, out, request, say=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print(f"gpu-pairs study: {study.name} stopped; run the same command again to resume", file=sys.stderr)
        return 130


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _list() -> int:
    for name, study in all_studies().items():
        print(f"{name:<20} {study.reference:<38} {study.about}")
        for label, why in (("not run here", study.not_run), ("run leaves out", study.run_gaps),
                           ("summary not rebuilt by collect", study.not_rebuilt)):
            if why:
                print(f"{'':<20} {label}: {why}")
    return 0


def _status(study: Study, root: Path, out: Path, request: Request) -> int:
    states = study_status(study, root, out, request)
    for s in states:
        problems = f", {s.problems} unreadable" if s.problems else ""
        print(f"{s.folder:<24} {s.state}; {s.complete} case(s) complete, {s.incomplete} not{problems}")
    left = sessions_left(states)
    print(f"{len(states) - left} of {len(states)} sessions done or not for this device; {left} left")
    steps = step_states(study, out, request)
    for name, state in steps:
        print(f"step {name:<19} {state}")
    if steps:
        undone = sum(1 for _, state in steps if state == "not started" or state.startswith("stopped"))
        print(f"{len(steps) - undone} of {len(steps)} steps done or not for this device; {undone} left")
    return 0
