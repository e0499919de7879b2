"""MPS's two numbers (the share of a kernel's stretch beside another's that costs time, and how much
busy time, each job's as it reads alone, the clients' kernels can fill together), learnt from a card's
measured MPS pairs as time-slicing's are, and used for pairs and groups."""
from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning import fit as learning
from pytest_gpu_pairs.planning import model
from pytest_gpu_pairs.planning.cards import card_named
from pytest_gpu_pairs.planning.measured import Measured, read_reference
from pytest_gpu_pairs.planning.predict import Planner, mps_basis
from pytest_gpu_pairs.planning.profiles import SoloProfile, read_packaged

from .test_cards import H200_REFERENCE

CARD = model.Card(idle_w=70.0, limit_w=700.0)
fraction = st.floats(0.0, 1.0, allow_nan=False)
share = st.floats(0.05, 1.0, allow_nan=False)
capacities = st.sampled_from(learning.MPS_CAPACITIES)
stretches = st.sampled_from(learning.MPS_STRETCHES)


def job(busy: float, sm: float, name: str = "a") -> SoloProfile:
    return SoloProfile(name, "cuda", 32, 0.01, busy, None, sm, None, None, 200.0, 2.0, 1000.0, 1000.0, None)


def efficiency(a: SoloProfile, b: SoloProfile, mps: model.Mps) -> float:
    return model.base(a, b, "mps", CARD, mps=mps).efficiency


jobs = st.builds(job, fraction, share)


@given(capacities, stretches, st.lists(st.tuples(jobs, jobs), min_size=learning.MIN_MPS_PAIRS, max_size=10))
def test_pairs_made_by_numbers_on_the_grid_are_fitted_without_error(capacity, stretch, pairs):
    measured = [(a, b, efficiency(a, b, model.Mps(capacity, stretch))) for a, b in pairs]
    fitted = learning.mps(measured, CARD)
    assert [efficiency(a, b, fitted) for a, b, _ in measured] == pytest.approx([m for *_, m in measured], abs=1e-6)


@given(st.lists(st.tuples(jobs, jobs, st.floats(0.5, 2.0)), max_size=learning.MIN_MPS_PAIRS - 1))
def test_too_few_measured_pairs_leave_the_physics_before_any_pair(pairs):
    assert learning.mps(pairs, CARD) == model.MPS_UNMEASURED == model.Mps(1.0, 1.0)


def _least_error_by_base(pairs) -> model.Mps:
    """The fit's definition, read off ``model.base`` at every point of the grid."""
    grid = [model.Mps(capacity, stretch) for stretch in learning.MPS_STRETCHES for capacity in learning.MPS_CAPACITIES]
    errors = [sum(abs(efficiency(a, b, mps) - m) / m for a, b, m in pairs) / len(pairs) for mps in grid]
    return grid[errors.index(min(errors))]


@given(st.lists(st.tuples(jobs, jobs, st.floats(0.5, 2.0)), min_size=learning.MIN_MPS_PAIRS, max_size=8))
def test_the_fit_chooses_what_the_base_model_at_every_grid_point_says_errs_least(pairs):
    assert learning.mps(pairs, CARD) == _least_error_by_base(pairs)


@given(st.lists(st.tuples(fraction, share), min_size=2, max_size=5), capacities)
def test_a_group_fills_the_card_at_most_to_its_capacity_under_mps_and_time_slicing_is_untouched(figures, capacity):
    profiles = [job(busy, sm, str(i)) for i, (busy, sm) in enumerate(figures)]
    rates = model.group_rates(profiles, "mps", CARD, mps=model.Mps(capacity))
    assert rates is not None and all(0.0 <= r <= 1.0 + 1e-9 for r in rates)
    alone = max(busy for busy, _ in figures)
    assert sum(r * busy for r, (busy, _) in zip(rates, figures)) <= max(capacity, alone) + 1e-9
    pair = model.base(profiles[0], profiles[1], "mps", CARD, mps=model.Mps(capacity))
    assert model.group_rates(profiles[:2], "mps", CARD, mps=model.Mps(capacity)) == pytest.approx([pair.rate_a, pair.rate_b])
    assert model.group_rates(profiles, "timeslice", CARD, mps=model.Mps(capacity)) == \
        model.group_rates(profiles, "timeslice", CARD)


def test_a_card_that_saturates_early_is_learnt_below_one_and_predicts_its_pairs_lower():
    """Two busy jobs, measured well below what their busy times leave room for."""
    heavy, saturated = job(0.6, 0.9), model.Mps(0.9, 0.0)
    pairs = [(heavy, job(busy, 0.5, "b"), efficiency(heavy, job(busy, 0.5, "b"), saturated)) for busy in (0.2, 0.4, 0.6, 0.8, 1.0)]
    learnt = learning.mps(pairs, CARD)
    assert learnt == saturated
    assert efficiency(heavy, job(0.8, 0.5, "b"), learnt) < efficiency(heavy, job(0.8, 0.5, "b"), model.Mps(1.0, 0.0))


@given(st.floats(0.1, 0.5), st.floats(0.3, 0.7), st.floats(0.8, 0.95), stretches.filter(bool))
def test_under_mps_the_job_whose_kernels_find_the_sms_taken_slows_more(busy, light_sm, heavy_sm, stretch):
    """Equally busy, the job with the smaller kernels waits behind the one that fills the card (resnet20
    beside vulberta_cnn on an H200: 0.58 of its pace against 0.91), where the cost of their excess
    shared alike would slow them alike (only where both pay the whole overlap do they stay alike, as
    time-slicing keeps them). Busy at most half the time, the two never ask for more than the card."""
    light, heavy, mps = job(busy, light_sm, "light"), job(busy, heavy_sm, "heavy"), model.Mps(1.0, stretch)
    pair = model.base(light, heavy, "mps", CARD, mps=mps)
    assert pair.rate_a <= pair.rate_b
    waits = model.collision_weight(light, heavy, "mps", CARD, mps=mps)
    if waits > model.collision_weight(heavy, light, "mps", CARD, mps=mps) + 1e-9:
        assert pair.rate_a < pair.rate_b
    sliced = model.base(light, heavy, "timeslice", CARD)
    assert sliced.rate_a == pytest.approx(sliced.rate_b)


@given(fraction, share, fraction, share, capacities)
def test_with_no_stretch_only_the_bandwidth_and_the_capacity_slow_mps_jobs(busy_a, sm_a, busy_b, sm_b, capacity):
    a, b = job(busy_a, sm_a), job(busy_b, sm_b, "b")
    pair = model.base(a, b, "mps", CARD, mps=model.Mps(capacity, 0.0))
    occupied = (busy_a, busy_b)
    assert pair.collision_weight == 0.0
    assert pair.rate_a * occupied[0] + pair.rate_b * occupied[1] <= max(capacity, *occupied) + 1e-9
    if sum(occupied) <= capacity:
        assert pair.efficiency == pytest.approx(2.0)


@given(fraction, share, fraction, share, stretches, stretches)
def test_more_of_the_stretch_never_makes_a_pair_faster(busy_a, sm_a, busy_b, sm_b, low, high):
    """Where the card's capacity does not bind: there, sharing it max-min fairly can hand a pair's
    slower job more of it than a lighter stretch would."""
    assume(busy_a + busy_b <= 1.0)
    a, b = job(busy_a, sm_a), job(busy_b, sm_b, "b")
    low, high = sorted((low, high))
    assert efficiency(a, b, model.Mps(1.0, high)) <= efficiency(a, b, model.Mps(1.0, low)) + 1e-9


@given(share, st.floats(0.05, 1.0), capacities)
def test_a_job_beside_one_that_asks_for_nothing_keeps_its_own_pace_whatever_the_capacity(sm, busy, capacity):
    """Alone (its partner never on the GPU) a job runs as it does alone, even when it occupies more
    of the card than the learnt capacity."""
    pair = model.base(job(busy, sm), job(0.0, 0.5, "b"), "mps", CARD, mps=model.Mps(capacity, 1.0))
    assert pair.rate_a == pytest.approx(1.0) and pair.efficiency == pytest.approx(2.0)


def test_a_planner_learns_it_from_its_cards_pairs_and_forgets_it_with_the_pairs():
    h200 = card_named("h200")
    planner = Planner(read_packaged(h200.profiles), read_reference(h200.reference).measured)
    learnt = mps_basis(planner)
    assert learnt["learnt"] and learnt["measured_pairs"] >= learning.MIN_MPS_PAIRS
    assert learnt["capacity"] in learning.MPS_CAPACITIES and learnt["stretch"] in learning.MPS_STRETCHES
    assert planner.without_workload("pcb").mps_count < planner.mps_count
    blind = Planner(planner.profiles, Measured())
    assert blind.mps == model.MPS_UNMEASURED and not mps_basis(blind)["learnt"]


def test_plan_validate_says_what_mps_numbers_it_learnt_and_the_noise_floor_in_text_and_json():
    """Read from the H200's committed validation, which test_cards holds to what ``plan-validate --card
    h200`` writes now, and whose lines are those it prints (test_validate compares the two on the H100;
    a run costs some 15 s of CPU)."""
    committed = H200_REFERENCE / "validation"
    printed = (committed / "validation.md").read_text().splitlines()
    summary = json.loads((committed / "summary.json").read_text())
    basis = summary["mps_base"]
    line = f"MPS's base model: a kernel's stretch beside another's costs {basis['stretch']:g} of it, both jobs' " \
           f"kernels fill at most {basis['capacity']:g} of the card's time, each counted as busy as it is alone " \
           f"(learnt from {basis['measured_pairs']} measured pairs)"
    assert line in printed
    floor = next(p for p in printed if p.startswith("measurement noise alone"))
    assert all(f"{summary['noise_floor'][m]['n_pairs']} pairs" in floor for m in ("timeslice", "mps"))
