"""The record's keys in typed groups, as the builders measure them: the case's facts, the
foreground's timing, the background's figures, sharing, GPU energy and memory, CPU energy, the
outcome, where it was measured, and how an interleaved case was measured.

A builder fills one group per part of a measurement, with keyword arguments a type checker reads
(a misspelt key or a figure of the wrong type is an error before anything runs), and ``merged``
puts the groups together into the record's keys. Each field is a key of ``record/keys.py``, typed
as ``record/fields.py`` types it (a test holds them to it). A field a builder leaves out is no key of
the record; one it sets to None is a key that could not be measured, with its reason in ``notes``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

from pytest_gpu_pairs.record.fields import JobFigures, Number

G = TypeVar("G", bound="Group")


class Group(BaseModel):
    """Some keys of the record, typed; only the fields a builder set are keys it gives."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def keys_set(self) -> dict[str, Any]:
        """The keys a builder set, in the group's order (a round is kept as this dict, its typed
        entries as the plain data they are on disk)."""
        return {name: _plain(getattr(self, name)) for name in type(self).model_fields if name in self.model_fields_set}

    def without(self: G, keys: Iterable[str]) -> G:
        """A copy with those of ``keys`` this group holds set to None: figures that cannot stand."""
        return self.model_copy(update={key: None for key in keys if key in type(self).model_fields})


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else item for item in value]
    return value


def merged(*parts: Group | Mapping[str, Any]) -> dict[str, Any]:
    """The keys of every part as one record's; a key that two parts set is refused, so no part
    quietly overrides another's figure."""
    record: dict[str, Any] = {}
    for part in parts:
        keys = part.keys_set() if isinstance(part, Group) else dict(part)
        twice = sorted(set(keys) & set(record))
        if twice:
            raise ValueError(f"record keys set by two groups: {', '.join(twice)}")
        record.update(keys)
    return record


class CaseFacts(Group):
    """What the case is (``experiment.cases.describe``), its mode, and the limits it is checked against."""

    case_id: Optional[StrictStr] = None
    design: Optional[StrictStr] = None
    variant: Optional[StrictStr] = None
    mode: Optional[StrictStr] = None
    sharing: Optional[StrictStr] = None
    method: Optional[StrictStr] = None
    fg_model: Optional[StrictStr] = None
    bg_model: Optional[StrictStr] = None
    fg_hparams: Optional[dict[str, Any]] = None
    bg_hparams: Optional[dict[str, Any]] = None
    fg_runs: Optional[StrictInt] = None
    n_jobs: Optional[StrictInt] = None
    vram_budget_mb: Optional[Number] = None
    vram_budget_source: Optional[StrictStr] = None
    min_efficiency: Optional[Number] = None


class Timing(Group):
    """How long the foreground trained: beside the background, alone, and the window measured."""

    fg_duration_s: Optional[Number] = None
    fg_wall_s: Optional[Number] = None
    fg_startup_s: Optional[Number] = None
    duration_basis: Optional[StrictStr] = None
    fg_progress_source: Optional[StrictStr] = None
    fg_solo_duration_s: Optional[Number] = None
    fg_solo_steps_per_s: Optional[Number] = None
    fg_steps_in_window: Optional[Number] = None
    window_s: Optional[Number] = None


class Background(Group):
    """The background's runs and progress during the foreground's window."""

    bg_runs: Optional[Number] = None
    bg_failures: Optional[Number] = None
    bg_coverage: Optional[Number] = None
    bg_progress_ratio: Optional[Number] = None
    bg_speed_ratio: Optional[Number] = None
    bg_progress_source: Optional[StrictStr] = None
    bg_steps_in_window: Optional[Number] = None
    bg_solo_steps_per_s: Optional[Number] = None
    bg_alone_steps_per_s: Optional[Number] = None
    bg_alone_drift: Optional[Number] = None
    bg_peak_mem_reserved_mb: Optional[Number] = None
    bg_perf: Optional[dict[str, Any]] = None
    bg_cycle_perf: Optional[list[dict[str, Any]]] = None


class Sharing(Group):
    """What sharing the device cost the foreground, and the work the pair did together."""

    fg_slowdown: Optional[Number] = None
    concurrency_efficiency: Optional[Number] = None


class Memory(Group):
    """Peaks of NVML per-process memory: the case's jobs, each job, others, the MPS server."""

    peak_vram_mb: Optional[Number] = None
    fg_peak_vram_mb: Optional[Number] = None
    bg_peak_vram_mb: Optional[Number] = None
    other_peak_vram_mb: Optional[Number] = None
    mps_server_vram_mb: Optional[Number] = None


class EnergySplit(Group):
    """The energy above idle split between the jobs, and how."""

    fg_gpu_energy_j: Optional[Number] = None
    bg_gpu_energy_j: Optional[Number] = None
    energy_split_method: Optional[StrictStr] = None


class SerialComparison(Group):
    """The window's energy against the same work run one job after the other."""

    serial_energy_j: Optional[Number] = None
    energy_saved_vs_serial: Optional[Number] = None


class GpuEnergy(Group):
    """The card's energy, power, utilisation and temperature over the window, and each job's per step."""

    gpu_energy_j: Optional[Number] = None
    gpu_energy_above_idle_j: Optional[Number] = None
    gpu_power_avg_w: Optional[Number] = None
    gpu_power_max_w: Optional[Number] = None
    gpu_util_avg_pct: Optional[Number] = None
    gpu_temp_max_c: Optional[Number] = None
    fg_gpu_energy_per_step_j: Optional[Number] = None
    bg_gpu_energy_per_step_j: Optional[Number] = None


class CpuEnergy(Group):
    """The CPU package's energy over the window (RAPL)."""

    cpu_energy_j: Optional[Number] = None
    cpu_energy_method: Optional[StrictStr] = None


class Outcome(Group):
    """How the case ended: out of memory, a failure, the foreground's exit and what it learned."""

    oom: Optional[StrictBool] = None
    failure: Optional[StrictStr] = None
    fg_exit_code: Optional[StrictInt] = None
    fg_peak_mem_reserved_mb: Optional[Number] = None
    perf: Optional[dict[str, Any]] = None
    mps: Optional[dict[str, Any]] = None


class Where(Group):
    """Where the case was measured: the device, the scale, sampling, idle power, the jobs' CPUs."""

    device: Optional[StrictStr] = None
    gpu_uuid: Optional[StrictStr] = None
    host: Optional[StrictStr] = None
    scale: Optional[Number] = None
    sample_hz: Optional[Number] = None
    idle_power_w: Optional[Number] = None
    idle_power_method: Optional[StrictStr] = None
    job_cpus: Optional[dict[str, Any]] = None


class Interleaving(Group):
    """How an interleaved case was measured: its phases, warm-up, rounds and stopping rule."""

    repeats: Optional[StrictInt] = None
    phase_s: Optional[Number] = None
    settle_s: Optional[Number] = None
    warmup_rule: Optional[StrictStr] = None
    warmup_s: Optional[Number] = None
    gpu_seconds: Optional[Number] = None
    stop_reason: Optional[StrictStr] = None
    precision_target: Optional[Number] = None
    precision_reached: Optional[StrictBool] = None


class Restarts(Group):
    """Jobs of an interleaved case that finished their run and were started again, and what that cost."""

    fg_restarts: Optional[StrictInt] = None
    bg_restarts: Optional[StrictInt] = None
    rounds_discarded: Optional[StrictInt] = None
    restarts: Optional[list[Any]] = None


class InterleavedRound(Group):
    """One interleaved round's figures, kept as one entry of the record's ``rounds``: which round
    and segment, whether its pair phase was bracketed, whether it counts, its rates, energies and
    the card's state, and its phases. Its fields are those of a round (``record.model.Round``)."""

    round: Optional[StrictInt] = None
    segment: Optional[StrictInt] = None
    bracketed: Optional[StrictBool] = None
    complete: Optional[StrictBool] = None
    concurrency_efficiency: Optional[Number] = None
    fg_slowdown: Optional[Number] = None
    bg_progress_ratio: Optional[Number] = None
    gpu_energy_j: Optional[Number] = None
    gpu_energy_above_idle_j: Optional[Number] = None
    fg_gpu_energy_j: Optional[Number] = None
    bg_gpu_energy_j: Optional[Number] = None
    fg_gpu_energy_per_step_j: Optional[Number] = None
    bg_gpu_energy_per_step_j: Optional[Number] = None
    fg_alone_energy_j: Optional[Number] = None
    bg_alone_energy_j: Optional[Number] = None
    serial_energy_j: Optional[Number] = None
    energy_saved_vs_serial: Optional[Number] = None
    gpu_power_avg_w: Optional[Number] = None
    fg_steps_per_s: Optional[Number] = None
    fg_solo_steps_per_s: Optional[Number] = None
    bg_steps_per_s: Optional[Number] = None
    bg_solo_steps_per_s: Optional[Number] = None
    window_s: Optional[Number] = None
    fg_solo_gpu_busy: Optional[Number] = None
    bg_solo_gpu_busy: Optional[Number] = None
    pair_gpu_busy: Optional[Number] = None
    efficiency_bound: Optional[Number] = None
    sm_clock_mhz: Optional[Number] = None
    mem_clock_mhz: Optional[Number] = None
    power_limit_w: Optional[Number] = None
    gpu_temp_max_c: Optional[Number] = None
    clock_event_reasons: Optional[list[Any]] = None
    phases: Optional[list[dict[str, Any]]] = None
    jobs: Optional[list[JobFigures]] = None


GROUPS: tuple[type[Group], ...] = (CaseFacts, Timing, Background, Sharing, Memory, EnergySplit, SerialComparison,
                                   GpuEnergy, CpuEnergy, Outcome, Where, Interleaving, Restarts)
