"""The sharing mechanism of a case: what its jobs' environment is, and which daemon must run.

Time-slicing is the driver's default and needs nothing. MPS runs through a private daemon
(``mps.MpsDaemon``) that is up only while MPS cases run: it starts before the first of a run of
MPS cases and stops before any time-sliced case or solo baseline is measured, so no MPS server
sits on the card while something else is measured. Solo baselines are always plain (no MPS, no
limits): both mechanisms are compared with the same job alone on the card.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pytest_gpu_pairs.experiment.cases import Case, JobConfig, MpsLimits
from pytest_gpu_pairs.run.mps import SERVER_LOG, MpsDaemon, MpsUnavailable, find_control, system_daemon_pid


class SharingUnavailable(RuntimeError):
    """The case's mechanism cannot be used here; the message is the skip reason."""


@dataclass
class CaseSharing:
    """What a round of one case needs: extra environment per role, a probe of the mechanism
    taken while the background still runs (which MPS servers and clients exist), and a wait before
    each round until the mechanism serves clients again (its stamps go into the round's timeline)."""

    mode: str
    job_env: dict[str, dict[str, str]] = field(default_factory=dict)
    probe: Optional[Callable[[], dict[str, Any]]] = None
    before_round: Optional[Callable[[], dict[str, Any]]] = None
    faults: Optional[Callable[[], list[str]]] = None  # the mechanism's own fatal errors since the case began

    def ready_for_round(self) -> dict[str, Any]:
        return self.before_round() if self.before_round is not None else {}

    def failure_cause(self) -> Optional[str]:
        """What the mechanism says of a failed case: under MPS, a server that faulted tears down all
        its clients, and each job's own log shows only the CUDA error that followed."""
        lines = self.faults() if self.faults is not None else []
        if not lines:
            return None
        return (f"the MPS server reported a fatal GPU error while the case ran and tore down its clients "
                f"({len(lines)} line(s) in the daemon's {SERVER_LOG}, the first: {lines[0][:300]})")


class SharingManager:
    def __init__(self, out_dir: Path, control: Optional[str] = None, mps_threads: Optional[int] = None,
                 mps_mem_limit_mb: Optional[int] = None, client_check: Optional[list[str]] = None):
        self.log_dir = Path(out_dir) / "_mps"
        self.control, self.client_check = control, client_check
        self.command_line_limits = MpsLimits(mps_threads, mps_mem_limit_mb)
        self.daemon: Optional[MpsDaemon] = None
        self.starts = 0
        self.stop_problems: list[str] = []
        self._failure: Optional[str] = None
        self.device_env: dict[str, str] = {}  # the GPU a pinned session owns, for the daemon too

    def check(self, case: Case, device: str) -> None:
        """Refuse early (before any solo baseline is spent) what cannot run at all."""
        if case.sharing == "timeslice":
            return
        if device != "cuda":
            raise SharingUnavailable(f"sharing {case.sharing} needs an NVIDIA GPU; jobs train on {device} here")
        if self._failure is not None:
            raise SharingUnavailable(self._failure)

    def prepare(self, case: Case, device: str) -> CaseSharing:
        """Bring the mechanism up (or down) for ``case`` and say what its jobs need."""
        self.check(case, device)
        if case.sharing == "timeslice":
            self.release()
            return CaseSharing("timeslice", probe=self._timeslice_probe())
        daemon = self.start_mps(check_client=True)
        limits = {role: self.limits(job) for role, job in zip(case.roles, case.jobs)}
        job_env = {role: daemon.client_env(lim) for role, lim in limits.items()}
        record = {role: lim.as_record() for role, lim in limits.items()}
        offset = daemon.server_log_size()
        return CaseSharing("mps", job_env, probe=lambda: {"limits": record, **daemon.probe()},
                           before_round=lambda: daemon.wait_ready(self.client_check),
                           faults=lambda: daemon.fatal_errors_since(offset))

    def limits(self, job: JobConfig) -> MpsLimits:
        return self.command_line_limits.merged_over(job.mps)

    def start_mps(self, check_client: bool = False) -> MpsDaemon:
        """The running daemon, started now if needed (and, with ``check_client``, proven to serve a
        CUDA client); a failure is remembered as the skip reason of every later MPS case."""
        if self.daemon is not None and self.daemon.running:
            return self.daemon
        if self._failure is not None:
            raise SharingUnavailable(self._failure)
        try:
            self.daemon = MpsDaemon(find_control(self.control), self.log_dir, device_env=self.device_env).start()
            self.starts += 1
            if check_client:
                self.daemon.check_client(self.client_check)
        except MpsUnavailable as exc:
            self._failure = f"MPS unavailable: {exc}"
            self.release()
            raise SharingUnavailable(self._failure) from None
        return self.daemon

    def release(self) -> None:
        """Stop the daemon (if up) before something that must not run beside an MPS server."""
        if self.daemon is not None and self.daemon.running:
            problem = self.daemon.stop()
            if problem:
                self.stop_problems.append(problem)

    @staticmethod
    def _timeslice_probe() -> Optional[Callable[[], dict[str, Any]]]:
        pid = system_daemon_pid()
        return (lambda: {"system_mps_daemon_pid": pid}) if pid is not None else None

    def close(self) -> None:
        self.release()
