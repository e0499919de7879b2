"""One pytest session: its cases, its parts, what a resumed case may reuse, and the results.

The parts are the output folder, the device, the solo baselines, the sharing mechanisms and the
fit profiles.

Everything expensive is lazy: collection only reads settings files, and the device is opened
(and its idle power measured) when the first case runs, before any job has touched it. A case
reaches the parts through its ``CaseContext``, not through the session: the session sees a case
when it is built, when it is concluded, and when it is resumed.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import (
    Case,
    DuplicateCaseError,
    JobConfig,
    Overrides,
    dependency_group,
    describe,
    expand,
    expand_all,
    sharing_modes,
    vram_budget,
    with_sharing,
)
from pytest_gpu_pairs.experiment.load import load_experiment
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.checks import CaseResult
from pytest_gpu_pairs.record.keys import SCHEMA_VERSION
from pytest_gpu_pairs.record.model import KNOWN, Record
from pytest_gpu_pairs.record.store import (
    StoreError,
    complete_records,
    load_result,
    read_record,
    record_benchmark,
    save_result,
    typed,
    write_record,
    write_session,
)
from pytest_gpu_pairs.run.background import stop_all_loops
from pytest_gpu_pairs.run.case import CaseContext
from pytest_gpu_pairs.run.device import IDLE_METHOD_TEXT, Device
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.fitprofile import FitProfiles
from pytest_gpu_pairs.run.jobs import kill_all_jobs
from pytest_gpu_pairs.run.methods import method_of
from pytest_gpu_pairs.run.mps import stop_all_daemons, system_daemon_pid
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.outdir import OutputFolder, OutsideOutputFolder
from pytest_gpu_pairs.run.proctree import deferred_signals
from pytest_gpu_pairs.run.sharing import SharingManager
from pytest_gpu_pairs.run.solos import SoloBaselines
from pytest_gpu_pairs.run.time_limit import LeftOut, TimeLimit


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def job_settings(job: Optional[JobConfig]) -> Optional[dict[str, Any]]:
    """Everything a job runs as: its workload and effective hyperparameters, for a command workload
    all its settings say (argv, cwd, env, hyperparameter flags, ready, log and progress patterns),
    and its MPS limits."""
    if job is None:
        return None
    runs = {"runs": job.runs} if job.runs > 1 else {}
    return {"model": job.model, "hparams": job.hyperparameters,
            "command": job.command.model_dump(mode="json") if job.command is not None else None,
            "mps": job.mps.as_record() if job.mps is not None else None, **runs}


MEASUREMENT_SETTINGS = ("method", "sharing", "runs_per_config", "timeout_s", "ready_timeout_s", "restart_delay_s",
                        "crash_loop_failures", "crash_loop_window_s", "cool_down_s", "phase_s", "settle_s", "warmup_s",
                        "starts", "card_mb", "scaling")


def replicate_resumes(records: Sequence[Optional[Record]], measured_here: Callable[[Record], bool]) -> bool:
    """The rule for a replicate's complete results (None where a case has none): it resumes case by
    case where it is complete, or where every result it holds was measured here."""
    return all(r is not None for r in records) or all(r is None or measured_here(r) for r in records)


class GpuPairsSession:
    def __init__(self, options: GpuPairsOptions):
        self.options = options
        self.results: list[CaseResult] = []
        self._cases: Optional[list[Case]] = None
        self._planned: list[str] = []
        self._replicates: dict[str, bool] = {}  # dependency group -> whether its cases resume one by one
        self.overrides = Overrides(vram_budget_mb=options.vram_budget_mb, min_efficiency=options.min_efficiency,
                                   sharing=options.sharing, method=options.method, precision=options.precision,
                                   max_rounds=options.max_rounds, max_case_s=options.max_case_s,
                                   earlier_runs=lambda: complete_records(options.out_dir))
        self.folder = OutputFolder(options.out_dir, options.worker)
        self.sharing = SharingManager(self.folder.own_dir, options.mps_control, options.mps_threads,
                                      options.mps_mem_limit_mb)
        self.device = Device(options, self.folder, self._device_opened)
        self.solos = SoloBaselines(self.folder, self.device, self.sharing, options.scale, vram_budget(self.overrides))
        self.fits = FitProfiles(options.out_dir, options.gpu_memory_mb, options.worker)
        self.interrupted: list[str] = []
        self.estimates: dict[str, float] = {}  # case id -> estimated seconds, for the live line's ETA
        self.time_limit = TimeLimit(options.time_limit_s) if options.time_limit_s is not None else None
        self.record_extensions: Callable[[Case, dict[str, Any]], list[Optional[dict[str, Any]]]] = lambda case, r: []

    @property
    def context(self) -> CaseContext:
        """What a case runner may use of this session."""
        return CaseContext(self.folder, self.device, self.solos, self.sharing, self.fits, self.conclude, self.results)

    @property
    def own_dir(self) -> Path:
        """Where this session's own files go (``OutputFolder.own_dir``)."""
        return self.folder.own_dir

    @property
    def orphans_killed(self) -> list[int]:
        """Job processes an earlier pytest left running in the output folder, killed when the device opened."""
        return self.device.orphans_killed

    def claim_output_folder(self) -> None:
        """Before any case: the output folder is this session's alone (``OutputFolder.claim``)."""
        self.folder.claim()

    def release_output_folder(self) -> None:
        self.folder.release()

    def extended(self, case: Case, record: dict[str, Any]) -> dict[str, Any]:
        """The record with the keys other plugins add (``pytest_gpu_pairs_record``); ours win. The
        added keys the record does not declare are named in ``plugin_keys``, the one way past the
        typed record's refusal of unknown keys."""
        added: dict[str, Any] = {}
        for extra in self.record_extensions(case, dict(record)):
            added.update(extra or {})
        foreign = sorted(key for key in added if key not in record and key not in KNOWN)
        return {**added, **record, **({"plugin_keys": foreign} if foreign else {})}

    def conclude(self, case: Case, record: Record, benchmark: Any) -> CaseResult:
        """A finished case's record, the other plugins' keys in it, typed and left where every reader
        finds it: pytest-benchmark's entry, ``result.json`` and this session's results."""
        typed_record = typed({"schema": SCHEMA_VERSION, **self.extended(case, record.to_dict()),
                              "settings_digest": self.settings_digest(case)})
        record_benchmark(benchmark, typed_record)
        path = save_result(self.folder.case_dir(case), typed_record)
        result = CaseResult(case, typed_record, self.device.enforce_efficiency, [str(path)],
                            enforce_vram=self.device.enforce_vram)
        self.results.append(result)
        return result

    def cases(self) -> list[Case]:
        if self._cases is None:
            self._cases = expand_all((load_experiment(p) for p in self.options.settings), self.overrides,
                                     self._suite_ids(self.overrides))
        return self._cases

    def _suite_ids(self, overrides: Overrides) -> dict[str, str]:
        """The case ids the project's suite owns (id -> its experiment's name); none where the ini
        names no suite or it cannot be read (a session of other settings need not depend on it)."""
        owned: dict[str, str] = {}
        for path in self.options.suite:
            try:
                experiment = load_experiment(path)
                cases = with_sharing(expand(experiment, overrides), sharing_modes(experiment, overrides))
            except (SettingsError, DuplicateCaseError, ValueError, OSError):
                continue
            owned.update((case.id, experiment.name) for case in cases)
        return owned

    def plan(self, case_ids: list[str]) -> None:
        """The ids of the cases this session will run, in order (after selection)."""
        self._planned = list(case_ids)

    @property
    def planned(self) -> list[str]:
        """The ids of the cases this session set out to run (after selection)."""
        return list(self._planned)

    def note_unfinished(self, case: Case) -> None:
        """A case that left an incomplete result (Ctrl-C, SIGTERM, a harness error) is remembered,
        so the summary can name it and the command that resumes."""
        try:
            path = self.folder.case_dir(case) / "result.json"
        except OutsideOutputFolder:
            return  # the case was refused before it ran: its failure already says why
        if any(r.case.id == case.id for r in self.results) or not path.is_file():
            return
        try:
            record = read_record(path)
        except StoreError:
            return
        if record.complete is False:
            self.interrupted.append(case.id)

    def after_case(self, case: Case) -> None:
        """Stop the MPS daemon as soon as the last of a run of MPS cases is done."""
        ids = self._planned
        following = ids[ids.index(case.id) + 1:] if case.id in ids else []
        by_id = {c.id: c for c in self._cases or []}
        if not following or by_id.get(following[0]) is None or by_id[following[0]].sharing != "mps":
            self.sharing.release()

    @property
    def opened_environment(self) -> Optional[Environment]:
        """The device environment if a case has opened it, else None (nothing is opened for asking)."""
        return self.device.opened

    def environment(self) -> Environment:
        return self.device.environment()

    def _device_opened(self, env: Environment) -> None:
        if "CUDA_VISIBLE_DEVICES" in env.extra_env:
            self.sharing.device_env = dict(env.extra_env)
        self._write_session_file(env)

    def case_dir(self, case: Case) -> Path:
        return self.folder.case_dir(case)

    def settings_digest(self, case: Case) -> dict[str, str]:
        """What a case measures, as digests a record keeps (the settings themselves may hold secrets in
        a workload's env): each job as it runs (``job_settings``), and how it is measured (the case's
        method, phases, rounds, timeouts and restarts, this session's scale, device, emulated card,
        sampling, MPS limits, and for interleaved rounds the stopping rule: precision target, round
        and time caps). Thresholds are not in it: a resumed case is checked against this session's."""
        device = self.environment().device
        measurement: dict[str, Any] = {name: getattr(case, name) for name in MEASUREMENT_SETTINGS}
        options = self.options
        measurement.update(scale=options.scale, device=self.environment().device_name,
                           gpu_memory_mb=options.gpu_memory_mb, sample_hz=options.sample_hz)
        if case.keep_background and case.mode == "concurrent":
            measurement.update(background_alone_s=case.background_alone_s)
        if case.sharing == "mps":
            measurement.update(mps_threads=options.mps_threads, mps_mem_limit_mb=options.mps_mem_limit_mb)
        rule = method_of(case).stopping_rule(case, device)
        if rule is not None:
            measurement.update(precision=rule.precision, max_rounds=rule.max_rounds, max_case_s=rule.max_seconds)
        more = {role: _digest(job_settings(job)) for role, job in zip(case.roles[2:], case.more_bgs)}
        return {"fg": _digest(job_settings(case.fg)), "bg": _digest(job_settings(case.bg)), **more,
                "measurement": _digest(measurement)}

    def changed_since(self, case: Case, record: Record) -> list[str]:
        """What of ``settings_digest`` differs from what the record measured (all of it for a record
        written before records kept it: nothing says what it measured)."""
        recorded = record.settings_digest if isinstance(record.settings_digest, dict) else {}
        now = self.settings_digest(case)
        return [part for part in now if recorded.get(part) != now[part]]

    def resumable(self, case: Case) -> Optional[Record]:
        """With ``--gpu-pairs-resume``: the case's complete earlier result, if it measured the same
        thing (models, hyperparameters, sharing, scale, device, emulated card size, and everything
        ``settings_digest`` holds); else None and the case runs again."""
        if not self.options.resume or not self._replicate_resumes(case):
            return None
        record = self._complete_result(case)
        if record is None:
            return None
        same = {**json.loads(json.dumps(dict(describe(case)), default=str)), "scale": self.options.scale,
                "device": self.environment().device_name, "gpu_memory_mb": self.options.gpu_memory_mb}
        recorded = {"method": "epoch", **record.to_dict()}  # records older than the method key measured one epoch
        if not all(recorded.get(key) == value for key, value in same.items()) or self.changed_since(case, record):
            return None
        if record.min_coverage != case.min_coverage:
            return None  # which rounds count was decided under another rule: measure them under this one
        checked = self._under_current_checks(case, record)
        self._seed_solo_baseline(case, checked)
        return checked

    def left_out_for_time(self, case: Case) -> Optional[LeftOut]:
        """With ``--gpu-pairs-time-limit``: whether the case's replicate (its dependency group, else
        the case alone) would end past the limit, counting the selected cases of it that hold no
        complete result to resume (``run.time_limit``)."""
        if self.time_limit is None:
            return None
        group = dependency_group(case)
        unit = [case] if group is None else [c for c in self.cases() if dependency_group(c) == group
                                             and c.id in self._planned]
        return self.time_limit.left_out(group or case.id, lambda: sum(
            self.estimates.get(c.id, 0.0) for c in unit if not self._will_resume(c)))

    def _will_resume(self, case: Case) -> bool:
        return self.options.resume and self._replicate_resumes(case) and self._complete_result(case) is not None

    def _replicate_resumes(self, case: Case) -> bool:
        """Whether the case's replicate (its dependency group: a pair's solo and shared runs of one
        seed) resumes case by case: it is complete, or what it holds so far was measured on this host
        and GPU. One begun on another machine (or one whose records do not say where) is measured again
        whole, so that its shared runs are compared with solo runs of the same machine. Decided once,
        before the replicate's first case runs, so the cases measured now do not change the answer."""
        group = dependency_group(case)
        if group is None:
            return True
        if group not in self._replicates:
            records = [self._complete_result(c) for c in self.cases() if dependency_group(c) == group]
            self._replicates[group] = replicate_resumes(records, self._measured_here)
        return self._replicates[group]

    def _complete_result(self, case: Case) -> Optional[Record]:
        try:
            return load_result(self.folder.case_dir(case))
        except OutsideOutputFolder:
            return None  # the case runs, and fails on its folder with the reason

    def _measured_here(self, record: Record) -> bool:
        env = self.environment()
        return (record.host, record.gpu_uuid) == (env.host, env.gpu_uuid)

    def _seed_solo_baseline(self, case: Case, record: Record) -> None:
        """A resumed solo case's first round stands in for its job's measurement, as it did in the
        session that measured it: the concurrent cases still to run are compared with that run. Only
        on the host and GPU it ran on: another machine's pace is not this one's (hosts that share a
        GPU model moved paces by 10-30 % between sessions), so there the job is measured again."""
        if case.mode != "solo" or not self._measured_here(record):
            return
        folder = self.folder.round_dir(case, 1)
        first = record if folder == self.folder.case_dir(case) else load_result(folder)
        if first is not None:
            self.solos.adopt_recorded(case.fg, first, folder)

    def _under_current_checks(self, case: Case, record: Record) -> Record:
        """A resumed case is checked against this session's minimum efficiency and VRAM budget, so
        its ``result.json`` is rewritten to hold them: the report must show the thresholds the
        case passed or failed under, not those of the session that measured it."""
        current = {"min_efficiency": case.min_efficiency, "vram_budget_mb": case.vram_budget_mb}
        changed = {key: value for key, value in current.items() if key in record and record.get(key) != value}
        if not changed:
            return record
        rechecked = typed({**record.to_dict(), **changed})
        write_record(self.folder.case_dir(case), rechecked)
        return rechecked

    def _write_session_file(self, env: Environment) -> None:
        info = env.gpu.info.__dict__ if env.gpu is not None else None
        write_session(self.own_dir, {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "device": env.device_name, "gpu": info,
            "gpu_unavailable": env.gpu_unavailable, "idle_power_w": env.idle_power_w,
            "idle_power_note": env.idle_power_note, "idle_method": IDLE_METHOD_TEXT,
            "gpu_memory_mb": self.options.gpu_memory_mb, "scale": env.scale, "sample_hz": env.sample_hz,
            "system_mps_daemon_pid": system_daemon_pid(),
            "settings": [str(p) for p in self.options.settings], "orphans_killed": self.orphans_killed,
            "worker": self.options.worker, "visible_devices": env.extra_env.get("CUDA_VISIBLE_DEVICES")})

    def close(self) -> int:
        """Every loop stopped, every job tree killed, then the MPS daemon (its clients must be gone
        before it is asked to quit): the last step of any way out of pytest."""
        with deferred_signals():
            try:
                killed = stop_all_loops() + kill_all_jobs()
                self.sharing.close()
                return killed + stop_all_daemons()
            finally:
                self.release_output_folder()
