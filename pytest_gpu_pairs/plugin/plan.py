"""``--gpu-pairs-plan``: the selected cases with their estimated time, the total, and the cases
that will run far longer than the rest, printed instead of running anything (``planning.estimate``
makes the figures, from earlier results and the profiles ``gpu-pairs profile`` stored in the
results folder where there are any)."""
from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Optional

import pytest

from pytest_gpu_pairs.experiment.cases import dependency_group
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning.estimate import DEFAULT, Estimate, clock, estimate_cases, long_cases, session_total
from pytest_gpu_pairs.planning.own_profiles import OwnProfiles, read_own_profiles
from pytest_gpu_pairs.record.store import StoreError, load_result
from pytest_gpu_pairs.run.outdir import OutsideOutputFolder
from pytest_gpu_pairs.run.session import replicate_resumes
from pytest_gpu_pairs.run.time_limit import played_out


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


def profile_hint(estimates: Sequence[Estimate], device: str, scale: float, out_dir) -> list[str]:
    """Where estimates rest on the default, the command that measures what they lack."""
    unknown = [e for e in estimates if e.basis == DEFAULT]
    if not unknown:
        return []
    return [f"note: {len(unknown)} case(s) rest on the default; measure each workload's rate in seconds first: "
            f"gpu-pairs profile SETTINGS --device {device} --scale {scale:g} --out {out_dir} (the same -k; a "
            "workload that steps slowly is measured longer by itself, and one it still could not measure names "
            "the --seconds to give it)"]


def plan_lines(estimates: Sequence[Estimate], device: str, scale: float, out_dir=None,
               own: OwnProfiles = OwnProfiles()) -> list[str]:
    rows = [("case", "estimate", "basis", "what it counts")]
    rows += [(e.case_id, clock(e.seconds), e.basis, e.detail) for e in estimates]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths)), row[3]]).rstrip() for row in rows]
    total = session_total(estimates, device)
    lines.append(f"total: {clock(total)} for {len(estimates)} case(s) on {device} at scale {scale:g} "
                 f"(the session's own start included)")
    if own.profiles:
        lines.append(f"profiles measured here: {len(own.profiles)} in {own.sources[0].rsplit('/', 1)[0]}")
    for e in long_cases(estimates):
        lines.append(f"warning: {e.case_id} is estimated at {clock(e.seconds)}, far longer than the other cases; "
                     f"deselect it with -k 'not {e.case_id}' or lower --gpu-pairs-scale")
    return lines + profile_hint(estimates, device, scale, out_dir or "gpu-pairs-results")


def own_profiles(session, strict: bool) -> OwnProfiles:
    """The profiles stored in the results folder; a bad one stops a plan (one line), while a
    session that runs cases goes on without them (the estimates only feed the live line)."""
    try:
        return read_own_profiles(session.options.out_dir)
    except SettingsError as exc:
        if strict:
            raise pytest.UsageError(f"gpu-pairs: {exc}") from None
        return OwnProfiles()


def estimate_session(session, cases: Sequence, own: Optional[OwnProfiles] = None) -> list[Estimate]:
    """The selected cases' estimates, kept on the session for the live line's ETA."""
    own = own if own is not None else own_profiles(session, strict=False)
    estimates = estimate_cases(cases, session.options, planned_device(session.options.device), own=own)
    session.estimates = {e.case_id: e.seconds for e in estimates}
    return estimates


def recorded_cases(session, cases: Sequence) -> list:
    """With ``--gpu-pairs-resume``: the cases whose folder holds a complete result, which the session
    would skip (read from disk only: planning opens no device). A replicate that resumes runs again
    whole where it is incomplete and a record of it names another host (or none), as the session
    decides (``GpuPairsSession.resumable``; the GPU is not compared here: no device is open)."""
    if not session.options.resume:
        return []
    every = list(session.cases())
    found = {case.id: _complete_record(session, case) for case in every}
    host = socket.gethostname()
    again = {group for group in {dependency_group(c) for c in every} - {None}
             if not replicate_resumes([found[c.id] for c in every if dependency_group(c) == group],
                                      lambda r: r.host == host)}
    return [c for c in cases if found.get(c.id) is not None and dependency_group(c) not in again]


def _complete_record(session, case):
    try:
        return load_result(session.case_dir(case))
    except (StoreError, OutsideOutputFolder):
        return None


def write_plan(config: pytest.Config, session, cases: Sequence) -> None:
    options = session.options
    device = planned_device(options.device)
    own = own_profiles(session, strict=True)
    skipped = recorded_cases(session, cases)
    estimates = estimate_session(session, [c for c in cases if c not in skipped], own)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    reporter.write_sep("=", "gpu-pairs plan (estimates; nothing runs)")
    for line in plan_lines(estimates, device, options.scale, options.out_dir, own):
        reporter.write_line(line)
    if skipped:
        reporter.write_line(f"resumed: {len(skipped)} case(s) already recorded in {options.out_dir} are not counted")
    if options.time_limit_s is not None:
        reporter.write_line(time_limit_line(estimates, [c for c in cases if c not in skipped], options.time_limit_s, device))


def time_limit_line(estimates: Sequence[Estimate], cases: Sequence, limit_s: float, device: str) -> str:
    """What ``--gpu-pairs-time-limit`` would leave out, played out on the estimates: replicates (or
    cases outside one) in their order, each started where it still fits."""
    unit_of = {case.id: dependency_group(case) or case.id for case in cases}
    units: dict[str, float] = {}
    for estimate in estimates:
        units[unit_of[estimate.case_id]] = units.get(unit_of[estimate.case_id], 0.0) + estimate.seconds
    start_s = session_total([], device)
    left = played_out(list(units.items()), limit_s, start_s)
    kept = [e for e in estimates if unit_of[e.case_id] not in left]
    line = (f"within --gpu-pairs-time-limit {clock(limit_s)}: {len(kept)} of {len(estimates)} case(s) start, "
            f"{clock(start_s + sum(e.seconds for e in kept))}")
    return line + (f"; left out: {', '.join(left)}" if left else "")
