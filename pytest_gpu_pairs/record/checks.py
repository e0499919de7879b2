"""A case's checks: the VRAM budget, OOMs and failures, the efficiency minimum."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_gpu_pairs.experiment.cases import Case


@dataclass
class CaseResult:
    case: Case
    record: dict[str, Any]
    enforce_efficiency: bool = True
    artifacts: list[str] = field(default_factory=list)
    resumed: bool = False

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
        return found

    def check(self) -> None:
        """Fail the test with every violated condition at once."""
        import pytest

        found = self.problems()
        if found:
            pytest.fail(f"{self.case.id}: " + " | ".join(found), pytrace=False)
