"""The solo baselines of a session: each job measured alone once and shared by every case; in a
resumed session, the solo case an earlier session recorded stands in for that measurement.

Always without MPS: both sharing mechanisms are compared with the same plain baseline."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.experiment.cases import JobConfig, baseline_case
from pytest_gpu_pairs.record.build import SoloBaseline, case_record
from pytest_gpu_pairs.record.measurement import Measurement
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import save_result
from pytest_gpu_pairs.run.device import Device
from pytest_gpu_pairs.run.outdir import OutputFolder
from pytest_gpu_pairs.run.round import measure_solo
from pytest_gpu_pairs.run.sharing import SharingManager


class SoloBaselines:
    """Keyed by the job and the session's scale; ``vram_budget_mb`` is the budget a baseline's own
    record is checked against (the cases decide it: ``experiment.cases.vram_budget``)."""

    def __init__(self, folder: OutputFolder, device: Device, sharing: SharingManager, scale: float,
                 vram_budget_mb: float):
        self.folder, self.device, self.sharing = folder, device, sharing
        self.scale, self.vram_budget_mb = scale, vram_budget_mb
        self._measured: dict[tuple, tuple[Measurement, Record]] = {}
        self._recorded: dict[tuple, tuple[Record, Path]] = {}

    def has(self, job: JobConfig) -> bool:
        return (job, self.scale) in self._measured or (job, self.scale) in self._recorded

    def measure(self, job: JobConfig, timeout_s: float) -> Measurement:
        """The job alone on the device, measured once per session and shared by every case using it;
        its record (mode ``solo``) is saved as ``<out>/_solo/<model>-<digest>/result.json``.

        Always without MPS: both sharing mechanisms are compared with the same plain baseline."""
        key = (job, self.scale)
        if key not in self._measured:
            self.sharing.release()
            out = self.folder.solo_dir(job, self.scale)
            shutil.rmtree(out, ignore_errors=True)
            env = self.device.environment()
            try:
                measurement = measure_solo(job, env, out, timeout_s)
            finally:
                self.device.release()
            case = baseline_case(job, f"_solo/{out.name}", timeout_s, self.vram_budget_mb)
            record = case_record(case, measurement, SoloBaseline.measured(measurement, env), None, env)
            save_result(out, record)
            self._measured[key] = (measurement, record)
        return self._measured[key][0]

    def cached(self, job: JobConfig) -> Optional[Measurement]:
        found = self._measured.get((job, self.scale))
        return found[0] if found else None

    def recorded(self, job: JobConfig) -> Optional[tuple[Record, Path]]:
        """The solo round of an earlier session that stands in for the job (this session resumed it and
        did not measure the job itself), and its folder."""
        key = (job, self.scale)
        return None if key in self._measured else self._recorded.get(key)

    def record(self, job: JobConfig) -> Optional[Record]:
        """The record of the job's solo baseline, for the comparisons of concurrent cases."""
        key = (job, self.scale)
        if key in self._measured:
            return self._measured[key][1]
        return self._recorded[key][0] if key in self._recorded else None

    def adopt(self, job: JobConfig, measurement: Measurement, record: Record) -> None:
        """A solo case's first round becomes the job's baseline: no job is measured alone twice."""
        self._measured.setdefault((job, self.scale), (measurement, record))

    def adopt_recorded(self, job: JobConfig, record: Record, folder: Path) -> None:
        """A resumed solo case's first round becomes the job's baseline, as it was in the session that
        measured it. A record that lacks a baseline's figures (written before they were recorded, or
        of a job that reports no steps) is not adopted: the job is measured again when a case needs it."""
        if record.failure or record.fg_steps_in_window is None or record.fg_solo_steps_per_s is None:
            return
        self._recorded.setdefault((job, self.scale), (record, folder))
