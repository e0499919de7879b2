"""``gpu-pairs``: the command line beside pytest (report, compare, sharing-report, workloads, plan,
plan-validate, profile, scale, merge, dead-time, study).

Each subcommand lives in the module that owns its work; this file only wires them up, so a
subcommand is added by one line in ``SUBCOMMANDS``. A subcommand module exposes
``add_arguments(parser)`` and ``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sharing-report": ("pytest_gpu_pairs.analysis.sharing", "each pair under timeslice and mps, and which to use"),
    "report": ("pytest_gpu_pairs.analysis.report.command", "summary.csv, plots and a self-contained HTML report of runs"),
    "compare": ("pytest_gpu_pairs.analysis.compare", "compare two runs' metrics; exit 1 on a regression beyond --fail"),
    "workloads": ("pytest_gpu_pairs.experiment.listing", "list the built-in workloads: size, input, defaults, epoch length"),
    "plan": ("pytest_gpu_pairs.planning.plan", "which pairs fit and share how well; makespan and GPU-hours on 1..N GPUs"),
    "plan-validate": ("pytest_gpu_pairs.planning.validate_command", "how well the planner predicts measured pairs it never saw"),
    "scale": ("pytest_gpu_pairs.analysis.scaling.command", "how one data-parallel job scales, and whether to move it to N GPUs"),
    "profile": ("pytest_gpu_pairs.planning.profile_command", "run each workload alone briefly and store its profile for the next plan"),
    "merge": ("pytest_gpu_pairs.analysis.merge", "join the results folders of shards or workers into one"),
    "dead-time": ("pytest_gpu_pairs.analysis.deadtime", "wall time of a results folder not spent training, vs the predecessor's sleeps"),
    "study": ("pytest_gpu_pairs.studies.command", "the reference studies: list, run (resumable), status, collect"),
}


def build_parser() -> argparse.ArgumentParser:
    from pytest_gpu_pairs import __version__

    parser = argparse.ArgumentParser(prog="gpu-pairs", description="pytest-gpu-pairs command line")
    parser.add_argument("--version", action="version", version=f"gpu-pairs {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(sub)
        sub.set_defaults(module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return importlib.import_module(args.module).run(args)


if __name__ == "__main__":
    sys.exit(main())
