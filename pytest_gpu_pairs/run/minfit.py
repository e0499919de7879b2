"""The smallest emulated card a job, or a pair, runs on: bisection over ``--gpu-pairs-gpu-memory-mb``.

What decides "fits on a 10 GB card" is not a peak read on a big card (caching allocators and cuDNN's
autotuning take what is there) but whether the job runs its steady state on a card of that size.
``bisect_min_fit`` finds the smallest such card to within a resolution from any monotone probe
("does it run at N MB?"), starting from a bracket around a measured peak to save probes;
``probe_fits`` is the GPU probe: a ballast emulates the card, the job(s) start, and the probe says
whether each reached its steady state (``steady_steps`` steps after its first) without running out
of memory. The probe imports no torch; the jobs are processes of their own, killed on every path.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

RESOLUTION_MB = 256
METHOD = ("bisection over the emulated card size (--gpu-pairs-gpu-memory-mb: a ballast process holds the rest of "
          "the GPU); a size fits when every job reaches {steps} training steps after its first without running out "
          "of memory; bracket from the measured NVML peak, to within {resolution} MB")


@dataclass(frozen=True)
class MinFit:
    """The bisection's answer: ``fit_mb`` the smallest size seen to fit (None: not even at the
    largest allowed), ``no_fit_mb`` the largest seen not to (None: fits at the smallest allowed);
    ``probes`` every (size, fits) in the order probed."""

    fit_mb: Optional[int]
    no_fit_mb: Optional[int]
    probes: tuple[tuple[int, bool], ...] = field(default=())

    @property
    def resolved(self) -> bool:
        return self.fit_mb is not None


def _start_bracket(hint_mb: int, low_mb: int, high_mb: int, probe: Callable[[int], bool]) -> tuple[Optional[int], Optional[int]]:
    """(largest known no-fit, smallest known fit) around ``hint_mb``: upwards by doubling until it
    fits, downwards by halving until it does not."""
    size = min(max(hint_mb, low_mb), high_mb)
    if probe(size):
        fit, no_fit = size, None
        while no_fit is None and fit > low_mb:
            below = max(low_mb, fit // 2)
            if probe(below):
                fit = below
            else:
                no_fit = below
        return no_fit, fit
    no_fit = size
    while no_fit < high_mb:
        above = min(high_mb, no_fit * 2)
        if probe(above):
            return no_fit, above
        no_fit = above
    return no_fit, None


def bisect_min_fit(fits: Callable[[int], bool], low_mb: int, high_mb: int, hint_mb: Optional[int] = None,
                   resolution_mb: int = RESOLUTION_MB) -> MinFit:
    """The smallest size in ``[low_mb, high_mb]`` at which ``fits`` (monotone: a size that fits, any
    larger one fits) says yes, to within ``resolution_mb``: the answer fits and ``resolution_mb``
    less did not, unless it is ``low_mb``. ``hint_mb`` (a measured peak) is probed first."""
    if not 0 < low_mb <= high_mb or resolution_mb <= 0:
        raise ValueError(f"expected 0 < low_mb <= high_mb and a positive resolution, got {low_mb}, {high_mb}, "
                         f"{resolution_mb}")
    probes: list[tuple[int, bool]] = []

    def probe(size: int) -> bool:
        answer = bool(fits(size))
        probes.append((size, answer))
        return answer

    no_fit, fit = _start_bracket(hint_mb if hint_mb is not None else (low_mb + high_mb) // 2, low_mb, high_mb, probe)
    if fit is None:
        return MinFit(None, no_fit, tuple(probes))
    while no_fit is not None and fit - no_fit > resolution_mb:
        middle = (fit + no_fit) // 2
        if probe(middle):
            fit = middle
        else:
            no_fit = middle
    return MinFit(fit, no_fit, tuple(probes))


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe on the GPU: whether every job reached its steady state, and what stopped it if not.
    Not ``conclusive`` when a job ended cleanly before its steady state (its training was shorter than
    the probe): that says nothing about the card, so a bisection must not read it as "does not fit"."""

    card_mb: int
    fits: bool
    reason: str
    jobs: tuple[dict[str, Any], ...] = ()
    conclusive: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"card_mb": self.card_mb, "fits": self.fits, "reason": self.reason, "jobs": list(self.jobs),
                "conclusive": self.conclusive}


def _steps_after_first(progress) -> int:
    return max(0, len(progress.steps) - 1)


def _ended(job, progress, steady_steps: int) -> Optional[tuple[bool, str, bool]]:
    """(fits, reason, conclusive) when a job that ended decides the probe: it ran out of memory, or
    it ended before its steady state; None when it ended cleanly after it."""
    outcome = job.outcome()
    if outcome.oom:
        return False, f"{job.spec.role} ran out of memory: {outcome.oom_message}", True
    if _steps_after_first(progress) >= steady_steps:
        return None
    reported = f"after {len(progress.steps)} step reports (step {progress.steps[-1][1] if progress.steps else 0})"
    if job.poll() == 0:
        return False, f"{job.spec.role} finished its training {reported}, before a steady state: inconclusive", False
    return False, f"{job.spec.role} exited with code {job.poll()} {reported}", True


def _watch(jobs, steady_steps: int, timeout_s: float, poll_s: float) -> tuple[bool, str, bool]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        outcomes = [(job, job.progress()) for job in jobs]
        if all(_steps_after_first(progress) >= steady_steps for _, progress in outcomes):
            return True, f"every job reached {steady_steps} steps after its first", True
        for job, progress in outcomes:
            decided = _ended(job, progress, steady_steps) if job.poll() is not None else None
            if decided is not None:
                return decided
        time.sleep(poll_s)
    return False, f"no steady state within {timeout_s:.0f} s", True


def probe_fits(jobs: Sequence, card_mb: int, gpu, work_dir: Path, steady_steps: int = 5,
               timeout_s: float = 240.0, poll_s: float = 0.2) -> ProbeOutcome:
    """Start ``jobs`` (``JobConfig``s of built-ins) beside each other on a card of ``card_mb`` emulated
    on ``gpu``; they fit when each reaches ``steady_steps`` steps after its first without an OOM.
    A ballast that cannot hold the memory is an error, not a "does not fit"."""
    from pytest_gpu_pairs.run.ballast import Ballast
    from pytest_gpu_pairs.run.jobs import JobProcess, build_spec

    work_dir = Path(work_dir) / f"card-{card_mb}"
    work_dir.mkdir(parents=True, exist_ok=True)
    started = []
    with Ballast(card_mb, gpu, work_dir):
        try:
            for index, job in enumerate(jobs):
                role = f"job{index}"
                spec = build_spec(job, role, "cuda", 1.0, timeout_s)
                started.append(JobProcess(spec, work_dir / f"{role}.log", work_dir / f"{role}.progress.jsonl").start())
            fits, reason, conclusive = _watch(started, steady_steps, timeout_s, poll_s)
        finally:
            for process in started:
                process.stop()
    details = tuple({"model": p.spec.model, "steps": len(p.progress().steps), "log": p.log_path} for p in started)
    return ProbeOutcome(card_mb, fits, reason, details, conclusive)
