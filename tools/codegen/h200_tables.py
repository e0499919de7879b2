"""The package's H200 planning table and measured pairs, distilled from the planner's reference set
measured on an H200 (``reports/reference/planner_validation/reference/``):

    python -m tools.codegen.h200_tables     # rewrites pytest_gpu_pairs/planning/*_h200.json

A plan for an H200 judged by the H100 table errs several times more than one judged by the H200's own
profiles (the reference README has the figures): the same job keeps a faster card less busy. So the
package carries each card's table the project measured, and ``gpu-pairs plan`` picks the one of the
GPU it runs on (``planning.cards``).

- ``workload_profiles_h200.json``: every built-in alone on the H200 (``gpu-pairs profile``, the
  study's ``profiles`` step, in ``_profiles/``): step time, NVML utilisation, power, energy per
  step, NVML peak memory, start-up; the card's memory, power limit and idle power from the
  session's ``session.json``. The study's profiles predate GPM, so each workload's SM and DRAM
  shares while busy (``sm_per_busy``, ``dram_per_busy``) are the mean of two later
  ``gpu-pairs profile`` sessions on the H200 that took them (``gpm/first``, ``gpm/second``): per
  busy time a kernel's share is its own, not the host's, so they go with the study's busy fractions
  (the MPS model otherwise reads a job's SM share from its power); no min fit: a pair's fit rests
  on the NVML peaks.
- ``reference_pairs_h200.json``: every pair of the reference set measured so far, as
  ``tools.codegen.reference_pairs`` distils the H100's, with each job's busy fraction in the
  pair's solo phases (``solo_gpu_busy``) as ``planning.measured`` reads it again from the cases'
  ``gpu_samples.csv`` (the readings settled after each switch; the records keep the figures they
  were measured with), and the pairs measured again in a later session (``remeasured/``: those whose
  first interval was wider than ±5 %; ``sampled/``: five of the others, drawn at random;
  ``second-session/``: eighteen of the 21 time-sliced pairs still measured once, in a random order
  drawn before the first ran, on two more hosts, the other three on a fifth, and seventeen of the 31
  MPS pairs still measured once, the same way, on a third, the other fourteen on a fourth;
  ``third-session/``: the thirteen pairs still wider than ±5 % after two, then every other time-sliced
  pair in a random order, on three more hosts, then MPS pairs measured twice in a random order, on a
  fourth, a fifth and a sixth, until every pair had three), each pair the mean of its sessions. Its MPS pairs
  are those with no thread limit (``mps_nolimit/``): each job's solo phases there, as time-sliced,
  are the job alone on the whole card, so the two mechanisms' efficiencies share a baseline, and MPS
  means what a user gets from a daemon started with no limit.
  The pairs at 52 % of the threads (``mps/``) are validated on their own and not carried: a job alone
  at 52 % steps slower than alone, and their efficiencies read high for jobs that fill the card.

A unit test regenerates both and compares, so the package and the references cannot drift apart.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pytest_gpu_pairs.planning.measured import read_measured
from pytest_gpu_pairs.planning.own_profiles import (
    GpmPerBusy,
    OwnProfile,
    gpm_per_busy,
    profiles_here,
    read_own_profiles,
    same_job,
)
from tools.codegen import reference_pairs

ROOT = reference_pairs.ROOT
REFERENCE = ROOT / "reports/reference/planner_validation/reference"
FOLDERS = tuple(REFERENCE / name for name in ("timeslice", "mps_nolimit") if (REFERENCE / name).is_dir())
AGAIN = ("remeasured/timeslice", "remeasured/mps_nolimit", "sampled/timeslice", "second-session/gpu-130be1de/timeslice",
         "second-session/gpu-6ca35074/timeslice", "second-session/gpu-325b2df4/mps_nolimit",
         "second-session/gpu-d7f0b905/mps_nolimit", "second-session/gpu-3eeea14c/timeslice",
         "third-session/gpu-73d41a03/timeslice", "third-session/gpu-73d41a03/mps_nolimit",
         "third-session/gpu-7e1a6050/timeslice", "third-session/gpu-50adcf8f/timeslice",
         "third-session/gpu-73b529a6/mps_nolimit", "third-session/gpu-73d9026e/mps_nolimit",
         "third-session/gpu-14510562/mps_nolimit")
PAIR_FOLDERS = (*FOLDERS, *(REFERENCE / again for again in AGAIN if (REFERENCE / again).is_dir()))
GPM_FOLDERS = tuple(REFERENCE / "gpm" / name for name in ("first", "second") if (REFERENCE / "gpm" / name).is_dir())
PROFILES_TARGET = ROOT / "pytest_gpu_pairs/planning/workload_profiles_h200.json"
PAIRS_TARGET = ROOT / "pytest_gpu_pairs/planning/reference_pairs_h200.json"


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def _workload(p: OwnProfile, elsewhere: GpmPerBusy) -> dict[str, Any]:
    entry = {"model": p.workload, "ok": True, "device": p.device, "batch_size": p.batch_size,
             "step_time_s": p.step_time_s, "util_avg_pct": p.util_avg_pct, "power_avg_w": p.power_avg_w,
             "energy_per_step_j": p.energy_per_step_j, "peak_vram_nvml_mb": p.peak_memory_mb,
             "gpm_sm_util_pct": p.gpm_sm_util_pct, "gpm_dram_bw_pct": p.gpm_dram_bw_pct,
             "min_fit_mb": p.min_fit_mb, "startup_s": None if p.startup_s is None else round(p.startup_s, 2)}
    if p.gpm_sm_util_pct is None:
        entry |= {"sm_per_busy": elsewhere.sm, "dram_per_busy": elsewhere.dram}
    return {key: _round(value) for key, value in entry.items() if value is not None}


def _cuda_builtins(folders: tuple[Path, ...]) -> list[OwnProfile]:
    return [p for folder in folders for p in read_own_profiles(folder).profiles if p.builtin and p.device == "cuda"]


def profiles_table(folders: tuple[Path, ...] = FOLDERS, gpm_folders: tuple[Path, ...] = GPM_FOLDERS) -> dict[str, Any]:
    """The folders' profiles in the packaged format, with the GPM shares of ``gpm_folders``; the card
    as ``--profiles-here`` reads it."""
    card = profiles_here(list(folders))
    unique = {p.workload: p for p in sorted(_cuda_builtins(folders), key=lambda p: p.source)}
    gpm = _cuda_builtins(gpm_folders)
    shares = {name: gpm_per_busy(q for q in gpm if same_job(p, q)) for name, p in unique.items()}
    used = [q for q in gpm if q.workload in shares and shares[q.workload].windows]
    return {"sources": sorted({str(Path(p.source).parent.relative_to(ROOT)) for p in [*unique.values(), *used]}),
            "device": {"name": card.device_name, "memory_total_mb": card.memory_total_mb,
                       "power_limit_w": card.power_limit_w, "reserved_mb": None},
            "idle_power_w": _round(card.idle_power_w),
            "min_fit_method": None, "typical": {},
            "workloads": [_workload(p, shares[name]) for name, p in sorted(unique.items())], "pairs": []}


def render() -> tuple[str, str]:
    table = profiles_table()
    pairs = reference_pairs.build(read_measured(list(PAIR_FOLDERS)), table["device"]["name"], PAIR_FOLDERS)
    return (json.dumps(table, indent=1, sort_keys=True) + "\n", json.dumps(pairs, indent=1, sort_keys=True) + "\n")


def main() -> int:
    profiles, pairs = render()
    PROFILES_TARGET.write_text(profiles)
    PAIRS_TARGET.write_text(pairs)
    print(f"wrote {PROFILES_TARGET.relative_to(ROOT)} and {PAIRS_TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
