"""Time-slicing's two numbers (how much of a collision costs time, how full the card can be kept),
learnt from a card's measured pairs and used by the base model for pairs and groups."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning import fit as learning
from pytest_gpu_pairs.planning import model
from pytest_gpu_pairs.planning.cards import card_named
from pytest_gpu_pairs.planning.measured import Measured, read_reference
from pytest_gpu_pairs.planning.predict import Planner, timeslicing_basis
from pytest_gpu_pairs.planning.profiles import SoloProfile, read_packaged

CARD = model.Card(idle_w=70.0, limit_w=700.0)
busy = st.floats(0.0, 1.0, allow_nan=False)
on_the_grid = st.builds(model.TimeSlicing, st.sampled_from(learning.COLLISION_WEIGHTS), st.sampled_from(learning.CAPACITIES))


def job(busy_fraction: float, name: str = "a") -> SoloProfile:
    return SoloProfile(name, "cuda", 32, 0.01, busy_fraction, None, None, None, None, 200.0, 2.0, 1000.0, 1000.0, None)


def efficiency(a: float, b: float, timeslicing: model.TimeSlicing) -> float:
    return model.base(job(a), job(b, "b"), "timeslice", CARD, timeslicing).efficiency


@given(on_the_grid, st.lists(st.tuples(busy, busy), min_size=learning.MIN_TIMESLICED_PAIRS, max_size=12))
def test_pairs_made_by_numbers_on_the_grid_are_fitted_without_error(truth, busies):
    pairs = [(a, b, efficiency(a, b, truth)) for a, b in busies]
    fitted = learning.timeslicing(pairs)
    assert [efficiency(a, b, fitted) for a, b, _ in pairs] == pytest.approx([m for _, _, m in pairs], abs=1e-6)


@given(st.lists(st.tuples(busy, busy, st.floats(0.5, 2.0)), max_size=learning.MIN_TIMESLICED_PAIRS - 1))
def test_too_few_measured_pairs_leave_the_physics_before_any_pair(pairs):
    assert learning.timeslicing(pairs) == model.UNMEASURED == model.TimeSlicing(1.0, 1.0)


@given(st.lists(busy, min_size=2, max_size=5), on_the_grid)
def test_a_group_keeps_the_card_at_most_as_full_as_its_capacity_and_two_are_the_pair(fractions, timeslicing):
    jobs = [job(f, str(i)) for i, f in enumerate(fractions)]
    rates = model.group_rates(jobs, "timeslice", CARD, timeslicing)
    assert rates is not None and all(0.0 <= r <= 1.0 + 1e-9 for r in rates)
    assert sum(r * f for r, f in zip(rates, fractions)) <= timeslicing.capacity + 1e-9
    pair = model.base(jobs[0], jobs[1], "timeslice", CARD, timeslicing)
    assert model.group_rates(jobs[:2], "timeslice", CARD, timeslicing) == pytest.approx([pair.rate_a, pair.rate_b])


def test_a_planner_learns_them_from_its_cards_pairs_and_forgets_them_with_the_pairs():
    h200 = card_named("h200")
    planner = Planner(read_packaged(h200.profiles), read_reference(h200.reference).measured)
    learnt = timeslicing_basis(planner)
    assert learnt["learnt"] and learnt["measured_pairs"] >= learning.MIN_TIMESLICED_PAIRS
    assert learnt["collision_weight"] in learning.COLLISION_WEIGHTS and learnt["capacity"] in learning.CAPACITIES
    assert planner.without_workload("pcb").timesliced_count < planner.timesliced_count
    blind = Planner(planner.profiles, Measured())
    assert blind.timeslicing == model.UNMEASURED and not timeslicing_basis(blind)["learnt"]
