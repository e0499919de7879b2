"""The one case wrapper: every case's folder, clock and ending, one record whatever happens.

Whatever a case's method, its folder is prepared the same way, its method's part measures it,
and it ends with one record, whatever happens.

A method's part (``run/pair.py`` for the epoch and interleaved methods, ``run/scaling.py`` for a
scaling case) says only what differs: why the case cannot run here, how it is measured, and the
figures its record gets at the end. The wrapper reaches the session's parts through a
``CaseContext``, never the session itself.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from pytest_gpu_pairs.experiment.cases import Case, describe
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.checks import CaseResult
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import StoreWriteError, save_incomplete
from pytest_gpu_pairs.run.device import Device
from pytest_gpu_pairs.run.fitprofile import FitProfiles
from pytest_gpu_pairs.run.outdir import OutputFolder, OutsideOutputFolder
from pytest_gpu_pairs.run.sharing import SharingManager
from pytest_gpu_pairs.run.solos import SoloBaselines


@dataclass(frozen=True)
class CaseContext:
    """What a case may use of its session: the session's parts, and the one step that leaves the
    record where every reader finds it (``conclude``)."""

    folder: OutputFolder
    device: Device
    solos: SoloBaselines
    sharing: SharingManager
    fits: FitProfiles
    conclude: Callable[[Case, Record, Any], CaseResult]
    results: Sequence[CaseResult]  # the cases concluded so far (a scaling case finds its one-GPU baseline there)


class MethodPart(Protocol):
    """A method's share of running a case."""

    def prepare(self) -> None:
        """Skip the case (``pytest.skip``) if it cannot run here; nothing is written yet."""

    def before_start(self) -> None:
        """Just before the case's clock starts: its folder exists."""

    def measure(self) -> Record:
        """The case measured; may end it early through ``CaseRun.fail``."""

    def completed(self, record: Record) -> Record:
        """The record with the method's last figures; every job, monitor and ballast has stopped."""

    def close(self) -> None:
        """Everything the part started, stopped; safe at any point and more than once."""


class CaseRun:
    """Runs one case. A case that cannot run here is skipped before its folder is touched; from then
    on every way out leaves a ``result.json``: complete (passing, or failing with the reason) when
    the case ran to its end, incomplete with ``interrupted`` when Ctrl-C, SIGTERM or an error of the
    harness cut it short. The ``timeline`` in it stamps every phase."""

    def __init__(self, case: Case, context: CaseContext, benchmark, part: Callable[[CaseRun], MethodPart]):
        self.case, self.context, self.benchmark = case, context, benchmark
        self.env = context.device.environment()
        self.timeline: dict[str, Any] = {}
        self._recorded = False
        self.part = part(self)

    def __call__(self) -> CaseResult:
        self.part.prepare()
        self._fresh_folder()
        self.part.before_start()
        self.timeline["case_start_t"] = now()
        try:
            return self.finish(self.part.measure())
        except StoreWriteError as exc:
            self.close()
            pytest.fail(f"{self.case.id}: {exc}", pytrace=False)
        except BaseException as exc:
            if not self._recorded and not isinstance(exc, pytest.skip.Exception):
                self.close()
                self._save_incomplete(exc)
            raise

    def _fresh_folder(self) -> None:
        try:
            self.context.folder.fresh_case_dir(self.case)
        except OutsideOutputFolder as exc:
            pytest.fail(f"{self.case.id}: {exc}", pytrace=False)
        except OSError as exc:
            pytest.fail(f"{self.case.id}: could not prepare its folder in {self.context.folder.path}: "
                        f"{exc.strerror or exc}", pytrace=False)

    def _save_incomplete(self, exc: BaseException) -> None:
        """Mark the case interrupted; if even that cannot be written, say so in one line (Ctrl-C
        and SIGTERM still end the session as they would)."""
        try:
            save_incomplete(self.context.folder.case_dir(self.case),
                            {**describe(self.case), "timeline": self.times()}, _interruption(exc))
        except StoreWriteError as write_error:
            if isinstance(exc, Exception):
                pytest.fail(f"{self.case.id}: {_interruption(exc)}; and {write_error}", pytrace=False)

    def times(self) -> dict[str, Any]:
        """The timeline so far, closed now."""
        return {**self.timeline, "case_end_t": now()}

    def finish(self, record: Record) -> CaseResult:
        """Everything stopped, the method's last figures added, and the record concluded."""
        self.close()
        record = self.part.completed(record.updated(timeline=self.times()))
        result = self.context.conclude(self.case, record, self.benchmark)
        self._recorded = True
        return result

    def fail(self, record: Record, failure: str) -> None:
        """End the case now with ``record`` (a failed one), and fail its test with ``failure``."""
        self.finish(record)
        pytest.fail(f"{self.case.id}: {failure}", pytrace=False)

    def close(self) -> None:
        self.part.close()


def _interruption(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return f"interrupted by Ctrl-C or SIGTERM ({str(exc) or 'KeyboardInterrupt'})"
    return f"the harness stopped the case: {type(exc).__name__}: {exc}"
