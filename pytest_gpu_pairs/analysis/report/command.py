"""``gpu-pairs report INPUT... -o DIR``: the command-line face of ``report.build``.

Kept apart from the build so that ``gpu-pairs --help`` and ``gpu-pairs compare`` never load
pandas, scipy or matplotlib.
"""
from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="pytest-benchmark JSON, gpu-pairs run directory, result.json, or the predecessor's raw_data.csv")
    parser.add_argument("-o", "--out", required=True, metavar="DIR",
                        help="report folder (e.g. reports/<name>/): summary.csv, stats.csv, report.html, plots/")
    parser.add_argument("--title", default=None, help="the report's title")
    parser.add_argument("--device-label", default=None, metavar="NAME",
                        help="the GPU of inputs that do not record one (the predecessor's CSV), shown as stated")
    parser.add_argument("--perf-metric", action="append", default=[], type=model_metric, metavar="MODEL=METRIC",
                        help="judge MODEL's runs by METRIC instead of its primary metric, in the performance "
                             "plots and tests (e.g. mrt_oast=auc); repeatable")


def model_metric(text: str) -> tuple[str, str]:
    model, _, metric = text.partition("=")
    if not model.strip() or not metric.strip():
        raise argparse.ArgumentTypeError(f"expected MODEL=METRIC (e.g. mrt_oast=auc), got {text!r}")
    return model.strip(), metric.strip()


REPORT_LIBRARIES = ("pandas", "matplotlib", "scipy")  # the report extra
INSTALL_REPORT = "pip install 'pytest-gpu-pairs[report]' (in a checkout of the project: pip install -e '.[report]')"


def missing_library(exc: ModuleNotFoundError) -> str | None:
    """The report extra's library an import did not find, or None for any other module."""
    root = (exc.name or "").split(".")[0]
    return root if root in REPORT_LIBRARIES else None


def run(args: argparse.Namespace) -> int:
    try:
        return _build(args)
    except ModuleNotFoundError as exc:
        missing = missing_library(exc)
        if missing is None:
            raise
        print(f"error: gpu-pairs report needs the report extra ({', '.join(REPORT_LIBRARIES)}), and {missing} is not "
              f"installed: {INSTALL_REPORT}", file=sys.stderr)
        return 2


def _build(args: argparse.Namespace) -> int:
    from pytest_gpu_pairs.analysis.report.build import build_report
    from pytest_gpu_pairs.analysis.report.load import ReportInputError

    try:
        report = build_report(args.inputs, args.out, args.title, args.device_label, dict(args.perf_metric))
    except ReportInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    drawn = [p.name for p in report.plots if p.path is not None]
    print(f"wrote {report.out_dir}/report.html, summary.csv, stats.csv and {len(drawn)} plots: {', '.join(drawn)}")
    for plot in report.plots:
        if plot.skipped:
            print(f"  not drawn: {plot.name}: {plot.skipped}")
    for note in report.notes:
        print(f"  note: {note}")
    return 0
