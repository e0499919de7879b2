"""How the card's capacity is shared when jobs ask for more than it holds: max-min fairly, so a job
asking less than a fair share keeps its pace and the busier jobs split what is left."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning import model

demand = st.floats(0.0, 1.0, allow_nan=False)
capacity = st.floats(0.3, 1.0, allow_nan=False)


def shares(demands: list[float], card: float) -> list[float]:
    rates = model.within_capacity([1.0] * len(demands), demands, card)
    return [r * d for r, d in zip(rates, demands)]


@given(st.lists(demand, min_size=1, max_size=6), capacity)
def test_what_fits_keeps_its_pace_and_what_does_not_fills_the_card_exactly(demands, card):
    got = shares(demands, card)
    if sum(demands) <= card:
        assert got == pytest.approx(demands)
    else:
        assert sum(got) == pytest.approx(card)


@given(st.lists(demand, min_size=2, max_size=6), capacity)
def test_no_job_gains_pace_and_one_asking_more_never_gets_less(demands, card):
    got = shares(demands, card)
    assert all(g <= d + 1e-12 for g, d in zip(got, demands))
    for (d_i, g_i) in zip(demands, got):
        for (d_j, g_j) in zip(demands, got):
            if d_i >= d_j:
                assert g_i >= g_j - 1e-9


@given(st.lists(demand, min_size=2, max_size=6), capacity)
def test_a_job_asking_at_most_a_fair_share_keeps_all_it_asks(demands, card):
    fair = card / len(demands)
    got = shares(demands, card)
    assert all(g == pytest.approx(d) for g, d in zip(got, demands) if d <= fair)


def test_a_light_job_beside_two_that_fill_the_card_keeps_its_pace():
    rates = model.within_capacity([1.0, 1.0, 1.0], [0.1, 0.8, 0.8], 0.9)
    assert rates[0] == 1.0 and rates[1] == rates[2] == pytest.approx(0.4 / 0.8)
