"""A case's checks: the VRAM budget, OOMs and failures, the efficiency minimum, and that a pair
measured what it is for.

A check that applies and could not be evaluated (its figure is None) is not a pass: the case fails
with the reason the figure is missing and what would make it measurable. A concurrent case whose
efficiency could not be measured fails on every device, the CPU included, where the minimum itself
is not enforced: a pair case that measured nothing has shown nothing, and a pass with `-` in every
column would say it had.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import Case
from pytest_gpu_pairs.inputs import printable
from pytest_gpu_pairs.record.fit import FIT_SOURCE
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import typed

PROGRESS_FIX = ("give {} a progress_pattern (its log's step lines) or report steps with "
                "pytest_gpu_pairs.progress")  # the fix named in a record's notes and in a failed check
COVERAGE_FIX = ("give the background a run at least as long as the foreground's (more epochs, or a command that "
                "keeps training until it is stopped), so that it shares the run from its first step to its last; "
                "defaults.min_coverage sets the rule")


@dataclass
class CaseResult:
    """``enforce_efficiency``: the efficiency minimum applies (a GPU, or the option given);
    ``enforce_vram``: the VRAM budget applies (a GPU, or the option given). The record is always the
    typed ``Record`` (a worker's, sent as JSON, is typed on arrival), and the thresholds checked are
    the record's own, so what ``result.json`` says and what the check judged cannot differ."""

    case: Case
    record: Record
    enforce_efficiency: bool = True
    artifacts: list[str] = field(default_factory=list)
    resumed: bool = False
    enforce_vram: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.record, Record):
            self.record = typed(self.record)

    @property
    def min_efficiency(self) -> float:
        """The minimum the record holds (a case's, or the session's for a resumed case)."""
        recorded = self.record.min_efficiency
        return self.case.min_efficiency if recorded is None else recorded

    @property
    def vram_budget_mb(self) -> float:
        recorded = self.record.vram_budget_mb
        return self.case.vram_budget_mb if recorded is None else recorded

    def problems(self) -> list[str]:
        """Everything that makes this case fail, each in words an operator can act on."""
        r, found = self.record, []
        if r.oom:
            found.append(f"OOM: {r.failure or 'a job ran out of memory'}")
        elif r.failure:
            found.append(r.failure)
        found += self._memory_problems()
        if r.coverage_refused:
            found.append(f"{r.coverage_refused}: {COVERAGE_FIX}")
        eff = r.concurrency_efficiency
        if self.enforce_efficiency and self.case.mode == "concurrent" and eff is not None and eff < self.min_efficiency:
            found.append(f"concurrency efficiency {eff:.3f} is below the minimum {self.min_efficiency:.3f} "
                         f"({_parts(r)})")
        if not found:
            found += [p for p in (self._unevaluated_efficiency(), self._unevaluated_vram()) if p]
        return found

    def _memory_problems(self) -> list[str]:
        """The pair's memory against the budget: its whole-run need where both jobs' fit profiles were
        measured (which part of whose run set it, and the transient beside the steady need), else the
        peak the case itself sampled."""
        r = self.record
        if r.vram_budget_source == FIT_SOURCE:
            if r.vram_verdict == "no fit":
                return [f"the {_what(r)} does not fit the {_card(r)}: {r.vram_peak_phase or 'a job ran out of memory alone'}"
                        + (f" (steady need {r.vram_steady_mb:.0f} MB)" if r.vram_steady_mb is not None else "")]
            if r.vram_fit_mb is not None and r.vram_fit_mb > self.vram_budget_mb:
                return [f"whole-run VRAM need {r.vram_fit_mb:.0f} MB exceeds the budget of {self.vram_budget_mb:.0f} MB "
                        f"on the {_card(r)}: set by {r.vram_peak_phase}, {r.vram_transient_mb:.0f} MB above the "
                        f"steady {r.vram_steady_mb:.0f} MB (fit profiles, CUDA contexts included)"]
            return []
        if r.peak_vram_mb is not None and r.peak_vram_mb > self.vram_budget_mb:
            return [f"peak VRAM {r.peak_vram_mb:.0f} MB exceeds the budget of {self.vram_budget_mb:.0f} MB "
                    f"(NVML per-process memory sampled during the case, CUDA contexts included)"]
        return []

    def _note(self, key: str) -> str:
        return (self.record.notes or {}).get(key) or "not measured"

    def _unevaluated_efficiency(self) -> Optional[str]:
        """A concurrent case whose efficiency is None (a case that failed says so already): where
        the minimum applies it could not be checked, and elsewhere nothing was measured."""
        r = self.record
        if self.case.mode != "concurrent" or r.concurrency_efficiency is not None:
            return None
        silent = [model for model, source, given in ((r.fg_model, r.fg_progress_source, "fg_progress_source" in r),
                                                     (r.bg_model, r.bg_progress_source, "bg_progress_source" in r))
                  if given and source is None and model is not None]
        fix = PROGRESS_FIX.format(" and ".join(silent)) if silent else "see notes.concurrency_efficiency"
        if not self.enforce_efficiency:
            return (f"not measured: concurrency_efficiency is null ({self._note('concurrency_efficiency')}), so the "
                    f"case has no figure to report; {fix}")
        return (f"the minimum efficiency {self.min_efficiency:.3f} could not be checked: concurrency_efficiency "
                f"is null ({self._note('concurrency_efficiency')}); {fix}")

    def _unevaluated_vram(self) -> Optional[str]:
        r = self.record
        judged = r.vram_fit_mb if r.vram_budget_source == FIT_SOURCE else r.peak_vram_mb
        if not self.enforce_vram or judged is not None or self._needs_no_gpu():
            return None
        fix = ("memory is measured on a GPU only: run there, or leave out --gpu-pairs-vram-budget-mb" if r.device == "cpu"
               else "NVML must list the jobs' processes with their memory (in a container: share the host's pid "
                    "namespace, e.g. docker run --pid=host)")
        return (f"the VRAM budget of {self.vram_budget_mb:.0f} MB could not be checked: peak_vram_mb is null "
                f"({self._note('peak_vram_mb')}); {fix}")

    def _needs_no_gpu(self) -> bool:
        """Every job is a built-in that trains on the CPU (bug_localization): it holds no GPU memory,
        so there is nothing to measure and the budget holds."""
        jobs = [job for job in (self.case.fg, getattr(self.case, "bg", None)) if job is not None]
        return all(job.is_builtin and job.model in BUILTINS and BUILTINS[job.model].cpu_only for job in jobs)

    def check(self) -> None:
        """Fail the test with every violated condition at once; a resumed case's says it was recorded
        earlier. A job's text in it (an OOM line, a record read back) is shown with its control
        characters escaped: it is not the terminal's to interpret."""
        import pytest

        found = self.problems()
        if found:
            recorded = (f"recorded failure (resumed from {self.record.case_id}'s result.json, not measured again; "
                        "delete its folder to measure it again): ") if self.resumed else ""
            pytest.fail(printable(f"{self.case.id}: {recorded}" + " | ".join(found)), pytrace=False)


def _card(r: Record) -> str:
    return f"{r.vram_card_mb:.0f} MB card" if r.vram_card_mb is not None else "whole GPU"


def _what(r: Record) -> str:
    return f"group of {r.n_jobs} jobs" if r.n_jobs is not None and r.n_jobs > 2 else "pair"


def _parts(r: Record) -> str:
    """What the efficiency is the sum of: a pair's slowdown and background progress, or each job's
    progress in a group of more."""
    if r.jobs and len(r.jobs) > 2:
        return "progress " + ", ".join(f"{j.role} {j.progress_ratio:.3f}" if j.progress_ratio is not None
                                        else f"{j.role} -" for j in r.jobs)
    return f"fg_slowdown {r.fg_slowdown:.3f}, bg_progress_ratio {r.bg_progress_ratio:.3f}"
