"""Does a pair fit on a card of N MB? From what was measured of the pair on emulated cards, else
the pair's own min fit, else the card's reserve (what the driver holds before any job) plus each
job's own need: its min fit less that reserve, else its NVML peak. A min fit is a card size, so it
holds the reserve once; two jobs share one card, so the pair holds it once too. The NVML peak on a
big card is no bound either way: on the H100 a small job's min fit was its peak plus the reserve,
while a job that autotunes (pcb, hrnet18) ran on a card smaller than its peak.

The verdict keeps a margin: ``fits`` with at least ``margin_mb`` to spare, ``tight`` when the need
is within the margin of the card, ``no`` when it is above the card. More memory never turns a fit
into a non-fit: every rule compares the card with a need that does not depend on the card.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from pytest_gpu_pairs.planning.measured import FitEvidence
from pytest_gpu_pairs.planning.profiles import SoloProfile

RESOLUTION_MB = 256  # the min-fit bisection's resolution


def margin_mb(card_mb: float) -> float:
    """Room a plan should keep: the min fit's resolution, or 5 % of the card if larger."""
    return max(RESOLUTION_MB, 0.05 * card_mb)


@dataclass(frozen=True)
class Fit:
    verdict: str  # fits, tight, no, unknown
    need_mb: Optional[float]
    spare_mb: Optional[float]
    basis: str

    @property
    def fits(self) -> Optional[bool]:
        return None if self.verdict == "unknown" else self.verdict != "no"


def need(a: Optional[SoloProfile], b: Optional[SoloProfile], pair_min_fit_mb: Optional[float],
         reserved_mb: Optional[float] = None) -> tuple[Optional[float], str]:
    """The pair's need and what it rests on; without a known reserve, each min fit keeps its own."""
    if pair_min_fit_mb is not None:
        return pair_min_fit_mb, "pair min fit"
    return need_of_all((a, b), reserved_mb)


def need_of_all(profiles: Sequence[Optional[SoloProfile]], reserved_mb: Optional[float] = None) -> tuple[Optional[float], str]:
    """Any number of jobs on one card: the reserve once, plus each job's own need."""
    if any(p is None or p.need_mb is None for p in profiles):
        return None, "unknown"
    known = [(p, float(p.need_mb)) for p in profiles if p is not None and p.need_mb is not None]
    bases = sorted({p.need_basis for p, _ in known} - {"cpu job"}) or ["cpu jobs"]
    if not reserved_mb or not any(p.on_gpu for p, _ in known):
        return sum(n for _, n in known), "sum of " + " and ".join(bases)
    own = sum(max(0.0, n - reserved_mb) if p.min_fit_mb is not None and p.on_gpu else n for p, n in known)
    return reserved_mb + own, "card reserve + " + " and ".join(bases)


@dataclass(frozen=True)
class WholeRun:
    """A workload's whole-run need and steady need on one card, from a fit profile (``record.fit``)."""

    need_mb: float
    steady_mb: float
    source: str  # "measured here" or the package's reference


def whole_run_fit(card_mb: float, *runs: WholeRun) -> Fit:
    """Every job's whole run on the card their fit profiles were measured on: fits with the margin
    to spare; tight where only the start-up or evaluation transient reaches past it (cuDNN's
    autotuner takes less workspace where less is free, so the steady need decides whether the jobs
    run); no where the steady need itself exceeds the card."""
    need, steady = sum(r.need_mb for r in runs), sum(r.steady_mb for r in runs)
    source = " and ".join(sorted({r.source for r in runs}))
    basis = f"whole-run fit profiles ({source}): {need:.0f} MB at the peak, {steady:.0f} MB training steadily"
    spare = card_mb - need
    if steady > card_mb:
        return Fit("no", need, spare, basis)
    return Fit("fits" if spare >= margin_mb(card_mb) else "tight", need, spare, basis)


def verdict(card_mb: float, need_mb: Optional[float], basis: str, evidence: Optional[FitEvidence] = None) -> Fit:
    measured = evidence.says(card_mb) if evidence is not None else None
    if measured is not None and evidence is not None:
        ran = evidence.ran_mb if measured else evidence.oom_mb
        return Fit("fits" if measured else "no", need_mb, card_mb - need_mb if need_mb is not None else None,
                   f"measured: {'ran' if measured else 'out of memory'} on an emulated {ran:.0f} MB card")
    if need_mb is None:
        return Fit("unknown", None, None, basis)
    spare = card_mb - need_mb
    word = "no" if spare < 0 else "tight" if spare < margin_mb(card_mb) else "fits"
    return Fit(word, need_mb, spare, basis)
