"""``--gpu-pairs-time-limit`` in the pytest session: a case whose replicate would end past the limit
is skipped with the reason (``run.time_limit`` decides), and a session that left cases out ends with
exit code 2 and one line naming them and the command that measures them."""
from __future__ import annotations

import pytest

from pytest_gpu_pairs.planning.estimate import clock
from pytest_gpu_pairs.run.time_limit import LEFT_OUT, STOPPED_SHORT, LeftOut

LEFT_OUT_KEY = pytest.StashKey[list]()  # the test ids left out, for the summary


def skip_reason(left: LeftOut) -> str:
    return (f"{LEFT_OUT} ({clock(left.limit_s)}): {left.unit} is estimated at {clock(left.cost_s)} and "
            f"{clock(left.elapsed_s)} had passed")


def left_out_ids(session: pytest.Session) -> list[str]:
    """The tests skipped for the limit, from the reports (under pytest-xdist the workers skipped them)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reports = reporter.stats.get("skipped", []) if reporter is not None else []
    return [report.nodeid for report in reports if LEFT_OUT in str(getattr(report, "longrepr", ""))]


def end_of_session(session: pytest.Session) -> None:
    """Work remains: exit code 2 over 0 and 1, so that neither a batch script nor the study runner
    takes the session for one that ran everything."""
    ids = left_out_ids(session)
    session.config.stash[LEFT_OUT_KEY] = ids
    if ids:
        session.exitstatus = STOPPED_SHORT


def summary_lines(config: pytest.Config, resume_command: str) -> list[str]:
    ids = config.stash.get(LEFT_OUT_KEY, [])
    if not ids:
        return []
    names = ", ".join(nodeid.rsplit("[", 1)[-1].rstrip("]") for nodeid in ids)
    return [f"{LEFT_OUT}: {len(ids)} case(s), a replicate left out whole, whose estimates would have ended past it: "
            f"{names}",
            f"  to measure them: {resume_command}"]
