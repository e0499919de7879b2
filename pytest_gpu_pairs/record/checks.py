"""A case's checks: the VRAM budget, OOMs and failures, the efficiency minimum.

A check that applies and could not be evaluated (its figure is None) is not a pass: the case fails
with the reason the figure is missing and what would make it measurable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import Case

PROGRESS_FIX = ("give {} a progress_pattern (its log's step lines) or report steps with "
                "pytest_gpu_pairs.progress")  # the fix named in a record's notes and in a failed check


@dataclass
class CaseResult:
    """``enforce_efficiency``: the efficiency minimum applies (a GPU, or the option given);
    ``enforce_vram``: the VRAM budget applies (a GPU, or the option given)."""

    case: Case
    record: dict[str, Any]
    enforce_efficiency: bool = True
    artifacts: list[str] = field(default_factory=list)
    resumed: bool = False
    enforce_vram: bool = False

    def problems(self) -> list[str]:
        """Everything that makes this case fail, each in words an operator can act on."""
        r, found = self.record, []
        if r.get("oom"):
            found.append(f"OOM: {r.get('failure') or 'a job ran out of memory'}")
        elif r.get("failure"):
            found.append(r["failure"])
        peak = r.get("peak_vram_mb")
        if peak is not None and peak > self.case.vram_budget_mb:
            found.append(f"peak VRAM {peak:.0f} MB exceeds the budget of {self.case.vram_budget_mb:.0f} MB "
                         f"(NVML per-process memory, CUDA contexts included)")
        eff = r.get("concurrency_efficiency")
        if self.enforce_efficiency and self.case.mode == "concurrent" and eff is not None \
                and eff < self.case.min_efficiency:
            found.append(f"concurrency efficiency {eff:.3f} is below the minimum {self.case.min_efficiency:.3f} "
                         f"(fg_slowdown {r.get('fg_slowdown'):.3f}, bg_progress_ratio {r.get('bg_progress_ratio'):.3f})")
        if not found:
            found += [p for p in (self._unevaluated_efficiency(), self._unevaluated_vram()) if p]
        return found

    def _note(self, key: str) -> str:
        return (self.record.get("notes") or {}).get(key) or "not measured"

    def _unevaluated_efficiency(self) -> Optional[str]:
        """The minimum applies and the efficiency is None (a case that failed says so already)."""
        r = self.record
        if not self.enforce_efficiency or self.case.mode != "concurrent" or r.get("concurrency_efficiency") is not None:
            return None
        silent = [r.get(f"{role}_model") for role in ("fg", "bg")
                  if f"{role}_progress_source" in r and r.get(f"{role}_progress_source") is None]
        fix = PROGRESS_FIX.format(" and ".join(silent)) if silent else "see notes.concurrency_efficiency"
        return (f"the minimum efficiency {self.case.min_efficiency:.3f} could not be checked: concurrency_efficiency "
                f"is null ({self._note('concurrency_efficiency')}); {fix}")

    def _unevaluated_vram(self) -> Optional[str]:
        r = self.record
        if not self.enforce_vram or r.get("peak_vram_mb") is not None or self._needs_no_gpu():
            return None
        fix = ("memory is measured on a GPU only: run there, or leave out --gpu-pairs-vram-budget-mb" if r.get("device") == "cpu"
               else "NVML must list the jobs' processes with their memory (in a container: share the host's pid "
                    "namespace, e.g. docker run --pid=host)")
        return (f"the VRAM budget of {self.case.vram_budget_mb:.0f} MB could not be checked: peak_vram_mb is null "
                f"({self._note('peak_vram_mb')}); {fix}")

    def _needs_no_gpu(self) -> bool:
        """Every job is a built-in that trains on the CPU (bug_localization): it holds no GPU memory,
        so there is nothing to measure and the budget holds."""
        jobs = [job for job in (self.case.fg, getattr(self.case, "bg", None)) if job is not None]
        return all(job.is_builtin and job.model in BUILTINS and BUILTINS[job.model].cpu_only for job in jobs)

    def check(self) -> None:
        """Fail the test with every violated condition at once."""
        import pytest

        found = self.problems()
        if found:
            pytest.fail(f"{self.case.id}: " + " | ".join(found), pytrace=False)
