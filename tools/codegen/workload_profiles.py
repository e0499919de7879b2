"""The package's one workload-profile table, distilled from two committed H100 references:

    python -m tools.codegen.workload_profiles     # rewrites pytest_gpu_pairs/planning/workload_profiles.json

- ``reports/archive/planner/workload_profiles.json``: every built-in alone at its default
  hyperparameters (2 s warm-up, 4 s window; the planner's validation study): step time, NVML and
  GPM utilisation, power, host share, NVML peak, min fit, the card's reserve;
- ``reports/archive/feasibility/feasibility_full_scale.json``: the solo baselines of the
  feasibility study on the same kind of card, whose timelines give each job's start-up (process
  start to first training step) and finish (last step to exit), which a profile window cannot;
- ``reports/reference/verdicts/fit-profiles/``: each workload's whole-run fit profile on the 10 GB
  card the default suite names, whose starts' seconds say what measuring a fit profile costs
  (``fit_s``), which the estimator charges to the first case that needs a profile not yet stored, and
  its whole-run and steady need on that card, which the planner judges a pair's fit by;
- ``reports/reference/default_method/sessions-88e4113/summary.json``: the H100 default-method study, whose
  built-in pairs (no restarts) say how many interleaved rounds a case takes to reach its ±3 %
  target (``typical.precision_rounds``, the median, at ``typical.precision_target``), which the
  estimator counts on a GPU, scaled to the target a session asks for.

The estimator and the planner both read this one file (through ``planning.profiles``), in the
workload-profiles format itself, so the same reader takes a user's own profile file. A unit test
regenerates it and compares, so the package and the references cannot drift apart.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.record.fit import FitProfile

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "reports/archive/planner/workload_profiles.json"
FEASIBILITY = ROOT / "reports/archive/feasibility/feasibility_full_scale.json"
DEFAULT_METHOD = ROOT / "reports/reference/default_method/sessions-88e4113/summary.json"
FIT_PROFILES = ROOT / "reports/reference/verdicts/fit-profiles"
TARGET = ROOT / "pytest_gpu_pairs/planning/workload_profiles.json"
WORKLOAD_KEYS = ("model", "ok", "device", "batch_size", "step_time_s", "util_avg_pct", "mem_util_avg_pct",
                 "gpm_sm_util_pct", "gpm_dram_bw_pct", "host_share", "power_avg_w", "energy_per_step_j",
                 "peak_vram_nvml_mb", "torch_peak_reserved_mb", "seed_vram_mb", "min_fit_mb")
DEVICE_KEYS = ("name", "memory_total_mb", "power_limit_w", "reserved_mb")


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def solo_overheads(feasibility: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per model: seconds from process start to the first training step, and from the last step to exit."""
    found: dict[str, dict[str, list[float]]] = {}
    for case in feasibility["cases"]:
        for solo in case["timeline"]["solo"]:
            entry = found.setdefault(solo["model"], {"startup_s": [], "finish_s": []})
            entry["startup_s"].append(solo["train_start_t"] - solo["start_t"])
            entry["finish_s"].append(solo["end_t"] - solo["train_end_t"])
    return found


def _unrestarted(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [session for sessions in summary["cases"].values() for session in sessions.values()
            if not session.get("fg_restarts") and not session.get("bg_restarts")]


def precision_rounds(summary: dict[str, Any]) -> float:
    """The median number of rounds of the study's case-sessions whose jobs never restarted."""
    return float(statistics.median(session["n_rounds"] for session in _unrestarted(summary)))


def precision_target(summary: dict[str, Any]) -> float:
    """The precision those case-sessions were measured to (one target for the whole study)."""
    return float(statistics.median(session["precision_target"] for session in _unrestarted(summary)))


def fit_figures(profiles: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per workload (at default hyperparameters): the seconds its fit profile's starts took together,
    and its whole-run and steady need on the card it was measured on."""
    figures = {}
    for raw in profiles:
        profile = FitProfile.model_validate(raw)
        if profile.builtin and profile.starts:
            figures[profile.workload] = {"fit_s": round(sum(s.seconds for s in profile.starts), 1),
                                         "fit_need_mb": profile.need_mb, "fit_steady_mb": profile.steady_mb,
                                         "fit_card_mb": profile.card_mb}
    return figures


def _workload(row: dict[str, Any], overheads: dict[str, list[float]] | None,
              fit: dict[str, float] | None) -> dict[str, Any]:
    entry = {k: _round(row.get(k)) for k in WORKLOAD_KEYS if row.get(k) is not None}
    for key in ("startup_s", "finish_s"):
        if overheads:
            entry[key] = round(statistics.median(overheads[key]), 2)
    entry.update({key: value for key, value in (fit or {}).items() if value is not None})
    return entry


def build(profiles: dict[str, Any], feasibility: dict[str, Any], default_method: dict[str, Any],
          fits: list[dict[str, Any]] = ()) -> dict[str, Any]:
    overheads = solo_overheads(feasibility)
    fit = fit_figures(list(fits))
    typical = {key: round(statistics.median(v for o in overheads.values() for v in o[key]), 2)
               for key in ("startup_s", "finish_s")}
    typical["precision_rounds"] = precision_rounds(default_method)
    typical["precision_target"] = precision_target(default_method)
    device = profiles.get("device") or {}
    return {"sources": [str(p.relative_to(ROOT)) for p in (PROFILES, FEASIBILITY, FIT_PROFILES, DEFAULT_METHOD)],
            "device": {k: device.get(k) for k in DEVICE_KEYS},
            "idle_power_w": _round(profiles.get("idle_power_w")),
            "min_fit_method": profiles.get("min_fit_method"),
            "typical": typical,
            "workloads": [_workload(w, overheads.get(w["model"]), fit.get(w["model"])) for w in profiles["workloads"]],
            "pairs": [{"models": p["models"], "min_fit_mb": p.get("min_fit_mb")} for p in profiles.get("pairs", [])]}


def render() -> str:
    fits = [json.loads(p.read_text()) for p in sorted(FIT_PROFILES.glob("*.json"))]
    data = build(*(json.loads(p.read_text()) for p in (PROFILES, FEASIBILITY, DEFAULT_METHOD)), fits)
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main() -> int:
    TARGET.write_text(render())
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
