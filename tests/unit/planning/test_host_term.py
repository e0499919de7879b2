"""The host's term in a predicted interval: the planner reads busy fractions another host (or a short
profile) measured, and the host that runs the pair keeps its jobs busier or idler; the interval
holds what that moves, most where the pair is near contention, least where a bound pins it."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.planning import predict
from pytest_gpu_pairs.planning.cards import H200
from pytest_gpu_pairs.planning.predict import Planner, interval_basis
from tools.codegen.reference_pairs import ROOT

TABLE, REFERENCE = H200.table(), H200.pairs().measured
PLANNER = Planner(TABLE, REFERENCE)
UNMEASURED = [(a, b) for i, a in enumerate(sorted(TABLE.workloads)) for b in sorted(TABLE.workloads)[i + 1:]
              if PLANNER.measured.of((a, b), "timeslice") is None]


def _half(figure) -> float:
    return (figure.high - figure.low) / 2


def _without_host_term(monkeypatch) -> Planner:
    monkeypatch.setattr(predict, "HOST_SPREAD", 0.0)
    return Planner(TABLE, REFERENCE)


@pytest.mark.parametrize("sharing", ["timeslice", "mps"])
def test_the_host_term_only_ever_widens_the_interval_around_the_same_value(monkeypatch, sharing):
    with_host = {pair: PLANNER.efficiency(pair, sharing) for pair in UNMEASURED}
    without = _without_host_term(monkeypatch)
    for pair, figure in with_host.items():
        narrow = without.efficiency(pair, sharing)
        assert figure.value == narrow.value
        assert figure.low <= narrow.low + 1e-12 and figure.high >= narrow.high - 1e-12, pair


def test_a_pair_near_contention_widens_more_than_one_a_bound_pins(monkeypatch):
    """mrt_oast + resnet20 (busy 0.74 and 0.47: a busier host makes them collide) against mnist_ff +
    mnist_rnn (0.13 and 0.11: sharing for free on any host)."""
    busy, light = ("mrt_oast", "resnet20"), ("mnist_ff", "mnist_rnn")
    wide = {p: _half(PLANNER.efficiency(p, "timeslice")) for p in (busy, light)}
    without = _without_host_term(monkeypatch)
    narrow = {p: _half(without.efficiency(p, "timeslice")) for p in (busy, light)}
    assert wide[busy] - narrow[busy] > 0.05
    assert wide[light] - narrow[light] < 0.01


def test_a_measured_pair_keeps_its_measurement_and_interval(monkeypatch):
    measured = next(key for (key, sharing) in REFERENCE.pairs if sharing == "timeslice")
    assert PLANNER.efficiency(measured, "timeslice") == _without_host_term(monkeypatch).efficiency(measured, "timeslice")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(UNMEASURED), st.sampled_from(["timeslice", "mps"]))
def test_the_interval_stays_within_the_physical_range_and_holds_its_value(pair, sharing):
    figure = PLANNER.efficiency(pair, sharing)
    assert 0.0 <= figure.low <= figure.value <= figure.high <= 2.0


def test_the_host_shift_is_the_move_of_both_jobs_busier_or_idler_at_once():
    pair = ("resnet20", "word_lm")
    figure = PLANNER.efficiency(pair, "timeslice")
    factor = math.exp(predict.HOST_Z * predict.HOST_SPREAD)
    busy = {m: PLANNER.solo.get(m).busy for m in pair}
    moved = [PLANNER.efficiency_from_busy(pair, "timeslice", {m: min(1.0, b * f) for m, b in busy.items()}).value
             for f in (factor, 1 / factor)]
    assert PLANNER._host_shift(pair, "timeslice", PLANNER.solo, figure.value) == \
        pytest.approx(max(abs(v - figure.value) for v in moved))


def test_the_plan_says_what_the_interval_holds_for_the_host():
    basis = interval_basis(PLANNER)
    assert basis["host_spread"] == predict.HOST_SPREAD
    assert "busier or idler" in basis["host_term"]


def test_the_plans_text_says_what_its_intervals_hold_for_the_host(tmp_path, capsys):
    assert main(["plan", str(ROOT / "settings/planner_host.json"), "--card", "h200", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "where this host runs both jobs 28 % busier or 22 % idler than the profiles read them" in out
    assert "gpu-pairs profile on this host" in out


GROUPS = [("mnist", "resnet20", "resnet32"), ("densenet121", "pcb", "word_lm"), ("mnist_ff", "mnist_rnn", "siamese")]


@pytest.mark.parametrize("sharing", ["timeslice", "mps"])
@pytest.mark.parametrize("group", GROUPS)
def test_a_groups_interval_holds_one_host_term_for_all_its_jobs(monkeypatch, group, sharing):
    """One host moves every job of the group at once: the group takes the move of its own value, joined
    in quadrature to its pairs' learnt half-widths, not each pair's host term as if they were apart."""
    figure = PLANNER.group_efficiency(group, sharing, measured=False)
    moved = [PLANNER._group_value(group, sharing, predict._busier(PLANNER.here, group, f)) for f in predict._host_factors()]
    host = max(abs(v - figure.value) for v in moved)
    without = _without_host_term(monkeypatch).group_efficiency(group, sharing, measured=False)
    learnt = (without.high - without.low) / 2 if without.low > 0 and without.high < len(group) else None
    assert figure.value == without.value
    assert figure.low <= without.low + 1e-12 and figure.high >= without.high - 1e-12
    if learnt is not None and figure.low > 0 and figure.high < len(group):
        assert (figure.high - figure.low) / 2 == pytest.approx(math.hypot(learnt, host))
