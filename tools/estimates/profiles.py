"""The estimate's per-workload figures, taken from two committed H100 references: step times from
``reports/reference/workload_profiles`` and process start-up and finish times from the solo
baselines in the timelines of ``reports/reference/feasibility``.

    python -m tools.estimates.profiles          # rewrites pytest_gpu_pairs/run/estimate_profiles.json

The package carries the result, so an installed plugin estimates without the repository's reports;
a unit test regenerates it and compares, so the two cannot drift apart.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "reports/reference/workload_profiles/workload_profiles.json"
FEASIBILITY = ROOT / "reports/reference/feasibility/feasibility_full_scale.json"
TARGET = ROOT / "pytest_gpu_pairs/run/estimate_profiles.json"


def _solo_overheads(feasibility: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per model: seconds from process start to the first training step, and from the last step to exit."""
    found: dict[str, dict[str, list[float]]] = {}
    for case in feasibility["cases"]:
        for solo in case["timeline"]["solo"]:
            entry = found.setdefault(solo["model"], {"startup_s": [], "finish_s": []})
            entry["startup_s"].append(solo["train_start_t"] - solo["start_t"])
            entry["finish_s"].append(solo["end_t"] - solo["train_end_t"])
    return found


def build(profiles: dict[str, Any], feasibility: dict[str, Any]) -> dict[str, Any]:
    overheads = _solo_overheads(feasibility)
    typical = {key: round(statistics.median(v for o in overheads.values() for v in o[key]), 2)
               for key in ("startup_s", "finish_s")}
    workloads = {}
    for row in profiles["workloads"]:
        measured = overheads.get(row["model"])
        workloads[row["model"]] = {
            "device": row["device"], "batch_size": row["batch_size"],
            "step_time_s": round(row["step_time_s"], 6), "util_pct": round(row.get("util_avg_pct") or 0.0, 1),
            "startup_s": round(statistics.median(measured["startup_s"]), 2) if measured else None,
            "finish_s": round(statistics.median(measured["finish_s"]), 2) if measured else None,
        }
    return {"device": profiles["device"]["name"],
            "sources": [str(PROFILES.relative_to(ROOT)), str(FEASIBILITY.relative_to(ROOT))],
            "typical": typical, "workloads": workloads}


def render() -> str:
    data = build(json.loads(PROFILES.read_text()), json.loads(FEASIBILITY.read_text()))
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main() -> int:
    TARGET.write_text(render())
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
