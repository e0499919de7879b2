"""A job's memory over whole runs, measured alone on the card the verdict is about.

The job runs ``FIT_STARTS`` times, one start after the other, on a card emulated at the settings'
``card_mb`` (a ballast holds the rest of a bigger GPU, so cuDNN's autotuner finds the free memory
the real card would leave it). A built-in runs a fit run (``protocol.FIT_RUN_VAR``): its first
step, some more, an evaluation, a checkpoint, each part reported with the allocator's peak. A
command workload runs as declared, up to ``COMMAND_FIT_S``, its memory read through NVML a
hundred times a second. Every process started here (jobs, ballast) is ended on every way out.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import Case, JobConfig
from pytest_gpu_pairs.monitor.gpu import PidRoles
from pytest_gpu_pairs.monitor.memory import MemorySampler
from pytest_gpu_pairs.protocol import FIT_RESTART, FIT_RUN_VAR
from pytest_gpu_pairs.record.fit import FitProfile, FitStart, allocator_start, nvml_start
from pytest_gpu_pairs.record.store import StoreError, fit_profile_path, read_fit_profile, save_fit_profile
from pytest_gpu_pairs.run import ballast
from pytest_gpu_pairs.run.ballast import Ballast, BallastError
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.jobs import JobProcess, build_spec

FIT_STARTS = 2  # the start-up transient differs between starts: the need is the larger (the second: start-up and training)
FIT_STEPS = 20  # training steps of a built-in's fit run, past its first
BUILTIN_FIT_S = 300.0  # a built-in's fit run (start-up, a few steps, one evaluation) ends well within this
COMMAND_FIT_S = 300.0  # a command workload's first start runs to its end or this long
COMMAND_RESTART_S = 60.0  # its second start runs this long: long enough for start-up and first steps
ROLE = "fg"
GAP_REPORTS = 5.0  # a command workload silent for this many of its usual report gaps is not training


def fit_key(job: JobConfig, card_mb: Optional[float], device_name: str, scale: float) -> str:
    """What a fit profile is of: the same workload, hyperparameters and command (everything its
    settings say: argv, cwd, env, patterns), on the same card size and GPU model, at the same scale
    (a built-in's evaluation set follows the scale). A changed command is a new profile."""
    command = job.command.model_dump(mode="json") if job.command is not None else job.command_key
    text = json.dumps([job.model, job.hparams, command, card_mb, device_name, scale], default=str)
    return f"{job.model}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def cpu_profile(job: JobConfig, key: str, device_name: str, card_mb: Optional[float]) -> FitProfile:
    """A built-in that trains on the CPU holds no GPU memory at any point of its run."""
    return FitProfile(key=key, workload=job.model, builtin=True, hyperparameters=dict(job.hparams),
                      device_name=device_name, card_mb=card_mb, basis="cpu", measured_at=_now(),
                      unmeasured={"need_mb": f"{job.model} trains on the CPU: it needs no GPU memory"})


def trains_on_cpu(job: JobConfig) -> bool:
    return job.is_builtin and job.model in BUILTINS and BUILTINS[job.model].cpu_only


def measure_fit(job: JobConfig, env: Environment, folder: Path, card_mb: Optional[float], key: str,
                timeout_s: float) -> FitProfile:
    """The job's fit profile on a GPU; ``run.ballast.BallastError`` where the card cannot be emulated."""
    folder.mkdir(parents=True, exist_ok=True)
    card = Ballast(card_mb, env.gpu, folder, env.extra_env) if card_mb is not None else None
    roles = PidRoles()
    if card is not None:
        card.start()
        roles.register(card.pid, ballast.ROLE)
    try:
        starts = [_one_start(job, env, folder, index, roles, timeout_s) for index in range(FIT_STARTS)]
    finally:
        if card is not None:
            card.stop()
    return FitProfile(key=key, workload=job.model, builtin=job.is_builtin,
                      command=list(job.command.command) if job.command is not None and not job.is_builtin else None,
                      hyperparameters=dict(job.hparams), device_name=env.device_name, card_mb=card_mb,
                      basis="allocator" if job.is_builtin else "nvml", starts=starts, measured_at=_now(),
                      unmeasured=_unmeasured(job, starts))


def _one_start(job: JobConfig, env: Environment, folder: Path, index: int, roles: PidRoles,
               timeout_s: float) -> FitStart:
    """One start of the job, sampled densely from its first moment to its end."""
    fit_run = f"{FIT_STEPS + 1}" if index == 0 else f"{FIT_STEPS + 1}:{FIT_RESTART}"
    extra = {**env.extra_env, FIT_RUN_VAR: fit_run} if job.is_builtin else dict(env.extra_env)
    spec = build_spec(job, ROLE, env.device, env.scale, timeout_s, extra, env.job_cpus(ROLE, job.is_builtin))
    process = JobProcess(spec, folder / f"fit{index + 1}.log", folder / f"fit{index + 1}.progress.jsonl")
    if env.gpu is None:
        raise RuntimeError("fit profiles are measured on a GPU only")
    sampler = MemorySampler(env.gpu, roles, ROLE)
    began = time.monotonic()
    try:
        process.start()
        if process.pid is not None:
            roles.register(process.pid, ROLE, process.tag)
        sampler.start()
        limit = BUILTIN_FIT_S if job.is_builtin else (COMMAND_FIT_S if index == 0 else COMMAND_RESTART_S)
        process.wait(timeout=min(timeout_s, limit))
    finally:
        process.stop()
        sampler.stop()
    outcome = process.outcome()
    cut = outcome.timed_out and not job.is_builtin
    failure = None if outcome.completed or cut else outcome_failure(outcome)
    seconds = time.monotonic() - began
    exit_code = 0 if cut else outcome.returncode
    if job.is_builtin:
        return allocator_start(outcome.progress.memory, sampler.at_or_before, sampler.peak(), exit_code,
                               outcome.oom, failure, seconds)
    gap = GAP_REPORTS * _usual_gap(outcome.progress.steps)
    return nvml_start(sampler.readings, outcome.progress.steps, gap, exit_code, outcome.oom, failure, seconds)


def outcome_failure(outcome) -> str:
    reason = outcome.reason()
    return "it ended without finishing its fit run" if reason == "ok" else reason


def _usual_gap(steps) -> float:
    gaps = sorted(b[0] - a[0] for a, b in zip(steps, steps[1:]))
    return gaps[len(gaps) // 2] if gaps else 1.0


def _unmeasured(job: JobConfig, starts: list[FitStart]) -> dict[str, str]:
    notes: dict[str, str] = {}
    if not job.is_builtin:
        notes["basis"] = ("a command workload is read through NVML 100 times a second: a transient shorter than 10 ms "
                          f"can fall between readings; its first start ran to its end or {COMMAND_FIT_S:g} s, its "
                          f"second {COMMAND_RESTART_S:g} s")
    if job.is_builtin and any(s.context_mb is None and not s.failure for s in starts):
        notes["need_mb"] = "NVML did not list the job's process when its run ended: its CUDA context is unknown"
    return notes


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")



@dataclass(frozen=True)
class PairFits:
    """Both jobs' fit profiles for one case; ``unmeasured`` says why there are none; ``seconds`` is
    the device time this case spent measuring profiles no earlier case had measured."""

    fg: Optional[FitProfile] = None
    bg: Optional[FitProfile] = None
    unmeasured: Optional[str] = None
    seconds: float = 0.0
    more_bgs: tuple[Optional[FitProfile], ...] = ()  # a group's further backgrounds (bg2, bg3, ...)

    def by_role(self, roles: Sequence[str]) -> dict[str, Optional[FitProfile]]:
        """Each job's profile by role, for the case's jobs: fg, bg, bg2, ... (None where none was measured)."""
        found = (self.fg, self.bg, *self.more_bgs)
        return {role: found[i] if i < len(found) else None for i, role in enumerate(roles)}


class FitProfiles:
    """Fit profiles measured once per job and card and kept in the results folder (``_fit/``), so
    every case of this session and of later sessions on the same folder, and the planner, read the
    same need: the same code gives the same verdict. A stored profile that cannot be read, or whose
    fit run failed other than by running out of memory, is measured again: such a failure is a
    fault of the job or of the harness, fixed or passing, not the job's need; running out of memory
    is its answer."""

    def __init__(self, out_dir: Path, card_option: Optional[float], worker: Optional[str] = None):
        self.out_dir, self.card_option, self.worker = out_dir, card_option, worker
        self._known: dict[str, FitProfile] = {}

    def card_mb(self, case: Case, env: Environment) -> Optional[float]:
        """The card the verdict is about: ``--gpu-pairs-gpu-memory-mb``, else the settings' ``card_mb``;
        None (the whole GPU) where that is not smaller than the GPU."""
        card = self.card_option if self.card_option is not None else case.card_mb
        if card is None or env.gpu is None or card >= env.gpu.info.memory_total_mb:
            return None
        return card

    def for_case(self, case: Case, env: Environment) -> PairFits:
        if env.device != "cuda" or env.gpu is None:
            return PairFits(unmeasured=f"memory is measured on a GPU only ({env.gpu_unavailable or 'no GPU'})")
        card = self.card_mb(case, env)
        spent = [0.0]
        found: dict[str, Optional[FitProfile]] = {}
        for role, job in zip(case.roles, case.jobs):
            try:
                found[role] = self._profile(job, env, card, case.timeout_s, spent)
            except BallastError as exc:
                return PairFits(unmeasured=f"the {card:.0f} MB card could not be emulated for the fit profiles: {exc}",
                                seconds=spent[0])
        return PairFits(found.get("fg"), found.get("bg"), None, spent[0],
                        tuple(found[role] for role in case.roles[2:]))

    def _profile(self, job: JobConfig, env: Environment, card: Optional[float], timeout_s: float,
                 spent: list[float]) -> FitProfile:
        """The job's profile: known to this session, stored in the folder, or measured now (its
        device seconds added to ``spent``)."""
        key = fit_key(job, card, env.device_name, env.scale)
        profile = self._known.get(key) or self._stored(key)
        if profile is None:
            began = time.monotonic()
            profile = (cpu_profile(job, key, env.device_name, card) if trains_on_cpu(job)
                       else measure_fit(job, env, self._folder(key), card, key, timeout_s))
            spent[0] += time.monotonic() - began
            save_fit_profile(self.out_dir, profile)
        self._known[key] = profile
        return profile

    def _stored(self, key: str) -> Optional[FitProfile]:
        path = fit_profile_path(self.out_dir, key)
        if not path.is_file():
            return None
        try:
            profile = read_fit_profile(path)
        except StoreError:
            return None
        if profile.key != key or not profile.settled:
            return None
        return profile

    def _folder(self, key: str) -> Path:
        return fit_profile_path(self.out_dir, key).with_name(key + (f"-{self.worker}" if self.worker else ""))
