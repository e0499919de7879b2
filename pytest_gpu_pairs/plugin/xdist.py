"""pytest-xdist workers are refused, in this one place, until each worker can own a GPU of its own:
two workers would run two pairs on one card at once (four jobs measuring each other), and neither
the summary nor ``--benchmark-json`` would come back from them."""
from __future__ import annotations

import pytest

REFUSAL = ("gpu-pairs cannot run under pytest-xdist (-n) yet: workers would run several pairs on one GPU "
           "at once and measure each other; run without -n")


def _xdist_requested(config: pytest.Config) -> bool:
    """True on xdist's controller when workers were asked for, and in every worker."""
    workers = getattr(config.option, "numprocesses", None)
    return hasattr(config, "workerinput") or bool(workers) or getattr(config.option, "dist", "no") != "no"


def refuse_xdist(config: pytest.Config, collecting: bool = False) -> None:
    """At configure time a usage error; in a worker's collection (settings came from the ini, which
    may serve a project's other tests too) a one-line collection error."""
    if not _xdist_requested(config):
        return
    if collecting:
        pytest.fail(REFUSAL, pytrace=False)
    raise pytest.UsageError(REFUSAL)
