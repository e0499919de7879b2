"""``--gpu-pairs-plan``: the selected cases with their estimated time, the total, and the cases
that will run far longer than the rest, printed instead of running anything (``planning.estimate``
makes the figures)."""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_gpu_pairs.planning.estimate import Estimate, estimate_cases, long_cases


def planned_device(device: str) -> str:
    """The device the cases would train on; ``auto`` asks NVML whether there is a GPU (no idle
    measurement, no session file: planning touches nothing)."""
    if device != "auto":
        return device
    from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable

    try:
        Gpu(0)
    except NvmlUnavailable:
        return "cpu"
    return "cuda"


def clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def plan_lines(estimates: Sequence[Estimate], device: str, scale: float) -> list[str]:
    rows = [("case", "estimate", "basis", "what it counts")]
    rows += [(e.case_id, clock(e.seconds), e.basis, e.detail) for e in estimates]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths)), row[3]]).rstrip() for row in rows]
    total = sum(e.seconds for e in estimates)
    lines.append(f"total: {clock(total)} for {len(estimates)} case(s) on {device} at scale {scale:g}")
    for e in long_cases(estimates):
        lines.append(f"warning: {e.case_id} is estimated at {clock(e.seconds)}, far longer than the other cases; "
                     f"deselect it with -k 'not {e.case_id}' or lower --gpu-pairs-scale")
    return lines


def estimate_session(session, cases: Sequence) -> list[Estimate]:
    """The selected cases' estimates, kept on the session for the live line's ETA."""
    estimates = estimate_cases(cases, session.options, planned_device(session.options.device))
    session.estimates = {e.case_id: e.seconds for e in estimates}
    return estimates


def write_plan(config: pytest.Config, session, cases: Sequence) -> None:
    options = session.options
    device = planned_device(options.device)
    estimates = estimate_session(session, cases)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    reporter.write_sep("=", "gpu-pairs plan (estimates; nothing runs)")
    for line in plan_lines(estimates, device, options.scale):
        reporter.write_line(line)
