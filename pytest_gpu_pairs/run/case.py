"""The case runner: solo baselines, then the rounds, then one record, whatever happens."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.experiment.cases import Case, JobConfig, describe
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.build import aggregate, case_record, failed_record, interleaved_record
from pytest_gpu_pairs.record.checks import CaseResult
from pytest_gpu_pairs.record.fit import fit_record
from pytest_gpu_pairs.record.measurement import Measurement
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import StoreWriteError, save_incomplete, save_result
from pytest_gpu_pairs.run import ballast
from pytest_gpu_pairs.run.ballast import Ballast, BallastError
from pytest_gpu_pairs.run.fitprofile import PairFits
from pytest_gpu_pairs.run.interleaved import InterleavedPair
from pytest_gpu_pairs.run.round import BackgroundNotReady, Round, Supervision
from pytest_gpu_pairs.run.session import CardEmulationUnavailable, GpuPairsSession, OutsideOutputFolder
from pytest_gpu_pairs.run.sharing import CaseSharing, SharingUnavailable

MIN_INTERLEAVED_ROUNDS = 3  # the fewest rounds an interval is reported from
EPOCH_BENCHMARK_FIGURE = "fg_run_s: each round's foreground run, from its start signal to its exit"

# Hands an interleaved case's rounds to pytest-benchmark; returns what its statistics then hold.
RoundTimer = Callable[[list[dict[str, Any]]], Optional[str]]

class PairRun:
    """Runs one case: solo baselines first (cached), then ``runs_per_config`` rounds in which
    pytest-benchmark times the foreground job alone; a solo case's rounds have no background.

    Whatever happens, the case's folder ends with a ``result.json``: complete (passing, or failing
    with the reason) when the case ran to its end, incomplete with ``interrupted`` when Ctrl-C,
    SIGTERM or an error of the harness cut it short. The ``timeline`` in it stamps every phase.
    """

    def __init__(self, case: Case, session: GpuPairsSession, benchmark, round_timer: Optional[RoundTimer] = None):
        self.case, self.session, self.benchmark, self.round_timer = case, session, benchmark, round_timer
        self.env = session.environment()
        self.measurements: list[Measurement] = []
        self.timeline: dict[str, Any] = {"solo": [], "rounds": [], "cool_down_s": 0.0}
        self._round: Optional[Round] = None
        self._pair: Optional[InterleavedPair] = None
        self.sharing = CaseSharing(case.sharing)
        self._card: Optional[Ballast] = None
        self._fits: Optional[PairFits] = None
        self._recorded = False

    def __call__(self) -> CaseResult:
        """A case that cannot run here (no GPU for ``--gpu-pairs-gpu-memory-mb``, no MPS) is skipped before
        its folder is touched; from then on every way out leaves a result.json."""
        try:
            self._card = self.session.emulated_card(self.case)
        except CardEmulationUnavailable as exc:
            pytest.skip(str(exc))
        self._sharing_or_skip(self.session.sharing.check)
        try:
            self.session.fresh_case_dir(self.case)
        except OutsideOutputFolder as exc:
            pytest.fail(f"{self.case.id}: {exc}", pytrace=False)
        except OSError as exc:
            pytest.fail(f"{self.case.id}: could not prepare its folder in {self.session.options.out_dir}: "
                        f"{exc.strerror or exc}", pytrace=False)
        self.timeline["case_start_t"] = now()
        try:
            if self.case.mode == "concurrent":
                self._fits = self.session.fits.for_case(self.case, self.env)
            return self._on_card()
        except StoreWriteError as exc:
            self.close()
            pytest.fail(f"{self.case.id}: {exc}", pytrace=False)
        except BaseException as exc:
            if not self._recorded and not isinstance(exc, pytest.skip.Exception):
                self.close()
                self._save_incomplete(exc)
            raise

    def _save_incomplete(self, exc: BaseException) -> None:
        """Mark the case interrupted; if even that cannot be written, say so in one line (Ctrl-C
        and SIGTERM still end the session as they would)."""
        try:
            save_incomplete(self.session.case_dir(self.case), {**describe(self.case), **self._times()},
                            _interruption(exc))
        except StoreWriteError as write_error:
            if isinstance(exc, Exception):
                pytest.fail(f"{self.case.id}: {_interruption(exc)}; and {write_error}", pytrace=False)

    def _on_card(self) -> CaseResult:
        """With ``--gpu-pairs-gpu-memory-mb`` the whole case, solo baselines included, runs on the emulated card."""
        if self._card is None:
            return self._run()
        try:
            self._card.start()
        except BallastError as exc:
            self.close()
            pytest.fail(f"{self.case.id}: --gpu-pairs-gpu-memory-mb: {exc}", pytrace=False)
        if self._card.pid is not None:
            self.env.fixed_roles[self._card.pid] = ballast.ROLE
        try:
            return self._run()
        finally:
            self._stop_card()

    def _run(self) -> CaseResult:
        if self.case.mode == "solo":
            return self._solo_case()
        if self.case.method == "interleaved":
            return self._interleaved_case()
        case = self.case
        solo_fg = self._solo(case.fg)
        solo_bg = self._solo(case.bg) if case.bg is not None else None
        self.sharing = self._sharing_or_skip(self.session.sharing.prepare)
        try:
            self._measure_rounds()
        except BackgroundNotReady as exc:
            loop = self._round.background.snapshot() if self._round and self._round.background else None
            self.close()
            return self._finish(failed_record(case, str(exc), self.env, loop))
        return self._finish(aggregate(self._round_records(solo_fg, solo_bg)))

    def _interleaved_case(self) -> CaseResult:
        """Both jobs kept alive and switched between phases, round after round, until the stopping
        rule is met; then each complete round is handed to pytest-benchmark as one of its rounds."""
        self.sharing = self._sharing_or_skip(self.session.sharing.prepare)
        self.timeline["sharing_ready"] = self.sharing.ready_for_round()
        rule = self.session.options.stopping_rule(self.env.device, max(MIN_INTERLEAVED_ROUNDS, self.case.runs_per_config))
        self._pair = InterleavedPair(self.case, self.env, self.session.case_dir(self.case), rule, self.sharing.job_env,
                                     standby_allowed=self._card is None)
        measurement = self._pair.run()
        self._pair = None
        self.session.release_device()
        record = interleaved_record(self.case, measurement, self.env)
        return self._finish(record.updated(**self._benchmark_figure(record)))

    def _benchmark_figure(self, record: Record) -> dict[str, Any]:
        """What pytest-benchmark's statistics of an interleaved case hold, or why they hold nothing."""
        figure = self.round_timer(record.rounds or []) if self.round_timer else None
        if figure is not None:
            return {"benchmark_figure": figure}
        why = ("no complete round to hand to pytest-benchmark" if self.round_timer else
               "the test does not carry the benchmark marker with gpu-pairs' round clock (cases from "
               "--gpu-pairs-settings do)")
        return {"benchmark_figure": None, "notes": {**(record.notes or {}), "benchmark_figure": why}}

    def _solo_case(self) -> CaseResult:
        """A solo case measures its job unless the session already did (then it reports that
        measurement, and pytest-benchmark has nothing of its own to time); its first round is the
        job's baseline for every concurrent case after it."""
        job = self.case.fg
        cached = self.session.cached_solo(job)
        if cached is not None:
            record = self._record(cached, cached, None).updated(reused_measurement=str(cached.out_dir))
            return self._finish(aggregate([record]))
        self.sharing = self._sharing_or_skip(self.session.sharing.prepare)  # plain: no MPS daemon up
        self._measure_rounds()
        records = self._round_records(None, None)
        self.session.adopt_solo(job, self.measurements[0], records[0])
        return self._finish(aggregate(records))

    def _sharing_or_skip(self, step):
        """A mechanism that cannot run here (no GPU, MPS daemon failed to start) skips the case."""
        try:
            return step(self.case, self.env.device)
        except SharingUnavailable as exc:
            pytest.skip(f"{self.case.id}: {exc}")

    def _measure_rounds(self) -> None:
        """``runs_per_config`` rounds, pytest-benchmark timing the foreground job of each."""
        rounds = self.case.runs_per_config
        try:
            self.benchmark.pedantic(self._foreground, setup=self._start_round, teardown=self._end_round,
                                    rounds=rounds)
        except BaseException:
            # pytest-benchmark flags only Exception; a Ctrl-C or SIGTERM mid-round would leave a
            # benchmark without timings, and writing --benchmark-json would then crash on it
            self.benchmark.has_error = True
            raise
        self._end_round()
        while len(self.measurements) < rounds:  # --benchmark-disable runs one round
            self._start_round()
            self._foreground()
            self._end_round()

    def _round_records(self, solo_fg: Optional[Measurement], solo_bg: Optional[Measurement]) -> list[Record]:
        """Every round's record (a solo round is its own baseline); with repeats, each one is also
        saved in its round folder, so every repeat is on record and not only their mean."""
        records = [self._record(m, solo_fg or m, solo_bg) for m in self.measurements]
        if self.case.runs_per_config > 1:
            for m, record in zip(self.measurements, records):
                save_result(m.out_dir, record)
        return records

    def _record(self, m: Measurement, solo_fg: Optional[Measurement], solo_bg: Optional[Measurement]) -> Record:
        case = self.case
        return case_record(case, m, solo_fg, solo_bg, self.env, self.session.solo_record(case.fg))

    def _solo(self, job: JobConfig) -> Measurement:
        measured_now = not self.session.has_solo(job)
        if measured_now:
            self.timeline["cool_down_s"] += self.session.cool_down(self.case.cool_down_s)
        try:
            solo = self.session.solo(job, self.case.timeout_s)
        except OutsideOutputFolder as exc:
            failure = f"solo baseline of {job.model} not measured: {exc}"
            self._finish(failed_record(self.case, failure, self.env))
            pytest.fail(f"{self.case.id}: {failure}", pytrace=False)
        if measured_now:
            self.timeline["solo"].append({"model": job.model, "start_t": solo.fg.start_t, "end_t": solo.fg.end_t,
                                          "train_start_t": solo.window[0], "train_end_t": solo.window[1]})
        if solo.fg.failed:
            failure = f"solo baseline of {job.model} failed: {solo.fg.reason()}"
            self._finish(failed_record(self.case, failure, self.env).updated(oom=solo.fg.oom))
            pytest.fail(f"{self.case.id}: {failure}", pytrace=False)
        return solo

    def _round_dir(self) -> Path:
        base = self.session.case_dir(self.case)
        return base if self.case.runs_per_config == 1 else base / f"round-{len(self.measurements) + 1:02d}"

    def _start_round(self) -> None:
        self.timeline["cool_down_s"] += self.session.cool_down(self.case.cool_down_s)
        ready = self.sharing.ready_for_round()
        self._round = Round(self.case.fg, self.case.bg, self.env, self._round_dir(), Supervision.of(self.case),
                            self.sharing.job_env, self.sharing.probe)
        self._round.timeline.update(ready)
        self._round.start()

    def _foreground(self):
        if self._round is None:
            raise RuntimeError(f"{self.case.id}: the round's foreground runs after the round started")
        return self._round.run_foreground()

    def _end_round(self, *_: Any) -> None:
        if self._round is not None and self._round.fg_outcome is not None:
            measurement = self._round.finish()
            self.session.release_device()
            self.measurements.append(measurement)
            self.timeline["rounds"].append({**measurement.timeline, "fg_train_start_t": measurement.window[0],
                                            "fg_train_end_t": measurement.window[1],
                                            "fg_completed": measurement.fg.completed})
            self._round = None

    def _times(self) -> dict[str, Any]:
        return {"timeline": {**self.timeline, "case_end_t": now()}}

    def _finish(self, record: Record) -> CaseResult:
        self.close()
        timeline = self._times()["timeline"]
        changes = {"timeline": timeline, "case_wall_s": timeline["case_end_t"] - timeline.get("case_start_t", now())}
        if self.case.method == "epoch" and self.measurements:
            changes["benchmark_figure"] = EPOCH_BENCHMARK_FIGURE
        changes.update(self._card.figures() if self._card is not None else {"gpu_memory_mb": None})
        changes.update(self._fit_verdict(record))
        result = self.session.conclude(self.case, record.updated(**changes), self.benchmark)
        self._recorded = True
        return result

    def _fit_verdict(self, record: Record) -> dict[str, Any]:
        """The pair's memory verdict from both jobs' whole-run fit profiles, measured before the case."""
        if self._fits is None:
            return {}
        together = record.mps_server_vram_mb if self.case.sharing == "mps" else 0.0
        figures, notes = fit_record(self._fits.fg, self._fits.bg, together, self.case.vram_budget_mb,
                                    self._fits.unmeasured, self._fits.seconds)
        return {**figures, "notes": {**(record.notes or {}), **notes}} if notes else figures

    def close(self) -> None:
        if self._pair is not None:
            self._pair.close()
            self._pair = None
            self.session.release_device()
        if self._round is not None:
            self._round.abort()
            self._round = None
            self.session.release_device()
        self._stop_card()

    def _stop_card(self) -> None:
        if self._card is not None:
            self._card.stop()
            if self._card.pid is not None:
                self.env.fixed_roles.pop(self._card.pid, None)


def _interruption(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return f"interrupted by Ctrl-C or SIGTERM ({str(exc) or 'KeyboardInterrupt'})"
    return f"the harness stopped the case: {type(exc).__name__}: {exc}"
