"""``--gpu-pairs-compare``: the comparison gate inside a pytest session.

Bad thresholds or an unreadable baseline stop the session before anything trains; a baseline
from another GPU, driver or CUDA version is refused as soon as the device is opened (before the
first case, not after hours of training); at session end this session's records are compared
with the baseline, the table goes into the terminal summary, and a regression turns the exit
status non-zero even when every test passed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

from pytest_gpu_pairs.analysis.compare import (
    Comparison,
    Threshold,
    compare_runs,
    format_table,
    method_refusal,
    out_of_range,
    parse_thresholds,
    refusal,
)
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.store import Run, StoreError, load_run, machine_from_session
from pytest_gpu_pairs.run.environment import Environment

GATE_KEY = pytest.StashKey["CompareGate"]()


def machine_info(env: Environment, gpu_memory_mb: Optional[float] = None) -> dict[str, Any]:
    """This session's machine, built as a run directory's is from its ``session.json``."""
    gpu = env.gpu.info.__dict__ if env.gpu is not None and env.device == "cuda" else None
    return machine_from_session({"device": env.device_name, "gpu": gpu, "idle_power_w": env.idle_power_w,
                                 "gpu_memory_mb": gpu_memory_mb})


@dataclass
class CompareGate:
    baseline: Run
    thresholds: list[Threshold]
    force: bool
    gpu_memory_mb: Optional[float] = None
    comparison: Optional[Comparison] = None
    refused: Optional[str] = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Optional[CompareGate]:
        path = config.getoption("gpu_pairs_compare")
        fail = config.getoption("gpu_pairs_compare_fail")
        if path is None:
            if fail:
                raise pytest.UsageError("--gpu-pairs-compare-fail needs a baseline: --gpu-pairs-compare PATH")
            return None
        try:
            gate = cls(load_run(path), parse_thresholds(fail or "", "--gpu-pairs-compare-fail"),
                       config.getoption("gpu_pairs_compare_force"), config.getoption("gpu_pairs_gpu_memory_mb"))
        except StoreError as exc:
            raise pytest.UsageError(str(exc)) from None
        unusable = gate.unusable_figure()
        if unusable:
            raise pytest.UsageError(f"--gpu-pairs-compare: {unusable}")
        return gate

    def unusable_figure(self) -> Optional[str]:
        """The first gated figure of the baseline no comparison can compute with, in one line."""
        return next((problem for case_id in self.baseline.records for t in self.thresholds
                     if (problem := out_of_range(self.baseline, case_id, t.metric))), None)

    def machine_refusal(self, env: Environment) -> Optional[str]:
        """The refusal message when the baseline comes from another machine (and is not forced)."""
        current = Run("this session", {}, machine_info(env, self.gpu_memory_mb))
        message = refusal(self.baseline, current)
        if message and self.force:
            self.notes.append(f"warning: {message}; compared anyway (--gpu-pairs-compare-force)")
            return None
        self.refused = message and f"{message} (--gpu-pairs-compare-force compares anyway)"
        return self.refused

    def method_refusal(self, methods: dict[str, str]) -> Optional[str]:
        """The refusal when a case this session will run was measured in the baseline with another
        method (``methods``: case id -> this session's method); no option lifts it."""
        self.refused = method_refusal(self.baseline, methods, "this session")
        return self.refused

    def finish(self, records: list[Record], env: Optional[Environment],
               expected: Optional[list[str]] = None) -> bool:
        """Compare this session's records with the baseline; True when the gate fails. With limits
        the gate must judge: a case of the baseline that this session set out to run (``expected``)
        and did not record, or no case to compare at all, fails it."""
        if self.refused or (not records and not self.thresholds):
            return bool(self.refused)
        current = Run("this session", {r.case_id: r for r in records if r.case_id is not None},
                      machine_info(env, self.gpu_memory_mb) if env is not None else {})
        self.comparison = compare_runs(self.baseline, current, self.thresholds, expected=expected)
        return self.comparison.failed

    def summary_lines(self) -> list[str]:
        if self.refused:
            return [f"refused: {self.refused}; the session stopped before the first case"]
        if self.comparison is None:
            return [f"no gpu-pairs case ran in this session: nothing compared with {self.baseline.source}"]
        return self.notes + format_table(self.comparison)

    @property
    def failed(self) -> bool:
        return bool(self.refused) or (self.comparison is not None and self.comparison.failed)


def configure(config: pytest.Config) -> None:
    gate = CompareGate.from_config(config)
    if gate is not None:
        config.stash[GATE_KEY] = gate


def refuse_foreign_baseline(config: pytest.Config, env: Environment, methods: Optional[dict[str, str]] = None) -> None:
    """Stop the session before the first case when the baseline's machine differs, or when it
    measured a case this session will run (``methods``: case id -> method) with another method."""
    gate = config.stash.get(GATE_KEY, None)
    message = gate.machine_refusal(env) or gate.method_refusal(methods or {}) if gate is not None else None
    if message:
        pytest.exit(f"--gpu-pairs-compare: {message}", returncode=pytest.ExitCode.USAGE_ERROR)


def session_finish(session: pytest.Session, records: list[Record], env: Optional[Environment],
                   expected: Optional[list[str]] = None) -> None:
    gate = session.config.stash.get(GATE_KEY, None)
    if gate is not None and gate.finish(records, env, expected) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def terminal_summary(reporter, config: pytest.Config) -> None:
    gate = config.stash.get(GATE_KEY, None)
    if gate is None:
        return
    reporter.write_sep("=", f"gpu-pairs compare with {gate.baseline.source}", red=gate.failed, bold=gate.failed)
    for line in gate.summary_lines():
        reporter.write_line(line)
    if gate.comparison is not None and gate.comparison.failed:
        reporter.write_line("gpu-pairs compare failed: exit status 1 even where every test passed", red=True)
