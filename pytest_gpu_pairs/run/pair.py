"""A case on one GPU: the epoch and interleaved methods' parts of the case wrapper.

Both may run on an emulated smaller card, under a sharing mechanism, with the pair's fit profiles
measured first; they differ in how the jobs are measured."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.protocol import now
from pytest_gpu_pairs.record.build import SoloBaseline, aggregate, failed_record, reused_record
from pytest_gpu_pairs.record.fit import fit_record
from pytest_gpu_pairs.record.measurement import Measurement
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.stats import StoppingRule
from pytest_gpu_pairs.record.store import save_result
from pytest_gpu_pairs.run import ballast
from pytest_gpu_pairs.run.ballast import Ballast, BallastError
from pytest_gpu_pairs.run.case import CaseRun
from pytest_gpu_pairs.run.device import CardEmulationUnavailable
from pytest_gpu_pairs.run.fitprofile import PairFits
from pytest_gpu_pairs.run.interleaved import InterleavedPair
from pytest_gpu_pairs.run.outdir import OutsideOutputFolder
from pytest_gpu_pairs.run.round import BackgroundNotReady, Round, Supervision
from pytest_gpu_pairs.run.sharing import CaseSharing, SharingUnavailable

EPOCH_BENCHMARK_FIGURE = "fg_run_s: each round's foreground run, from its start signal to its exit"

# Hands an interleaved case's rounds to pytest-benchmark; returns what its statistics then hold.
RoundTimer = Callable[[list[dict[str, Any]]], Optional[str]]


class OnOneGpu:
    """What the epoch and interleaved methods share. ``_measure`` is each one's own."""

    def __init__(self, run: CaseRun):
        self.run, self.case, self.context, self.env = run, run.case, run.context, run.env
        self.sharing = CaseSharing(self.case.sharing)
        self._card: Optional[Ballast] = None
        self._fits: Optional[PairFits] = None
        run.timeline.update(solo=[], rounds=[], cool_down_s=0.0)

    def prepare(self) -> None:
        """No GPU for ``--gpu-pairs-gpu-memory-mb``, or no MPS: the case is skipped."""
        try:
            self._card = self.context.device.emulated_card(self.case)
        except CardEmulationUnavailable as exc:
            pytest.skip(str(exc))
        self._sharing_or_skip(self.context.sharing.check)

    def before_start(self) -> None:
        pass

    def measure(self) -> Record:
        """With ``--gpu-pairs-gpu-memory-mb`` the whole case, solo baselines included, runs on the emulated card."""
        if self.case.mode == "concurrent":
            self._fits = self.context.fits.for_case(self.case, self.env)
        if self._card is None:
            return self._measure()
        try:
            self._card.start()
        except BallastError as exc:
            self.run.close()
            pytest.fail(f"{self.case.id}: --gpu-pairs-gpu-memory-mb: {exc}", pytrace=False)
        if self._card.pid is not None:
            self.env.fixed_roles[self._card.pid] = ballast.ROLE
        try:
            return self._measure()
        finally:
            self._stop_card()

    def _measure(self) -> Record:
        raise NotImplementedError

    def _sharing_or_skip(self, step):
        """A mechanism that cannot run here (no GPU, MPS daemon failed to start) skips the case."""
        try:
            return step(self.case, self.env.device)
        except SharingUnavailable as exc:
            pytest.skip(f"{self.case.id}: {exc}")

    def completed(self, record: Record) -> Record:
        timeline = record.timeline or {}
        changes: dict[str, Any] = {"case_wall_s": timeline["case_end_t"] - timeline.get("case_start_t", now())}
        changes.update(self._card.figures() if self._card is not None else {"gpu_memory_mb": None})
        changes.update(self._fit_verdict(record))
        return record.updated(**changes)

    def _fit_verdict(self, record: Record) -> dict[str, Any]:
        """The pair's memory verdict from both jobs' whole-run fit profiles, measured before the case."""
        if self._fits is None:
            return {}
        together = record.mps_server_vram_mb if self.case.sharing == "mps" else 0.0
        profiles = self._fits.by_role(self.case.roles)
        figures, notes = fit_record(profiles, together, self.case.vram_budget_mb, self._fits.unmeasured,
                                    self._fits.seconds)
        if record.jobs:
            figures["jobs"] = [job.model_copy(update={"vram_need_mb": p.need_mb if p else None,
                                                      "vram_need_phase": p.peak_phase if p else None}).model_dump()
                               for job, p in zip(record.jobs, profiles.values())]
        return {**figures, "notes": {**(record.notes or {}), **notes}} if notes else figures

    def close(self) -> None:
        self._stop_card()

    def _stop_card(self) -> None:
        if self._card is not None:
            self._card.stop()
            if self._card.pid is not None:
                self.env.fixed_roles.pop(self._card.pid, None)


class EpochRounds(OnOneGpu):
    """The epoch method: solo baselines first (cached), then ``runs_per_config`` rounds in which
    pytest-benchmark times the foreground job alone; a solo case's rounds have no background."""

    def __init__(self, run: CaseRun, build: Callable[..., Record]):
        super().__init__(run)
        self.build = build
        self.measurements: list[Measurement] = []
        self._round: Optional[Round] = None

    def _measure(self) -> Record:
        if self.case.mode == "solo":
            return self._solo_case()
        case = self.case
        solo_fg = self._solo(case.fg)
        solo_bg = self._solo(case.bg) if case.bg is not None else None
        self.sharing = self._sharing_or_skip(self.context.sharing.prepare)
        try:
            self._measure_rounds()
        except BackgroundNotReady as exc:
            loop = self._round.background.snapshot() if self._round and self._round.background else None
            return failed_record(case, str(exc), self.env, loop)
        return aggregate(self._round_records(solo_fg, solo_bg), case.min_coverage)

    def _solo_case(self) -> Record:
        """A solo case measures its job unless the session already did, or resumed an earlier
        session's solo case of it (then it reports that run, and pytest-benchmark has nothing of
        its own to time); its first round is the job's baseline for every concurrent case after it."""
        job = self.case.fg
        cached = self.context.solos.cached(job)
        if cached is not None:
            baseline = SoloBaseline.measured(cached, self.env)
            return aggregate([self._record(cached, baseline, None).updated(reused_measurement=str(cached.out_dir))])
        recorded = self.context.solos.recorded(job)
        if recorded is not None:
            return aggregate([reused_record(self.case, *recorded)])
        self.sharing = self._sharing_or_skip(self.context.sharing.prepare)  # plain: no MPS daemon up
        self._measure_rounds()
        records = self._round_records(None, None)
        self.context.solos.adopt(job, self.measurements[0], records[0])
        return aggregate(records)

    def _measure_rounds(self) -> None:
        """``runs_per_config`` rounds, pytest-benchmark timing the foreground job of each."""
        rounds = self.case.runs_per_config
        benchmark = self.run.benchmark
        try:
            benchmark.pedantic(self._foreground, setup=self._start_round, teardown=self._end_round, rounds=rounds)
        except BaseException:
            # pytest-benchmark flags only Exception; a Ctrl-C or SIGTERM mid-round would leave a
            # benchmark without timings, and writing --benchmark-json would then crash on it
            benchmark.has_error = True
            raise
        self._end_round()
        while len(self.measurements) < rounds:  # --benchmark-disable runs one round
            self._start_round()
            self._foreground()
            self._end_round()

    def _round_records(self, solo_fg: Optional[SoloBaseline], solo_bg: Optional[SoloBaseline]) -> list[Record]:
        """Every round's record (a solo round is its own baseline); with repeats, each one is also
        saved in its round folder, so every repeat is on record and not only their mean."""
        records = [self._record(m, solo_fg or SoloBaseline.measured(m, self.env), solo_bg) for m in self.measurements]
        if self.case.runs_per_config > 1:
            for m, record in zip(self.measurements, records):
                save_result(m.out_dir, record)
        return records

    def _record(self, m: Measurement, solo_fg: Optional[SoloBaseline], solo_bg: Optional[SoloBaseline]) -> Record:
        return self.build(self.case, m, solo_fg, solo_bg, self.env, self.context.solos.record(self.case.fg))

    def _solo(self, job: JobConfig) -> SoloBaseline:
        solos, timeline = self.context.solos, self.run.timeline
        recorded = solos.recorded(job)
        if recorded is not None:
            return SoloBaseline.recorded(recorded[0])
        measured_now = not solos.has(job)
        if measured_now:
            timeline["cool_down_s"] += self.context.device.cool_down(self.case.cool_down_s)
        try:
            solo = solos.measure(job, self.case.timeout_s)
        except OutsideOutputFolder as exc:
            failure = f"solo baseline of {job.model} not measured: {exc}"
            self.run.fail(failed_record(self.case, failure, self.env), failure)
        if measured_now:
            timeline["solo"].append({"model": job.model, "start_t": solo.fg.start_t, "end_t": solo.fg.end_t,
                                     "train_start_t": solo.window[0], "train_end_t": solo.window[1]})
        if solo.fg.failed:
            failure = f"solo baseline of {job.model} failed: {solo.fg.reason()}"
            self.run.fail(failed_record(self.case, failure, self.env).updated(oom=solo.fg.oom), failure)
        return SoloBaseline.measured(solo, self.env)

    def _round_dir(self) -> Path:
        return self.context.folder.round_dir(self.case, len(self.measurements) + 1)

    def _start_round(self) -> None:
        self.run.timeline["cool_down_s"] += self.context.device.cool_down(self.case.cool_down_s)
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
            self.context.device.release()
            self.measurements.append(measurement)
            self.run.timeline["rounds"].append({**measurement.timeline, "fg_train_start_t": measurement.window[0],
                                                "fg_train_end_t": measurement.window[1],
                                                "fg_completed": measurement.fg.completed})
            self._round = None

    def completed(self, record: Record) -> Record:
        if self.measurements:
            record = record.updated(benchmark_figure=EPOCH_BENCHMARK_FIGURE)
        return super().completed(record)

    def close(self) -> None:
        if self._round is not None:
            self._round.abort()
            self._round = None
            self.context.device.release()
        super().close()


class InterleavedRounds(OnOneGpu):
    """The interleaved method: both jobs kept alive and switched between phases, round after round,
    until the stopping rule is met; then each complete round is handed to pytest-benchmark as one
    of its rounds."""

    def __init__(self, run: CaseRun, rule: StoppingRule, round_timer: Optional[RoundTimer],
                 build: Callable[..., Record]):
        super().__init__(run)
        self.rule, self.round_timer, self.build = rule, round_timer, build
        self._pair: Optional[InterleavedPair] = None

    def _measure(self) -> Record:
        self.sharing = self._sharing_or_skip(self.context.sharing.prepare)
        self.run.timeline["sharing_ready"] = self.sharing.ready_for_round()
        env = replace(self.env, cpus=self.env.cpus.for_roles(self.case.roles))  # a core for each job of a group
        self._pair = InterleavedPair(self.case, env, self.context.folder.case_dir(self.case), self.rule,
                                     self.sharing.job_env, standby_allowed=self._card is None,
                                     probe=self.sharing.probe)
        measurement = self._pair.run()
        self._pair = None
        self.context.device.release()
        cause = self.sharing.failure_cause() if measurement.failure else None
        if cause:
            measurement = replace(measurement, failure=f"{measurement.failure}; {cause}")
        record = self.build(self.case, measurement, env)
        return record.updated(**self._benchmark_figure(record))

    def _benchmark_figure(self, record: Record) -> dict[str, Any]:
        """What pytest-benchmark's statistics of an interleaved case hold, or why they hold nothing."""
        figure = self.round_timer(record.rounds or []) if self.round_timer else None
        if figure is not None:
            return {"benchmark_figure": figure}
        why = ("no complete round to hand to pytest-benchmark" if self.round_timer else
               "the test does not carry the benchmark marker with gpu-pairs' round clock (cases from "
               "--gpu-pairs-settings do)")
        return {"benchmark_figure": None, "notes": {**(record.notes or {}), "benchmark_figure": why}}

    def close(self) -> None:
        if self._pair is not None:
            self._pair.close()
            self._pair = None
            self.context.device.release()
        super().close()
