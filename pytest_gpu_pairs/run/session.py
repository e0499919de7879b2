"""State that lives for one pytest session: the cases, the device, the solo baselines, the results.

Everything expensive is lazy: collection only reads settings files, and the device is opened
(and its idle power measured) when the first case runs, before any job has touched it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock, Timeout

from pytest_gpu_pairs.devices.cpus import physical_cores, usable_cpus
from pytest_gpu_pairs.devices.nvml import Gpu, NvmlUnavailable, open_gpu, visible_gpu
from pytest_gpu_pairs.experiment.cases import (
    Case,
    DuplicateCaseError,
    JobConfig,
    Overrides,
    baseline_case,
    describe,
    expand,
    expand_all,
    sharing_modes,
    with_sharing,
)
from pytest_gpu_pairs.experiment.load import load_experiment
from pytest_gpu_pairs.experiment.schema import DEFAULTS
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.build import case_record
from pytest_gpu_pairs.record.checks import CaseResult
from pytest_gpu_pairs.record.keys import SCHEMA_VERSION
from pytest_gpu_pairs.record.measurement import Measurement
from pytest_gpu_pairs.record.model import KNOWN, Record
from pytest_gpu_pairs.record.store import (
    SOLO_FOLDER,
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
from pytest_gpu_pairs.run.ballast import Ballast
from pytest_gpu_pairs.run.cpus import CpuPlan, plan_job_cpus, share_of_cores, unpinned
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.fitprofile import FitProfiles
from pytest_gpu_pairs.run.jobs import kill_all_jobs
from pytest_gpu_pairs.run.mps import stop_all_daemons, system_daemon_pid
from pytest_gpu_pairs.run.options import GpuPairsOptions
from pytest_gpu_pairs.run.proctree import become_subreaper, deferred_signals, reap_orphans
from pytest_gpu_pairs.run.round import cool_down, measure_solo
from pytest_gpu_pairs.run.sharing import SharingManager

IDLE_SECONDS = 3.0
IDLE_METHOD_TEXT = (f"NVML total-energy counter over {IDLE_SECONDS:.0f} s at session start, before any job or "
                    "ballast, both ends of the window on an update of the counter")


def job_cpu_plan(pin: str, share: tuple[int, int], usable: frozenset[int]) -> CpuPlan:
    """The CPUs of each job of this session: ``pin`` is the option (auto, off, N per job), ``share``
    this worker's block of the host's cores."""
    if pin == "off":
        return unpinned("--gpu-pairs-pin-cpus off")
    if not usable:
        return unpinned("this platform does not let a process choose its CPUs")
    cores = share_of_cores(physical_cores(usable), *share)
    return plan_job_cpus(cores, None if pin == "auto" else int(pin))


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def job_settings(job: Optional[JobConfig]) -> Optional[dict[str, Any]]:
    """Everything a job runs as: its workload and effective hyperparameters, for a command workload
    all its settings say (argv, cwd, env, hyperparameter flags, ready, log and progress patterns),
    and its MPS limits."""
    if job is None:
        return None
    return {"model": job.model, "hparams": job.hyperparameters,
            "command": job.command.model_dump(mode="json") if job.command is not None else None,
            "mps": job.mps.as_record() if job.mps is not None else None}


MEASUREMENT_SETTINGS = ("method", "sharing", "runs_per_config", "timeout_s", "ready_timeout_s", "restart_delay_s",
                        "crash_loop_failures", "crash_loop_window_s", "cool_down_s", "phase_s", "settle_s", "warmup_s",
                        "starts", "card_mb", "scaling")


class DeviceRequestError(RuntimeError):
    pass


class CardEmulationUnavailable(RuntimeError):
    """``--gpu-pairs-gpu-memory-mb`` on a run without a GPU: the case is skipped with this reason."""


def open_device_gpu(device: str, spec: Optional[str] = None) -> tuple[Optional[Gpu], Optional[str]]:
    """The GPU jobs of ``device`` (auto, cuda, cpu) train on, or None with the reason; ``DeviceRequestError``
    where cuda was asked for and no GPU is usable."""
    if device == "cpu":
        return None, "--gpu-pairs-device cpu: jobs train on the CPU, GPU figures do not apply"
    try:
        if spec is None:
            return _visible_or_first_gpu(), None
        return open_gpu(spec, clock=now), None
    except NvmlUnavailable as exc:
        if device == "cuda":
            raise DeviceRequestError(f"--gpu-pairs-device cuda, but no GPU is usable: {exc}") from None
        return None, f"no NVIDIA GPU ({exc}); jobs trained on the CPU"


def _visible_or_first_gpu() -> Gpu:
    """The GPU the jobs' CUDA device 0 is (the first entry of CUDA_VISIBLE_DEVICES), else NVML's
    GPU 0; an entry NVML cannot open as a GPU (a MIG instance) leaves GPU 0 too."""
    visible = visible_gpu()
    if visible is not None:
        with contextlib.suppress(NvmlUnavailable):
            return open_gpu(visible, clock=now)
    return Gpu(0, clock=now)


def _idle_power(gpu: Gpu) -> tuple[Optional[float], Optional[str]]:
    """Idle power from the energy counter over ``IDLE_SECONDS`` before any job of ours runs."""
    if not gpu.has_energy_counter:
        return None, "the GPU has no NVML total-energy counter"
    busy = [pid for pid, _ in gpu.compute_processes()]
    watts = gpu.idle_power_w(IDLE_SECONDS)
    if watts is None:
        return None, "the energy counter did not advance during the idle measurement"
    note = f"measured with other compute processes present: {busy}" if busy else None
    return watts, note


def _check_card_size(gpu_memory_mb: Optional[float], gpu: Gpu) -> None:
    total = gpu.info.memory_total_mb
    if gpu_memory_mb is not None and gpu_memory_mb >= total:
        raise DeviceRequestError(f"--gpu-pairs-gpu-memory-mb {gpu_memory_mb:.0f} is not smaller than the GPU's "
                                 f"{total:.0f} MB: there is no smaller card to emulate")


LOCK_FILE = ".gpu-pairs.lock"
WORKERS_FOLDER = "_workers"
OWNER_FILE = ".gpu-pairs.lock.owner"


class OutputFolderUnavailable(RuntimeError):
    """The output folder cannot be had (another session holds it, it cannot be created); one line."""


class OutsideOutputFolder(RuntimeError):
    """A folder the harness would write to or empty lies outside the output folder."""


def folder_inside(parent: Path, name: str) -> Path:
    """``parent/name``, which must be a folder of its own directly inside ``parent``: a name with a
    separator or ``..`` in it, or a planted symlink, must never make the harness write, or empty
    a folder, anywhere else, nor write one case's files into another case's folder (a link to a
    sibling resolves inside ``parent`` too). Settings validation refuses such names; this is the
    last guard."""
    folder = parent / name
    if folder.resolve().parent != parent.resolve():
        raise OutsideOutputFolder(f"refusing {folder}: it resolves to {folder.resolve()}, outside {parent}")
    if folder.is_symlink():
        raise OutsideOutputFolder(f"refusing {folder}: it is a symbolic link to {folder.resolve()}; the harness "
                                  "writes a case only into a folder of its own (remove the link)")
    return folder


def _owner(out: Path) -> str:
    try:
        return (out / OWNER_FILE).read_text(encoding="utf-8", errors="replace").strip()[:100] or "owner unknown"
    except OSError:
        return "owner unknown"


class GpuPairsSession:
    def __init__(self, options: GpuPairsOptions):
        self.options = options
        self.results: list[CaseResult] = []
        self._cases: Optional[list[Case]] = None
        self._env: Optional[Environment] = None
        self._solo: dict[tuple, tuple[Measurement, Record]] = {}
        self._planned: list[str] = []
        self.sharing = SharingManager(self.own_dir, options.mps_control, options.mps_threads,
                                      options.mps_mem_limit_mb)
        self.fits = FitProfiles(options.out_dir, options.gpu_memory_mb, options.worker)
        self.device_released_t: Optional[float] = None
        self.orphans_killed: list[int] = []
        self._lock: Optional[FileLock] = None
        self.subreaper = False
        self.interrupted: list[str] = []
        self.estimates: dict[str, float] = {}  # case id -> estimated seconds, for the live line's ETA
        self.record_extensions: Callable[[Case, dict[str, Any]], list[Optional[dict[str, Any]]]] = lambda case, r: []

    @property
    def own_dir(self) -> Path:
        """Where this session's own files go (session.json, the MPS daemon's logs): the output
        folder, or for a pytest-xdist worker ``_workers/<worker>`` in it (the case folders are
        shared: each case runs in one worker only)."""
        out = self.options.out_dir
        return out if self.options.worker is None else out / WORKERS_FOLDER / self.options.worker

    def claim_output_folder(self) -> None:
        """Before any case: the output folder is this session's alone (a second session on it would
        empty the first one's live case folders and interleave their logs), and on Linux pytest
        becomes the subreaper of every job process, so none escapes the kill as a daemon. An xdist
        worker does not lock: its controller holds the lock for all its workers."""
        out = self.options.out_dir
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputFolderUnavailable(f"--gpu-pairs-out {out}: cannot create it ({exc.strerror or exc})") from None
        if self.options.worker is not None:
            self.subreaper = become_subreaper()
            return
        lock = FileLock(str(out / LOCK_FILE), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise OutputFolderUnavailable(f"--gpu-pairs-out {out} is in use by another pytest session "
                                   f"({_owner(out)}); wait for it to end or choose another --gpu-pairs-out") from None
        except OSError as exc:  # a read-only folder or file system: the lock file cannot be made
            raise OutputFolderUnavailable(f"--gpu-pairs-out {out}: cannot write in it ({exc.strerror or exc}); "
                                          "choose a folder this user can write to") from None
        self._lock = lock
        with contextlib.suppress(OSError):  # only what the refusal of a second session quotes
            (out / OWNER_FILE).write_text(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        self.subreaper = become_subreaper()

    def release_output_folder(self) -> None:
        if self._lock is not None:
            (self.options.out_dir / OWNER_FILE).unlink(missing_ok=True)
            self._lock.release()
            self._lock = None

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
        path = save_result(self.case_dir(case), typed_record)
        result = CaseResult(case, typed_record, self.enforce_efficiency, [str(path)], enforce_vram=self.enforce_vram)
        self.results.append(result)
        return result

    def cases(self) -> list[Case]:
        if self._cases is None:
            overrides = Overrides(vram_budget_mb=self.options.vram_budget_mb,
                                  min_efficiency=self.options.min_efficiency, sharing=self.options.sharing,
                                  method=self.options.method, earlier_runs=lambda: complete_records(self.options.out_dir))
            self._cases = expand_all((load_experiment(p) for p in self.options.settings), overrides,
                                     self._suite_ids(overrides))
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
            path = self.case_dir(case) / "result.json"
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
        return self._env

    def environment(self) -> Environment:
        if self._env is None:
            self.orphans_killed = reap_orphans(self.options.out_dir)
            gpu, reason = open_device_gpu(self.options.device, self.options.gpu)
            device = "cuda" if gpu is not None else "cpu"
            env = Environment(device=device, scale=self.options.scale, sample_hz=self.options.sample_hz,
                              gpu=gpu, gpu_unavailable=reason,
                              cpus=job_cpu_plan(self.options.pin_cpus, self.options.cpu_share, usable_cpus()))
            if gpu is not None and self.options.gpu is not None:
                env.extra_env["CUDA_VISIBLE_DEVICES"] = gpu.info.uuid or str(gpu.info.index)
                self.sharing.device_env = dict(env.extra_env)
            if gpu is not None:
                _check_card_size(self.options.gpu_memory_mb, gpu)
                env.idle_power_w, env.idle_power_note = _idle_power(gpu)
            self._env = env
            self._write_session_file()
        return self._env

    @property
    def enforce_efficiency(self) -> bool:
        """Thresholds in settings describe GPU sharing; on the CPU only an explicit option applies."""
        return self.environment().device == "cuda" or self.options.min_efficiency is not None

    @property
    def enforce_vram(self) -> bool:
        """The same for the VRAM budget: memory is measured on a GPU, or the option asked for it anyway."""
        return self.environment().device == "cuda" or self.options.vram_budget_mb is not None

    def has_solo(self, job: JobConfig) -> bool:
        return (job, self.options.scale) in self._solo

    def solo(self, job: JobConfig, timeout_s: float) -> Measurement:
        """The job alone on the device, measured once per session and shared by every case using it;
        its record (mode ``solo``) is saved as ``<out>/_solo/<model>-<digest>/result.json``.

        Always without MPS: both sharing mechanisms are compared with the same plain baseline."""
        key = (job, self.options.scale)
        if key not in self._solo:
            self.sharing.release()
            out = self.solo_dir(job)
            shutil.rmtree(out, ignore_errors=True)
            try:
                measurement = measure_solo(job, self.environment(), out, timeout_s)
            finally:
                self.release_device()
            budget = self.options.vram_budget_mb or DEFAULTS.vram_budget_mb
            case = baseline_case(job, f"_solo/{out.name}", timeout_s, budget)
            record = case_record(case, measurement, measurement, None, self.environment())
            save_result(out, record)
            self._solo[key] = (measurement, record)
        return self._solo[key][0]

    def cached_solo(self, job: JobConfig) -> Optional[Measurement]:
        found = self._solo.get((job, self.options.scale))
        return found[0] if found else None

    def solo_record(self, job: JobConfig) -> Optional[Record]:
        """The record of the job's solo measurement, for the comparisons of concurrent cases."""
        found = self._solo.get((job, self.options.scale))
        return found[1] if found else None

    def adopt_solo(self, job: JobConfig, measurement: Measurement, record: Record) -> None:
        """A solo case's first round becomes the job's baseline: no job is measured alone twice."""
        self._solo.setdefault((job, self.options.scale), (measurement, record))

    def cool_down(self, seconds: float) -> float:
        """The settings' ``cool_down_s`` since our last job left the device; seconds slept."""
        return cool_down(seconds, self.device_released_t)

    def release_device(self) -> None:
        self.device_released_t = now()

    def fresh_case_dir(self, case: Case) -> Path:
        """The case's folder, emptied: logs are appended to, so a rerun must not mix two runs."""
        folder = self.case_dir(case)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

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
        if case.sharing == "mps":
            measurement.update(mps_threads=options.mps_threads, mps_mem_limit_mb=options.mps_mem_limit_mb)
        if case.method == "interleaved":
            rule = options.stopping_rule(device, case.runs_per_config)
            measurement.update(precision=rule.precision, max_rounds=rule.max_rounds, max_case_s=rule.max_seconds)
        return {"fg": _digest(job_settings(case.fg)), "bg": _digest(job_settings(case.bg)),
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
        if not self.options.resume:
            return None
        try:
            record = load_result(self.case_dir(case))
        except OutsideOutputFolder:
            return None  # the case runs, and fails on its folder with the reason
        if record is None:
            return None
        same = {**json.loads(json.dumps(dict(describe(case)), default=str)), "scale": self.options.scale,
                "device": self.environment().device_name, "gpu_memory_mb": self.options.gpu_memory_mb}
        recorded = {"method": "epoch", **record.to_dict()}  # records older than the method key measured one epoch
        if not all(recorded.get(key) == value for key, value in same.items()) or self.changed_since(case, record):
            return None
        return self._under_current_checks(case, record)

    def _under_current_checks(self, case: Case, record: Record) -> Record:
        """A resumed case is checked against this session's minimum efficiency and VRAM budget, so
        its ``result.json`` is rewritten to hold them: the report must show the thresholds the
        case passed or failed under, not those of the session that measured it."""
        current = {"min_efficiency": case.min_efficiency, "vram_budget_mb": case.vram_budget_mb}
        changed = {key: value for key, value in current.items() if key in record and record.get(key) != value}
        if not changed:
            return record
        rechecked = typed({**record.to_dict(), **changed})
        write_record(self.case_dir(case), rechecked)
        return rechecked

    def solo_dir(self, job: JobConfig) -> Path:
        digest = hashlib.sha1(json.dumps([job.model, job.hparams, job.command_key, self.options.scale],
                                         default=str).encode()).hexdigest()[:10]
        worker = f"-{self.options.worker}" if self.options.worker is not None else ""
        return folder_inside(folder_inside(self.options.out_dir, SOLO_FOLDER), f"{job.model}-{digest}{worker}")

    def emulated_card(self, case: Case) -> Optional[Ballast]:
        """The ballast of ``--gpu-pairs-gpu-memory-mb`` for one case (not started), or None without the option.

        Without a GPU there is no card to shrink: ``CardEmulationUnavailable`` says so.
        """
        size = self.options.gpu_memory_mb
        if size is None:
            return None
        env = self.environment()
        if env.gpu is None or env.device != "cuda":
            raise CardEmulationUnavailable(f"--gpu-pairs-gpu-memory-mb {size:.0f} emulates a smaller GPU and needs one: "
                                           f"{env.gpu_unavailable}")
        return Ballast(size, env.gpu, self.case_dir(case), env.extra_env)

    def case_dir(self, case: Case) -> Path:
        return folder_inside(self.options.out_dir, case.id)

    def _write_session_file(self) -> None:
        env = self._env
        if env is None:  # written once the environment is open
            return
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
