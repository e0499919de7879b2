"""What pytest-benchmark sees of a case: JSON-serialisable ``params`` (the case id and its parts),
``group`` = the pair's group, no warnings about a fixture a skipped or interrupted case never
timed, and the options it cannot honour here refused in one line.

What it times (the statistics ``--benchmark-compare`` compares): in an ``epoch`` case, each
round's foreground run from its start signal to its exit; in an ``interleaved`` case, the whole
measurement, warm-up and every round. ``extra_info`` holds the case's record.
"""
from __future__ import annotations

import importlib.util
from typing import Any

import pytest


def case_params(case) -> dict[str, Any]:
    return {"case_id": case.id, "group": case.group, "fg": case.fg.model,
            "bg": case.bg.model if case.bg is not None else None, "variant": case.variant, "mode": case.mode,
            "sharing": case.sharing, "method": case.method}


def describe_benchmark(benchmark, case) -> None:
    benchmark.params = case_params(case)
    benchmark.group = case.group


def quiet_when_skipped(benchmark) -> None:
    """pytest-benchmark warns about an unused fixture unless it saw the test skipped; a case
    skipped in its fixture's setup, or stopped before its timed part, is not news to it."""
    benchmark.skipped = True


def never_timed(benchmark) -> bool:
    return getattr(benchmark, "_mode", None) is None


def refuse_unsupported(config: pytest.Config) -> None:
    """``--benchmark-histogram`` draws with pygal, which pytest-benchmark does not install."""
    histogram = getattr(config.option, "benchmark_histogram", None)
    if histogram and importlib.util.find_spec("pygal") is None:
        raise pytest.UsageError("--benchmark-histogram needs pygal, which is not installed: "
                                "pip install 'pytest-benchmark[histogram]'")
