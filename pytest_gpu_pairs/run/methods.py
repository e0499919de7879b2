"""The measuring methods, one object each, and the one place a case's method is told apart.

A method declares once what differs between the ways a case is measured: the part of the case
wrapper that runs it, the builder of its record, the estimate planning charges for it, its
stopping rule, and whether pytest-benchmark's rounds are its own. Everything else asks
``method_of(case)`` and never compares a method's name.

- ``epoch``: each job's whole run, alone and then in the pair, ``runs_per_config`` times; a solo
  case is measured this way too.
- ``interleaved``: both jobs kept alive, switched between solo and pair phases round after round
  until the stopping rule is met.
- ``steps`` (the scaling design): one job data-parallel on a number of GPUs, its steps timed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from pytest_gpu_pairs.experiment.cases import Case
from pytest_gpu_pairs.record.build import case_record, interleaved_record
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.record.scaling import scaling_record
from pytest_gpu_pairs.record.stats import StoppingRule
from pytest_gpu_pairs.run.case import CaseContext, CaseRun
from pytest_gpu_pairs.run.options import stopping_rule
from pytest_gpu_pairs.run.pair import EpochRounds, InterleavedRounds, RoundTimer
from pytest_gpu_pairs.run.scaling import ScalingRanks

MIN_INTERLEAVED_ROUNDS = 3  # the fewest rounds an interval is reported from


class Estimates(Protocol):
    """What planning's estimator offers, one estimate per method (the run layer does not import
    planning: a method names its estimate, the estimator computes it)."""

    def epoch(self, case: Case) -> Any: ...

    def interleaved(self, case: Case) -> Any: ...

    def scaling(self, case: Case) -> Any: ...


@dataclass(frozen=True)
class Method:
    """One way of measuring a case. Its part and its record builder are named here together, so a
    runner never picks a builder of its own, and planning charges what the runner will do."""

    name: str  # the case's and the record's ``method``
    runner: Callable[[Case, CaseContext, Any, Optional[RoundTimer]], CaseRun]
    record: Callable[..., Record]
    estimate: Callable[[Estimates, Case], Any]
    # how many rounds a case measures on a device; None where the case says (``runs_per_config``)
    stopping_rule: Callable[[Case, str], Optional[StoppingRule]]
    round_clock: bool  # pytest-benchmark's rounds are this method's rounds, timed by gpu-pairs' round clock


def _no_rule(case: Case, device: str) -> None:
    return None


def interleaved_rule(case: Case, device: str) -> StoppingRule:
    """The rule the case was built with, for ``device``; never fewer than ``MIN_INTERLEAVED_ROUNDS`` rounds."""
    return stopping_rule(case.precision, case.max_rounds, case.max_case_s, device,
                         max(MIN_INTERLEAVED_ROUNDS, case.runs_per_config))


def _epoch_runner(case: Case, context: CaseContext, benchmark, round_timer: Optional[RoundTimer] = None) -> CaseRun:
    return CaseRun(case, context, benchmark, lambda run: EpochRounds(run, EPOCH.record))


def _interleaved_runner(case: Case, context: CaseContext, benchmark,
                        round_timer: Optional[RoundTimer] = None) -> CaseRun:
    def part(run: CaseRun) -> InterleavedRounds:
        rule = interleaved_rule(case, run.env.device)
        return InterleavedRounds(run, rule, round_timer, INTERLEAVED.record)
    return CaseRun(case, context, benchmark, part)


def _scaling_runner(case: Case, context: CaseContext, benchmark, round_timer: Optional[RoundTimer] = None) -> CaseRun:
    return CaseRun(case, context, benchmark, lambda run: ScalingRanks(run, SCALING.record))


EPOCH = Method("epoch", _epoch_runner, case_record, lambda estimates, case: estimates.epoch(case), _no_rule,
               round_clock=False)
INTERLEAVED = Method("interleaved", _interleaved_runner, interleaved_record,
                     lambda estimates, case: estimates.interleaved(case), interleaved_rule, round_clock=True)
SCALING = Method("steps", _scaling_runner, scaling_record, lambda estimates, case: estimates.scaling(case), _no_rule,
                 round_clock=False)

METHODS: Mapping[str, Method] = {method.name: method for method in (EPOCH, INTERLEAVED, SCALING)}


def method_of(case: Case) -> Method:
    """The method a case is measured with (the cases decide it: ``experiment.cases``)."""
    try:
        return METHODS[case.method]
    except KeyError:
        raise ValueError(f"case {case.id}: unknown method {case.method!r}; expected one of "
                         f"{', '.join(METHODS)}") from None
