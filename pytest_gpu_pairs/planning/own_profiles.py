"""Profiles measured here: what ``gpu-pairs profile`` stored of a workload run alone, found by the
next session in ``<results folder>/_profiles/`` and read as untrusted input.

One file per workload and device (``<workload>.<device>.json``, the newest profile replacing the
one before): start-up, seconds per step and the time between step reports, the epoch length in
steps where known, the whole run where it ended inside the profile, peak memory, power, and a
reason for every figure that could not be measured. The estimator uses a profile for a job of the
same workload (and, for a command workload, the same command) on the same device; the planner
uses the GPU ones. A bad file is one line naming the file, the JSON path and what was expected.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.inputs import SettingsError, first_error, read_json
from pytest_gpu_pairs.planning.profiles import Profiles, SoloProfile, per_busy, per_busy_or
from pytest_gpu_pairs.record.store import machine_from_session, profile_paths, read_session

KIND = "gpu-pairs workload profile"
VERSION = 1
BASIS = "profile (measured here)"
_Seconds = Optional[float]


def _number(value: Any) -> Optional[float]:
    return None if value is None else float(value)


class _File(BaseModel):
    """The stored profile's shape; every figure may be null (the ``unmeasured`` reasons say why)."""

    model_config = ConfigDict(extra="allow")
    kind: Literal["gpu-pairs workload profile"]
    version: Literal[1]
    workload: StrictStr = Field(min_length=1, max_length=200)
    builtin: StrictBool
    command: Optional[list[StrictStr]] = None
    hyperparameters: dict[StrictStr, Any] = {}
    device: Literal["cpu", "cuda"]
    device_name: Optional[StrictStr] = None
    measured_at: Optional[StrictStr] = None
    scale: Optional[StrictFloat] = Field(None, gt=0)
    batch_size: Optional[StrictInt] = Field(None, gt=0)
    steps_per_epoch: Optional[StrictInt] = Field(None, gt=0)
    startup_s: Optional[StrictFloat] = Field(None, ge=0)
    step_time_s: Optional[StrictFloat] = Field(None, gt=0)
    report_gap_s: Optional[StrictFloat] = Field(None, ge=0)
    run_s: Optional[StrictFloat] = Field(None, ge=0)
    run_steps: Optional[StrictInt] = Field(None, ge=0)
    peak_memory_mb: Optional[StrictFloat] = Field(None, ge=0)
    memory_kind: Optional[StrictStr] = None
    util_avg_pct: Optional[StrictFloat] = Field(None, ge=0, le=100)
    gpm_sm_util_pct: Optional[StrictFloat] = Field(None, ge=0, le=100)
    gpm_dram_bw_pct: Optional[StrictFloat] = Field(None, ge=0, le=100)
    power_avg_w: Optional[StrictFloat] = Field(None, ge=0)
    energy_per_step_j: Optional[StrictFloat] = Field(None, ge=0)
    min_fit_mb: Optional[StrictFloat] = Field(None, gt=0)
    unmeasured: dict[StrictStr, StrictStr] = {}


@dataclass(frozen=True)
class OwnProfile:
    """One workload alone on this machine's device, as the estimator and the planner use it."""

    workload: str
    builtin: bool
    command: Optional[tuple[str, ...]]
    device: str
    device_name: Optional[str]
    source: str
    scale: Optional[float] = None
    batch_size: Optional[int] = None
    steps_per_epoch: Optional[int] = None
    startup_s: _Seconds = None
    step_time_s: _Seconds = None
    report_gap_s: _Seconds = None
    run_s: _Seconds = None
    run_steps: Optional[int] = None
    peak_memory_mb: Optional[float] = None
    util_avg_pct: Optional[float] = None
    power_avg_w: Optional[float] = None
    energy_per_step_j: Optional[float] = None
    min_fit_mb: Optional[float] = None
    gpm_sm_util_pct: Optional[float] = None
    gpm_dram_bw_pct: Optional[float] = None

    def matches(self, job: JobConfig, device: str) -> bool:
        """Same workload on the same device; a command workload also by the same command."""
        if self.workload != job.model or self.device != device or self.builtin != job.is_builtin:
            return False
        return job.is_builtin or (job.command is not None and self.command == tuple(job.command.command))

    def run_train_s(self) -> Optional[float]:
        """The training part of a whole run that ended inside the profile (start-up left out)."""
        if self.run_s is None:
            return None
        return max(0.0, self.run_s - (self.startup_s or 0.0))


@dataclass(frozen=True)
class OwnProfiles:
    profiles: tuple[OwnProfile, ...] = ()
    sources: tuple[str, ...] = field(default=())

    def for_job(self, job: JobConfig, device: str) -> Optional[OwnProfile]:
        return next((p for p in self.profiles if p.matches(job, device)), None)

    def on(self, device: str) -> dict[str, OwnProfile]:
        return {p.workload: p for p in self.profiles if p.device == device}


@dataclass(frozen=True)
class GpmPerBusy:
    """GPM's SM and DRAM-bandwidth shares while a workload's kernels run, over ``windows`` profiles."""

    sm: Optional[float] = None
    dram: Optional[float] = None
    windows: int = 0


def _busy_fraction(own: OwnProfile) -> Optional[float]:
    return own.util_avg_pct / 100.0 if own.util_avg_pct else None


def gpm_per_busy(profiles: Iterable[OwnProfile]) -> GpmPerBusy:
    """The mean per-busy GPM shares of the profiles that took them. Per busy time they are the
    kernels' own, not the host's: a busier host stretches the gaps between kernels, not the share
    of the card a kernel fills, so a profile without GPM can take them from another window."""
    read = [(per_busy(p.gpm_sm_util_pct, _busy_fraction(p)), per_busy(p.gpm_dram_bw_pct, _busy_fraction(p)))
            for p in profiles]
    sm = [s for s, _ in read if s is not None]
    dram = [d for _, d in read if d is not None]
    return GpmPerBusy(sum(sm) / len(sm) if sm else None, sum(dram) / len(dram) if dram else None, len(sm))


def same_job(a: OwnProfile, b: OwnProfile) -> bool:
    """The same workload (and command) on the same device and GPU model."""
    return (a.workload, a.builtin, a.command, a.device, a.device_name) == \
        (b.workload, b.builtin, b.command, b.device, b.device_name)


def solo_profile(own: OwnProfile, elsewhere: GpmPerBusy = GpmPerBusy()) -> SoloProfile:
    """A profile measured here as the planner's model reads one: NVML's utilisation is its busy
    share on a GPU; a CPU job occupies no GPU. GPM's shares, where the card gave them, are per busy
    time, as the packaged tables read them, else those read ``elsewhere`` (other windows of the same
    job on this GPU model); memory utilisation stays unknown, and the model does without it."""
    on_gpu = own.device == "cuda"
    busy = own.util_avg_pct / 100.0 if on_gpu and own.util_avg_pct is not None else (None if on_gpu else 0.0)
    return SoloProfile(own.workload, own.device, own.batch_size, own.step_time_s, busy, None,
                       per_busy_or(own.gpm_sm_util_pct, busy, elsewhere.sm),
                       per_busy_or(own.gpm_dram_bw_pct, busy, elsewhere.dram), None,
                       own.power_avg_w if on_gpu else None, own.energy_per_step_j if on_gpu else None,
                       own.peak_memory_mb if on_gpu else None, own.min_fit_mb, None, own.startup_s, None,
                       own.util_avg_pct if on_gpu else None)


def with_own(profiles: Profiles, own: OwnProfiles, device: str) -> tuple[Profiles, frozenset[str]]:
    """The table with the workloads it lacks (a user's command workload) taken from the profiles
    measured here on ``device``, and the names so added. A workload the table has keeps the
    table's figures: the corrections learned from the reference pairs are residuals against them."""
    added = {name: solo_profile(p) for name, p in own.on(device).items() if profiles.get(name) is None}
    if not added:
        return profiles, frozenset()
    return replace(profiles, workloads={**profiles.workloads, **added}), frozenset(added)


def busy_measured_here(table: Profiles, own: OwnProfiles, device: str) -> dict[str, float]:
    """The busy fractions profiled here of the workloads the table holds, where the table is of this
    GPU model and the profile ran at the table's batch size: a host-bound job keeps the card busier on
    a faster host, and on the host that runs the pairs its own profile says how busy (the table's other
    figures, and what the planner learnt from its reference pairs, stay as they are)."""
    if device != "cuda" or table.device_name is None:
        return {}
    found = {}
    for name, p in own.on("cuda").items():
        entry = table.get(name)
        same_batch = entry is None or entry.batch_size is None or p.batch_size in (None, entry.batch_size)
        if entry is not None and p.device_name == table.device_name and p.util_avg_pct is not None and same_batch:
            found[name] = p.util_avg_pct / 100.0
    return found


def measured_here(own: OwnProfiles, device: str = "cuda", cards: Sequence[Mapping[str, Any]] = ()) -> Optional[Profiles]:
    """The planner's table made of the profiles measured here on ``device`` alone, for planning and
    validating on the GPU they were measured on: the package's H100 table would judge its pairs by
    another card. The card's size, idle power and power limit come from ``cards`` (machine facts of
    results folders) of the same GPU model, else stay unknown (energy predictions then say so).
    None where nothing was profiled on ``device``; a ``SettingsError`` where the profiles are of two
    GPU models."""
    found = own.on(device)
    if not found:
        return None
    names = sorted({p.device_name or "an unnamed device" for p in found.values()})
    if len(names) > 1:
        first = min(found.values(), key=lambda p: p.source)
        raise SettingsError(first.source, "$.device_name", f"expected profiles of one GPU model, got {', '.join(names)}")
    folders = sorted({str(Path(p.source).parent.parent) for p in found.values()})
    card = next((c for c in cards if c.get("gpu_name") == names[0]), {})
    return Profiles(source=f"gpu-pairs profile in {', '.join(folders)}", device_name=names[0],
                    memory_total_mb=card.get("memory_total_mb"), power_limit_w=card.get("power_limit_w"),
                    idle_power_w=card.get("idle_power_w"), min_fit_method=None, reserved_mb=None,
                    workloads={name: solo_profile(p, gpm_per_busy(q for q in own.profiles if same_job(p, q)))
                               for name, p in sorted(found.items())}, pair_min_fit_mb={})


def parse_profile(raw: object, source: str) -> OwnProfile:
    try:
        data = _File.model_validate(raw)
    except ValidationError as exc:
        raise first_error(exc, source) from None
    if not data.builtin and not data.command:
        raise SettingsError(source, "$.command", "expected the command of a command workload (a list of strings)")
    return OwnProfile(data.workload, data.builtin, tuple(data.command) if data.command else None, data.device,
                      data.device_name, source, data.scale, data.batch_size, data.steps_per_epoch,
                      _number(data.startup_s), _number(data.step_time_s), _number(data.report_gap_s),
                      _number(data.run_s), data.run_steps, _number(data.peak_memory_mb), _number(data.util_avg_pct),
                      _number(data.power_avg_w), _number(data.energy_per_step_j), _number(data.min_fit_mb),
                      _number(data.gpm_sm_util_pct), _number(data.gpm_dram_bw_pct))


def read_profile(path: Path) -> OwnProfile:
    return parse_profile(read_json(path), str(path))


def read_own_profiles(out_dir: Optional[Path]) -> OwnProfiles:
    """Every profile stored under ``out_dir``; ``SettingsError`` in one line for the first bad one."""
    paths: Sequence[Path] = profile_paths(out_dir)
    return OwnProfiles(tuple(read_profile(p) for p in paths), tuple(str(p) for p in paths))


class ProfilesHereError(ValueError):
    """``--profiles-here`` that cannot be used (no GPU profile in the folders, or ``--profiles`` too):
    one line saying what to do."""


def profiles_here(folders: Sequence[Path], device: str = "cuda") -> Profiles:
    """The planner's table from the profiles `gpu-pairs profile` stored in ``folders`` (their
    ``_profiles/``), the card's facts from their ``session.json``."""
    own = OwnProfiles(tuple(p for folder in folders for p in read_own_profiles(folder).profiles))
    cards = [machine_from_session(session) for folder in folders if folder.is_dir()
             and (session := read_session(folder)) is not None]
    here = measured_here(own, device, cards)
    if here is None:
        raise ProfilesHereError(f"--profiles-here: no {device} profile in the _profiles/ of {', '.join(map(str, folders))} "
                             f"(gpu-pairs profile SETTINGS --device {device} --out <results folder> stores them there)")
    return here
