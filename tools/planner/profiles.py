"""The planner's packaged solo profiles, distilled from the profiles its H100 validation used:

    python -m tools.planner.profiles      # rewrites pytest_gpu_pairs/analysis/planner/solo_profiles.json

Only the figures the planner reads are kept, in the workload-profiles format itself (so one reader
reads both). A unit test regenerates the file and compares, so the two cannot drift apart.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "reports/reference/planner/workload_profiles.json"
TARGET = ROOT / "pytest_gpu_pairs/analysis/planner/solo_profiles.json"
WORKLOAD_KEYS = ("model", "ok", "device", "batch_size", "step_time_s", "util_avg_pct", "mem_util_avg_pct",
                 "gpm_sm_util_pct", "gpm_dram_bw_pct", "host_share", "power_avg_w", "energy_per_step_j",
                 "peak_vram_nvml_mb", "torch_peak_reserved_mb", "seed_vram_mb", "min_fit_mb")
DEVICE_KEYS = ("name", "memory_total_mb", "power_limit_w", "reserved_mb")


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def build(report: dict[str, Any]) -> dict[str, Any]:
    device = report.get("device") or {}
    return {"source": str(SOURCE.relative_to(ROOT)),
            "device": {k: device.get(k) for k in DEVICE_KEYS},
            "idle_power_w": _round(report.get("idle_power_w")),
            "min_fit_method": report.get("min_fit_method"),
            "workloads": [{k: _round(w.get(k)) for k in WORKLOAD_KEYS if w.get(k) is not None}
                          for w in report["workloads"]],
            "pairs": [{"models": p["models"], "min_fit_mb": p.get("min_fit_mb")} for p in report.get("pairs", [])]}


def render(report: dict[str, Any]) -> str:
    return json.dumps(build(report), indent=1, sort_keys=True) + "\n"


def main() -> int:
    TARGET.write_text(render(json.loads(SOURCE.read_text())))
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
