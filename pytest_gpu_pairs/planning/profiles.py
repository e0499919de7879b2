"""Solo workload profiles in: the one table the estimator and the planner both read, the package's
H100 profiles or a profile file of the user's own card, read as untrusted input.

A profile file is ``{"device": {...}, "idle_power_w": W, "typical": {"startup_s": S, "finish_s": S},
"workloads": [{"model": ..., ...}], "pairs": [{"models": [a, b], "min_fit_mb": N}]}``, the format
of the package's own file; every figure may be missing or null (an older profile, a
figure that could not be measured), and the estimator and the planner say what they did without
it. The packaged file is made by ``tools/codegen/workload_profiles.py``. A bad file is one line
naming the file, the JSON path and what was expected.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictStr, ValidationError

from pytest_gpu_pairs.inputs import SettingsError, first_error, read_json

PACKAGED = Path(__file__).with_name("workload_profiles.json")
_Number = Optional[StrictFloat]  # whole numbers are accepted, strings and booleans not


class _Workload(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: StrictStr
    ok: Optional[StrictBool] = True
    device: Optional[StrictStr] = "cuda"
    batch_size: _Number = None
    step_time_s: _Number = None
    util_avg_pct: _Number = None
    mem_util_avg_pct: _Number = None
    gpm_sm_util_pct: _Number = None
    gpm_dram_bw_pct: _Number = None
    sm_per_busy: _Number = None  # GPM's SM share while busy, from other profiles of this card (0-1)
    dram_per_busy: _Number = None  # GPM's DRAM bandwidth share while busy, likewise
    host_share: _Number = None
    power_avg_w: _Number = None
    energy_per_step_j: _Number = None
    peak_vram_nvml_mb: _Number = None
    torch_peak_reserved_mb: _Number = None
    seed_vram_mb: _Number = None
    min_fit_mb: _Number = None
    startup_s: _Number = None
    finish_s: _Number = None
    fit_s: _Number = None  # measuring its whole-run fit profile (two starts) took this long
    fit_need_mb: _Number = None  # the most it held at any point of a whole run on the card fit_card_mb
    fit_steady_mb: _Number = None  # the most it held training steadily there
    fit_card_mb: _Number = None


class _PairFit(BaseModel):
    model_config = ConfigDict(extra="allow")
    models: list[StrictStr]
    min_fit_mb: _Number = None


class _Device(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: Optional[StrictStr] = None
    memory_total_mb: _Number = None
    power_limit_w: _Number = None
    reserved_mb: _Number = None


class _Typical(BaseModel):
    model_config = ConfigDict(extra="allow")
    startup_s: _Number = None
    finish_s: _Number = None
    precision_rounds: _Number = None  # interleaved rounds a case takes to its precision target
    precision_target: _Number = None  # the target those rounds reached


class _File(BaseModel):
    model_config = ConfigDict(extra="allow")
    device: _Device = _Device()
    typical: _Typical = _Typical()
    idle_power_w: _Number = None
    min_fit_method: Optional[StrictStr] = None
    workloads: list[_Workload]
    pairs: list[_PairFit] = []


@dataclass(frozen=True)
class SoloProfile:
    """One workload alone, as the planner uses it: fractions 0-1, MB, W, J."""

    model: str
    device: str
    batch_size: Optional[int]
    step_time_s: Optional[float]
    busy: Optional[float]  # fraction of time a kernel of the job ran (NVML utilisation, else 1 - host share)
    mem_busy: Optional[float]  # fraction of time the memory was read or written (NVML memory utilisation)
    sm_share: Optional[float]  # fraction of the SMs busy while the job's kernels run (GPM), if measured
    dram_share: Optional[float]  # fraction of DRAM bandwidth used while they run (GPM), if measured
    host_share: Optional[float]
    power_w: Optional[float]
    energy_per_step_j: Optional[float]
    peak_vram_mb: Optional[float]
    min_fit_mb: Optional[float]
    seed_vram_mb: Optional[float]
    startup_s: Optional[float] = None  # process start to the first training step
    finish_s: Optional[float] = None  # last training step to the process's exit
    util_pct: Optional[float] = None  # NVML utilisation as measured (the estimator's time-slicing rule)
    fit_s: Optional[float] = None  # seconds its whole-run fit profile took to measure
    fit_need_mb: Optional[float] = None  # its whole-run need on the card fit_card_mb (fit profile)
    fit_steady_mb: Optional[float] = None
    fit_card_mb: Optional[float] = None

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"

    @property
    def need_mb(self) -> Optional[float]:
        """What the job needs of a card: its measured min fit (the card's reserve included), else
        its NVML peak (the process alone; the card's reserve comes on top)."""
        if not self.on_gpu:
            return 0.0
        return self.min_fit_mb if self.min_fit_mb is not None else self.peak_vram_mb

    @property
    def need_basis(self) -> str:
        if not self.on_gpu:
            return "cpu job"
        if self.min_fit_mb is not None:
            return "min fit"
        return "NVML peak" if self.peak_vram_mb is not None else "unknown"


@dataclass(frozen=True)
class Profiles:
    source: str
    device_name: Optional[str]
    memory_total_mb: Optional[float]
    power_limit_w: Optional[float]
    idle_power_w: Optional[float]
    min_fit_method: Optional[str]
    reserved_mb: Optional[float]  # what the card holds before any job: the driver's share (NVML)
    workloads: dict[str, SoloProfile]
    pair_min_fit_mb: dict[frozenset, float]
    typical_startup_s: Optional[float] = None
    typical_finish_s: Optional[float] = None
    precision_rounds: Optional[float] = None
    precision_target: Optional[float] = None

    def get(self, model: str) -> Optional[SoloProfile]:
        return self.workloads.get(model)


def _fraction(pct: Optional[float]) -> Optional[float]:
    return None if pct is None else min(1.0, max(0.0, pct / 100.0))


def per_busy(pct: Optional[float], busy: Optional[float]) -> Optional[float]:
    """A whole-window percentage as a share of the time the job's kernels ran."""
    if pct is None or not busy:
        return None
    return min(1.0, max(0.0, pct / 100.0 / busy))


def per_busy_or(pct: Optional[float], busy: Optional[float], elsewhere: Optional[float]) -> Optional[float]:
    """GPM's share per busy time from the profile's own window, else as read in other windows of the
    same workload on the same card (a kernel's SM and bandwidth share is its own, not the host's)."""
    own = per_busy(pct, busy)
    return own if own is not None else elsewhere


def _busy(entry: _Workload) -> Optional[float]:
    if entry.device == "cpu":
        return 0.0
    if entry.util_avg_pct is not None:
        return _fraction(entry.util_avg_pct)
    return None if entry.host_share is None else min(1.0, max(0.0, 1.0 - entry.host_share))


def _profile(entry: _Workload) -> SoloProfile:
    busy = _busy(entry)
    return SoloProfile(entry.model, entry.device or "cuda", int(entry.batch_size) if entry.batch_size else None,
                       entry.step_time_s, busy, _fraction(entry.mem_util_avg_pct),
                       per_busy_or(entry.gpm_sm_util_pct, busy, entry.sm_per_busy),
                       per_busy_or(entry.gpm_dram_bw_pct, busy, entry.dram_per_busy), entry.host_share,
                       entry.power_avg_w, entry.energy_per_step_j, entry.peak_vram_nvml_mb, entry.min_fit_mb,
                       entry.seed_vram_mb, entry.startup_s, entry.finish_s, entry.util_avg_pct, entry.fit_s,
                       entry.fit_need_mb, entry.fit_steady_mb, entry.fit_card_mb)


def _check_ranges(data: _File, source: str) -> None:
    for index, entry in enumerate(data.workloads):
        for key in ("util_avg_pct", "mem_util_avg_pct", "gpm_sm_util_pct", "gpm_dram_bw_pct"):
            value = getattr(entry, key)
            if value is not None and not 0 <= value <= 100:
                raise SettingsError(source, f"$.workloads[{index}].{key}", f"expected a percentage 0-100, got {value!r}")
        for key in ("step_time_s", "power_avg_w", "min_fit_mb", "peak_vram_nvml_mb", "startup_s", "finish_s", "fit_s",
                    "fit_need_mb", "fit_steady_mb", "fit_card_mb"):
            value = getattr(entry, key)
            if value is not None and value < 0:
                raise SettingsError(source, f"$.workloads[{index}].{key}", f"expected a number >= 0, got {value!r}")
        for key in ("host_share", "sm_per_busy", "dram_per_busy"):
            value = getattr(entry, key)
            if value is not None and not 0 <= value <= 1:
                raise SettingsError(source, f"$.workloads[{index}].{key}", f"expected a fraction 0-1, got {value!r}")
    for index, pair in enumerate(data.pairs):
        if len(pair.models) != 2:
            raise SettingsError(source, f"$.pairs[{index}].models", f"expected two model names, got {pair.models!r}")


def parse(raw: object, source: str) -> Profiles:
    try:
        data = _File.model_validate(raw)
    except ValidationError as exc:
        raise first_error(exc, source) from None
    _check_ranges(data, source)
    workloads = {entry.model: _profile(entry) for entry in data.workloads if entry.ok is not False}
    pairs = {frozenset(p.models): float(p.min_fit_mb) for p in data.pairs if p.min_fit_mb is not None}
    return Profiles(source, data.device.name, data.device.memory_total_mb, data.device.power_limit_w,
                    data.idle_power_w, data.min_fit_method, data.device.reserved_mb, workloads, pairs,
                    data.typical.startup_s, data.typical.finish_s, data.typical.precision_rounds,
                    data.typical.precision_target)


def read_profiles(path: Optional[Path] = None) -> Profiles:
    """A profile file, or the profiles the package carries (the H100 reference); ``SettingsError``
    in one line when the file is unusable."""
    if path is None:
        return packaged()
    return parse(read_json(Path(path)), str(path))


def packaged() -> Profiles:
    """The package's H100 table, the estimator's (it asks for it per job)."""
    return read_packaged(PACKAGED)


@cache
def read_packaged(path: Path) -> Profiles:
    """A table the package carries, read once per process."""
    return parse(read_json(path), str(path))
