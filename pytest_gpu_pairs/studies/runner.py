"""A declared study run on this machine: one real pytest process per session and variant, each
ended whatever happens, resumed where an earlier run stopped, and its state read back for status.

A session is done once its pytest process ran its tests to the end (exit 0, or 1 where a case's
check failed: its records are complete either way); an interrupted session is started again with
``--gpu-pairs-resume``, which skips every case its results folder holds complete. What each
attempt was (its command, exit code and wall time) is kept in ``<out>/runs.json``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from pytest_gpu_pairs.inputs import SettingsError, first_error, read_json
from pytest_gpu_pairs.record.store import (
    StoreError,
    atomic_write_json,
    case_records,
    fit_profile_path,
    fit_profiles,
    read_fit_profile,
    save_fit_profile,
)
from pytest_gpu_pairs.run.outdir import in_use_by
from pytest_gpu_pairs.run.time_limit import STOPPED_SHORT
from pytest_gpu_pairs.studies.declaration import SessionOptions, Step, Study, Variant

SHARED_FIT_PROFILES = "fit-profiles"  # the study's fit profiles, beside its sessions (the verdicts collate reads them)
RAN_TO_THE_END = (0, 1)  # pytest: all passed, or some case's check failed; 2-5 mean it stopped short
STOP_GRACE_S = 60.0  # pytest's own SIGTERM handling ends each case's job trees within this


class StudyRunError(RuntimeError):
    """A study cannot run here (no checkout beside it, a session that stopped short); one line."""


@dataclass(frozen=True)
class Request:
    """What ``gpu-pairs study run`` was asked: the device, the scale, and narrowing for a quick try."""

    device: str = "cuda"
    scale: Optional[float] = None
    select: Optional[str] = None
    sessions: Optional[int] = None
    variant: Optional[str] = None
    extra: tuple[str, ...] = ()
    time_limit_s: Optional[float] = None  # the whole run's; each session is given what is left of it


@dataclass(frozen=True)
class Session:
    """One pytest session of a study: its results folder (relative to the study's output) and argv."""

    variant: str
    folder: str
    argv: tuple[str, ...]
    dropped: tuple[str, ...] = ()
    not_here: Optional[str] = None
    options_from: Optional[str] = None
    declared_select: Optional[str] = None  # the study's or variant's own -k, before a user narrows it

    @property
    def select(self) -> Optional[str]:
        return selection(self.argv)


def plan_sessions(study: Study, root: Path, out: Path, request: Request) -> list[Session]:
    """Every session of the study in the order it runs: variants as declared, sessions in order."""
    if study.not_run:
        raise StudyRunError(f"study {study.name} is not run by `gpu-pairs study run`: {study.not_run}")
    _check_checkout(study, root)
    names = [v.name for v in study.variants]
    if request.variant is not None and request.variant not in names:
        raise StudyRunError(f"study {study.name} has no variant {request.variant!r}; its variants: {', '.join(names)}")
    return [_session(study, variant, folder, out, request)
            for variant in study.variants if request.variant in (None, variant.name)
            for folder in variant.folders()[:request.sessions or variant.sessions]]


def _check_checkout(study: Study, root: Path) -> None:
    needed = [study.suite, *study.settings, *(s for v in study.variants for s in v.settings or ())]
    missing = [p for p in needed if not (root / p).exists()]
    if missing:
        raise StudyRunError(f"study {study.name}: {missing[0]} is not under {root}; run it from a checkout of "
                            "pytest-gpu-pairs (the suite and settings files are the repository's)")


def _session(study: Study, variant: Variant, folder: str, out: Path, request: Request) -> Session:
    gpu_options = (*study.gpu_options, *variant.gpu_options)
    on_cpu = request.device == "cpu"
    not_here = variant.needs_gpu if on_cpu and variant.needs_gpu else None
    declared = variant.select or study.select
    select = narrowed(declared, request.select)
    scale = _first_set(request.scale, variant.scale, study.scale)
    argv = [sys.executable, "-m", "pytest", study.suite, "-p", "no:cacheprovider", "-q", "-rA"]
    for settings in variant.settings or study.settings:
        argv += ["--gpu-pairs-settings", settings]
    if select:
        argv += ["-k", select]
    argv += [*study.options, *variant.options, *(() if on_cpu else gpu_options)]
    argv += ["--gpu-pairs-device", request.device, *(("--gpu-pairs-scale", f"{scale:g}") if scale else ())]
    argv += ["--gpu-pairs-out", str(out / folder), "--gpu-pairs-resume", *request.extra]
    return Session(variant.name, folder, tuple(argv), tuple(gpu_options) if on_cpu else (), not_here,
                   variant.options_from, declared)


def narrowed(declared: Optional[str], asked: Optional[str]) -> Optional[str]:
    """The cases both select: a user's ``-k`` narrows what the study or its variant runs and never
    widens it, or another variant's cases would run into this variant's folder."""
    if declared and asked:
        return f"({declared}) and ({asked})"
    return asked or declared


def _first_set(*values: Optional[float]) -> Optional[float]:
    return next((value for value in values if value is not None), None)


def with_step_options(session: Session, out: Path, request: Request, say: Callable[[str], None]) -> tuple[str, ...]:
    """The session's argv with what an earlier step decided for it (``Variant.options_from``): its
    settings and scale instead of the declared ones (a scale asked for on the command line still
    wins), its options added; the declared ones where the step wrote nothing."""
    if session.options_from is None:
        return session.argv
    path = out / session.options_from
    if not path.is_file():
        say(f"{session.folder}: no {session.options_from} (its step did not run here): the declared settings")
        return session.argv
    try:
        decided = SessionOptions.model_validate(read_json(path))
    except ValidationError as exc:
        raise first_error(exc, str(path)) from None
    argv = list(session.argv)
    if decided.settings is not None:
        argv = _without(argv, "--gpu-pairs-settings")
        at = argv.index("-p")
        for settings in reversed(decided.settings):
            argv[at:at] = ["--gpu-pairs-settings", settings]
    if decided.scale is not None and request.scale is None:
        argv = [*_without(argv, "--gpu-pairs-scale"), "--gpu-pairs-scale", f"{decided.scale:g}"]
    return (*argv, *decided.options)


def _without(argv: list[str], option: str) -> list[str]:
    """``argv`` without each ``option VALUE`` pair."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        else:
            kept.append(arg)
    return kept


def read_runs(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Each session folder's attempts, from ``runs.json``; a damaged file is one ``SettingsError`` line."""
    path = out / "runs.json"
    if not path.exists():
        return {}
    data = read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise SettingsError(path, "$", "expected an object of session folder -> list of attempts")
    return data


def selection(argv: Any) -> Optional[str]:
    """The ``-k`` a session's pytest ran with (as ``runs.json`` keeps its argv), None for all of its
    cases or an argv that is no list."""
    if not isinstance(argv, (list, tuple)):
        return None
    return str(argv[argv.index("-k") + 1]) if "-k" in argv[:-1] else None


def _ran_to_the_end(attempt: Any) -> bool:
    return isinstance(attempt, dict) and attempt.get("exit") in RAN_TO_THE_END


def is_done(attempts: list[dict[str, Any]], session: Session) -> bool:
    """Whether a run of this session's cases ended: one with its selection, or with the study's
    whole one. A quick try with a narrower ``-k`` completes only what it selected, so the session
    it was narrowed from is resumed, not skipped."""
    wanted = {session.select, session.declared_select}
    return any(_ran_to_the_end(a) and selection(a.get("argv")) in wanted for a in attempts)


def run_study(study: Study, root: Path, out: Path, request: Request,
              say: Callable[[str], None] = print) -> int:
    """Run every step and session not done yet, in order: the steps before the sessions, the plan
    (which may read what they measured, e.g. solo profiles on this host), then each variant's sessions
    followed by its steps; 0 when all are done, else the first stop's code."""
    sessions = plan_sessions(study, root, out, request)
    if study.run_gaps:
        say(f"not taken by this runner: {study.run_gaps}")
    out.mkdir(parents=True, exist_ok=True)
    runs = read_runs(out)
    deadline = Deadline(request.time_limit_s)
    for step in (s for s in study.steps if s.after is None):
        code = _run_step(step, study, root, out, request, runs, say)
        if code != 0:
            return code
    if study.plan is not None and not (out / "plan.json").exists():
        code = _plan(study, root, out, request, say)
        if code != 0:
            return code
    for after in (v.name for v in study.variants):
        for session in (s for s in sessions if s.variant == after):
            code = _run_session(study, session, root, out, request, runs, say, deadline)
            if code == STOPPED_SHORT and deadline.limit_s is not None:
                deadline.reached = True  # a later session's replicates may still fit what is left
            elif code != 0:
                return code
        if deadline.reached or request.variant not in (None, after):
            continue
        for step in (s for s in study.steps if s.after == after):
            code = _run_step(step, study, root, out, request, runs, say)
            if code != 0:
                return code
    if deadline.reached:
        say(f"gpu-pairs study: {study.name} stopped at its time limit; run the same command again to resume")
        return STOPPED_SHORT
    return 0


@dataclass
class Deadline:
    """``--time-limit``, counted from the start of the run: what each session is given, and whether
    one left work out for it (the steps after it then wait for a run that completes the sessions)."""

    limit_s: Optional[float]
    started: float = field(default_factory=time.monotonic)
    reached: bool = False

    def left_s(self) -> Optional[float]:
        return None if self.limit_s is None else self.limit_s - (time.monotonic() - self.started)


def _run_session(study: Study, session: Session, root: Path, out: Path, request: Request,
                 runs: dict[str, list[dict[str, Any]]], say: Callable[[str], None],
                 deadline: Optional[Deadline] = None) -> int:
    if session.not_here:
        say(f"{session.folder}: not run on the CPU ({session.not_here})")
        return 0
    if is_done(runs.get(session.folder, []), session):
        say(f"{session.folder}: done earlier, skipped")
        return 0
    left_s = deadline.left_s() if deadline is not None else None
    if left_s is not None and left_s < 1.0:
        say(f"{session.folder}: not started, the time limit has passed")
        return STOPPED_SHORT
    if session.dropped:
        say(f"{session.folder}: on the CPU without {' '.join(session.dropped)} (they need a GPU)")
    if study.share_fit_profiles:
        seed_fit_profiles(out, out / session.folder)
    argv = with_step_options(session, out, request, say)
    if left_s is not None:
        argv = (*_without(list(argv), "--gpu-pairs-time-limit"), "--gpu-pairs-time-limit", f"{left_s:.0f}")
    attempt = _attempt(session, argv, root, out, len(runs.get(session.folder, [])) + 1, say, study.env)
    if study.share_fit_profiles:
        gather_fit_profiles(out / session.folder, out)
    runs.setdefault(session.folder, []).append(attempt)
    atomic_write_json(out / "runs.json", runs)
    if attempt["exit"] not in RAN_TO_THE_END:
        say(f"{session.folder}: pytest stopped short (exit {attempt['exit']}); see {attempt['log']}; "
            f"run the same command again to resume")
        return attempt["exit"] if attempt["exit"] > 0 else 2
    return 0


def seed_fit_profiles(out: Path, session_dir: Path) -> list[str]:
    """The study's fit profiles put in a session's results folder (``_fit/``) where it lacks them, so
    the product reuses them as it reuses a folder's own: measured once, by the first session that
    needed them. Returns the keys put there; a profile that cannot be read is left out."""
    seeded = []
    for path in sorted((out / SHARED_FIT_PROFILES).glob("*.json")):
        try:
            profile = read_fit_profile(path)
        except StoreError:
            continue
        if not fit_profile_path(session_dir, profile.key).exists():
            save_fit_profile(session_dir, profile)
            seeded.append(profile.key)
    return seeded


def gather_fit_profiles(session_dir: Path, out: Path) -> list[str]:
    """The profiles a session measured, kept with the study (``fit-profiles/``) for the sessions after it."""
    gathered = []
    for profile in fit_profiles(session_dir):
        kept = out / SHARED_FIT_PROFILES / fit_profile_path(".", profile.key).name
        if not kept.exists():
            kept.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(kept, profile.model_dump(mode="json"))
            gathered.append(profile.key)
    return gathered


def step_argv(step: Step, root: Path, out: Path, request: Request, study_scale: Optional[float] = None) -> list[str]:
    """The step's command with its placeholders filled in, run by this interpreter."""
    scale = request.scale if request.scale is not None else study_scale
    values = {"{out}": str(out), "{root}": str(root), "{device}": request.device, "{scale}": f"{scale or 1.0:g}"}
    argv = []
    for arg in step.argv:
        for key, value in values.items():
            arg = arg.replace(key, value)
        argv.append(arg)
    head = [sys.executable, "-m", "pytest_gpu_pairs.cli"] if argv[0] == "gpu-pairs" else [sys.executable]
    return [*head, *argv[1:]]


def _run_step(step: Step, study: Study, root: Path, out: Path, request: Request,
              runs: dict[str, list[dict[str, Any]]], say: Callable[[str], None]) -> int:
    label, target = f"step {step.name}", out / step.writes
    if step.needs_gpu and request.device == "cpu":
        say(f"{label}: not run on the CPU ({step.needs_gpu})")
        return 0
    if target.exists():
        say(f"{label}: done earlier ({step.writes} is there), skipped")
        return 0
    argv = step_argv(step, root, out, request, study.scale)
    log = out / "logs" / f"step-{step.name}-{len(runs.get(label, [])) + 1}.txt"
    say(f"{label}: {' '.join(argv[1:])}")
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    env = {**study.env, **step_gpu_env(request.extra)}
    if step.stdout:
        partial = target.with_name(target.name + ".partial")
        code = run_to_the_end(argv, root, partial, stderr=log, env=env)
        if code == 0:
            partial.replace(target)
        partial.unlink(missing_ok=True)
    else:
        code = run_to_the_end(argv, root, log, env=env)
    if code == 0 and not target.exists():
        code = 2
        say(f"{label}: exited 0 without writing {step.writes}")
    runs.setdefault(label, []).append({"argv": argv, "exit": code, "wall_s": round(time.monotonic() - start, 1),
                                       "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                       "log": str(log.relative_to(out))})
    atomic_write_json(out / "runs.json", runs)
    if code != 0:
        say(f"{label}: exit {code}; see {log.relative_to(out)}; run the same command again to resume")
        return code if code > 0 else 2
    return 0


def step_gpu_env(pytest_args: Sequence[str]) -> dict[str, str]:
    """A step on the one GPU the sessions were named to (``--pytest-arg=--gpu-pairs-gpus=N``): its
    commands train on the GPU CUDA shows them first. Two studies side by side, one a GPU, once
    profiled both on GPU 0 at once, each job beside its twin, and read every job busy 90-100 %."""
    args = list(pytest_args)
    for index, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--gpu-pairs-gpus=") else (
            args[index + 1] if arg == "--gpu-pairs-gpus" and index + 1 < len(args) else None)
        if value is not None and value.strip() and "," not in value:
            return {"CUDA_VISIBLE_DEVICES": value.strip()}
    return {}


def plan_argv(study: Study, request: Request, out: Path) -> list[str]:
    """``gpu-pairs plan`` for the study's selection, as its sessions will run it, its options' ``{out}``
    filled in."""
    scale = request.scale if request.scale is not None else study.scale
    argv = [sys.executable, "-m", "pytest_gpu_pairs.cli", "plan", *study.settings]
    select = narrowed(study.select, request.select)
    argv += ["-k", select] if select else []
    argv += ["--scale", f"{scale:g}"] if scale else []
    argv += ["--device", "cpu"] if request.device == "cpu" else []
    return [*argv, *(arg.replace("{out}", str(out)) for arg in study.plan or ()), "--json"]


def _plan(study: Study, root: Path, out: Path, request: Request, say: Callable[[str], None]) -> int:
    """The planner's prediction before any case runs, kept as ``plan.json`` (the collate compares)."""
    argv = plan_argv(study, request, out)
    say(f"plan.json: {' '.join(argv[1:])}")
    partial = out / "plan.json.partial"
    code = run_to_the_end(argv, root, partial, stderr=out / "logs" / "plan.txt")
    if code != 0:
        say(f"plan.json: gpu-pairs plan exit {code}; see {out / 'logs' / 'plan.txt'}")
        partial.unlink(missing_ok=True)
        return code
    partial.replace(out / "plan.json")
    return 0


def _attempt(session: Session, session_argv: tuple[str, ...], root: Path, out: Path, number: int,
             say: Callable[[str], None], env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    log = out / "logs" / f"{session.folder.replace('/', '_')}-{number}.txt"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [*session_argv, "--benchmark-json", str(out / session.folder / f"bench-{number}.json")]
    (out / session.folder).mkdir(parents=True, exist_ok=True)
    say(f"{session.folder}: pytest started ({' '.join(argv[1:])})")
    start = time.monotonic()
    code = run_to_the_end(argv, root, log, env=env)
    say(f"{session.folder}: pytest exit {code} after {time.monotonic() - start:.0f} s")
    return {"argv": argv, "exit": code, "wall_s": round(time.monotonic() - start, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "log": str(log.relative_to(out))}


def run_to_the_end(argv: list[str], cwd: Path, log: Path, stderr: Optional[Path] = None,
                   env: Optional[dict[str, str]] = None) -> int:
    """``argv`` in a process session of its own, its output in ``log`` (its errors too, unless
    ``stderr`` names a file of their own); however this returns (an interrupt included), that session
    is ended: SIGTERM first so pytest tears its jobs down, SIGKILL after a grace period."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if stderr is not None:
        stderr.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as handle, open(stderr or os.devnull, "wb") as errors:
        process = subprocess.Popen(argv, cwd=cwd, stdout=handle, stderr=errors if stderr else subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   env={**os.environ, **env} if env else None)
        try:
            return process.wait()
        finally:
            end_session(process)


def end_session(process: subprocess.Popen) -> None:
    """The process group of ``process`` signalled until its leader is gone, then killed outright."""
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        if process.poll() is not None:
            break
        _signal_group(process.pid, sig)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    _signal_group(process.pid, signal.SIGKILL)  # stragglers of the group, the leader gone
    if process.poll() is None:
        process.wait()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class SessionState:
    folder: str
    variant: str
    state: str
    complete: int
    incomplete: int
    problems: int


def study_status(study: Study, root: Path, out: Path, request: Request) -> list[SessionState]:
    """Each session's state: running (a pytest session holds its folder), done, partly done, stopped
    short, begun elsewhere (records copied in without the ``runs.json`` that ran them), not started,
    or not run on the CPU."""
    runs = read_runs(out)
    states = []
    for session in plan_sessions(study, root, out, request):
        folder = out / session.folder
        records, problems = case_records(folder) if folder.is_dir() else ([], [])
        complete = sum(1 for _, r in records if r.complete)
        attempts = runs.get(session.folder, [])
        if session.not_here:
            state = f"not run on the CPU ({session.not_here})"
        elif (holder := in_use_by(folder)) is not None:
            state = f"running ({holder})"
        elif is_done(attempts, session):
            state = f"done (pytest exit {attempts[-1].get('exit')})"
        elif attempts and _ran_to_the_end(attempts[-1]):
            state = f"partly done (its last run selected -k {selection(attempts[-1].get('argv'))!r}); run again to resume"
        elif attempts:
            state = f"stopped short (pytest exit {attempts[-1].get('exit')}); run again to resume"
        elif records:
            state = "begun elsewhere (records here, no attempt in runs.json); run again to resume"
        else:
            state = "not started"
        states.append(SessionState(session.folder, session.variant, state, complete, len(records) - complete,
                                   len(problems)))
    return states


def sessions_left(states: Sequence[SessionState]) -> int:
    """Sessions still to run: all but those done and those not run on this device (a running, partly
    done, stopped or unstarted one is left)."""
    return sum(1 for s in states if not s.state.startswith(("done", "not run")))


def step_states(study: Study, out: Path, request: Request) -> list[tuple[str, str]]:
    """Each step's name and state: done (what it writes is there), not run on the CPU, stopped short
    (its last exit code), or not started."""
    runs = read_runs(out)
    states = []
    for step in study.steps:
        attempts = runs.get(f"step {step.name}", [])
        if step.needs_gpu and request.device == "cpu":
            state = f"not run on the CPU ({step.needs_gpu})"
        elif (out / step.writes).exists():
            state = f"done ({step.writes} is there)"
        elif attempts:
            state = f"stopped short (exit {attempts[-1].get('exit')}); run again to resume"
        else:
            state = "not started"
        states.append((step.name, state))
    return states
