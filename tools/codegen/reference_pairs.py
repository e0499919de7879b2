"""The measured pairs the package carries, distilled from the project's committed H100 measurements:

    python -m tools.codegen.reference_pairs     # rewrites pytest_gpu_pairs/planning/reference_pairs.json

Every pair record of the default (interleaved) method, at default hyperparameters, that the
project committed from an H100: the planner's first validation (``reports/archive/planner``: 28
pairs on an emulated 10 GB card, the six noisiest again with a longer cap, pcb's pairs on 8 GB),
the 10 GB feasibility groups in three sessions and under MPS (``feasibility_10g``), the verdicts
study's six pairs in three sessions and the predecessor's predicted pairs in three
(``predecessor_predictions``; its group of three jobs teaches pairs nothing and is kept apart, under
``groups``, to check the planner's groups against). Each
folder is read as ``gpu-pairs plan --results`` reads it, and only what the planner uses is kept:
per pair and mechanism the mean efficiency, its interval, the energy saved, the peak memory and the
record count; per pair the smallest emulated card it ran on and the largest it ran out of memory
on. So a planner on a fresh install learns its correction and its intervals from the same measured
pairs as the validation (``python -m tools.planner.validate``). A unit test regenerates the file and
compares, so the package and the references cannot drift apart.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.planning.measured import Measured, MeasuredPair, read_measured

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (*(ROOT / "reports/archive/planner" / name for name in ("pairs-10g", "pairs-10g-long", "pairs-8g")),
           *(ROOT / "reports/reference/feasibility_10g" / name for name in ("default-1", "default-2", "default-3", "mps")),
           *(ROOT / "reports/reference/verdicts" / f"session-{n}" for n in (1, 2, 3)),
           *(ROOT / "reports/reference/predecessor_predictions" / f"session-{n}" for n in (1, 2, 3)))
PROFILES = ROOT / "reports/archive/planner/workload_profiles.json"
TARGET = ROOT / "pytest_gpu_pairs/planning/reference_pairs.json"


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 6)


def _row(p: MeasuredPair) -> dict[str, Any]:
    row = {"models": list(p.models), "sharing": p.sharing, "efficiency": _round(p.efficiency),
           "efficiency_ci": [_round(v) for v in p.efficiency_ci] if p.efficiency_ci else None,
           "energy_saved": _round(p.energy_saved), "peak_vram_mb": _round(p.peak_vram_mb), "records": p.records}
    if p.solo_busy:
        row["solo_gpu_busy"] = {name: _round(busy) for name, busy in p.solo_busy}
    if p.solo_under_mps_limits:
        row["solo_under_mps_limits"] = True
    return row


def build(measured: Measured, device: str, folders: tuple[Path, ...] = FOLDERS) -> dict[str, Any]:
    pairs = [_row(p) for _, p in sorted(measured.pairs.items())]
    groups = [_row(p) for _, p in sorted(measured.groups.items())]
    fit = [{"models": list(models), "ran_mb": evidence.ran_mb, "oom_mb": evidence.oom_mb}
           for models, evidence in sorted(measured.fit.items())]
    spread = measured.between_sessions
    return {"device": device, "method": "interleaved",
            "sources": [str(f.relative_to(ROOT)) for f in folders],
            "pairs": pairs, "groups": groups, "fit": fit, "other_method_records_skipped": measured.skipped,
            "between_sessions": None if spread is None else {"sd": _round(spread.sd), "pairs": spread.pairs}}


def render() -> str:
    device = json.loads(PROFILES.read_text())["device"]["name"]
    return json.dumps(build(read_measured(list(FOLDERS)), device), indent=1, sort_keys=True) + "\n"


def main() -> int:
    TARGET.write_text(render())
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
