"""Longest-first scheduling: shards partition any selection exactly and the same way every time,
baselines are charged once per bin, and the prediction's figures add up."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning.schedule import CaseCost, parse_shard, predict, schedule, shard_ids

solo_keys = st.sampled_from(["mnist", "resnet20", "densenet121", "vulberta"])
costs_strategy = st.lists(
    st.builds(CaseCost, case_id=st.text("abcdefgh0123-", min_size=1, max_size=8),
              rounds_s=st.floats(0, 5000, allow_nan=False),
              solos=st.lists(st.tuples(solo_keys, st.floats(0, 500, allow_nan=False)), max_size=2,
                             unique_by=lambda s: s[0]).map(tuple)),
    max_size=40, unique_by=lambda c: c.case_id)


@given(costs_strategy, st.integers(1, 9))
def test_shards_partition_every_selection_exactly_and_keep_its_order(costs, count):
    shards = [shard_ids(costs, k, count) for k in range(1, count + 1)]
    every = [case_id for shard in shards for case_id in shard]
    assert sorted(every) == sorted(c.case_id for c in costs)
    order = [c.case_id for c in costs]
    for shard in shards:
        assert shard == sorted(shard, key=order.index)


@given(costs_strategy, st.integers(1, 6), st.randoms())
def test_the_split_does_not_depend_on_the_order_the_cases_came_in(costs, count, rnd):
    shuffled = list(costs)
    rnd.shuffle(shuffled)
    for k in range(1, count + 1):
        assert set(shard_ids(costs, k, count)) == set(shard_ids(shuffled, k, count))


@given(costs_strategy, st.integers(1, 8))
def test_no_gpu_finishes_later_than_the_mean_load_plus_the_longest_case(costs, gpus):
    """Graham's bound of list scheduling: makespan <= total/G + (1 - 1/G) x longest case (here
    without shared baselines, where the loads are exact), so no GPU is left with a pile of cases."""
    plain = [CaseCost(c.case_id, c.rounds_s) for c in costs]
    result = predict(plain, gpus)
    longest = max((c.rounds_s for c in plain), default=0.0)
    bound = sum(c.rounds_s for c in plain) / gpus + (1 - 1 / gpus) * longest
    assert result.makespan_s <= bound * (1 + 1e-9) + 1e-6


@given(costs_strategy, st.integers(1, 8))
def test_the_prediction_adds_up(costs, gpus):
    result = predict(costs, gpus)
    assert len(result.loads_s) == gpus and result.makespan_s == max(result.loads_s)
    assert result.idle_s == pytest.approx(sum(result.makespan_s - load for load in result.loads_s), abs=1e-6)
    assert result.gpu_hours == pytest.approx(gpus * result.makespan_s / 3600)
    assert sorted(i for b in result.bins for i in b) == sorted(c.case_id for c in costs)


def test_a_baseline_is_charged_once_per_gpu_that_needs_it():
    costs = [CaseCost("a", 100, (("mnist", 30),)), CaseCost("b", 100, (("mnist", 30),)),
             CaseCost("c", 100, (("mnist", 30),))]
    one = predict(costs, 1)
    assert one.makespan_s == 330  # measured once, shared by all three
    two = predict(costs, 2)
    assert sorted(two.loads_s) == [130, 230]  # measured again on the second GPU


def test_the_longest_case_goes_first_onto_the_emptiest_gpu():
    costs = [CaseCost(name, seconds) for name, seconds in [("a", 10), ("b", 70), ("c", 40), ("d", 30)]]
    assert [b.case_ids for b in schedule(costs, 2)] == [["b", "a"], ["c", "d"]]  # c+d ties b: a to the lowest GPU


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", "-1/2", "1/2/3", "1/30000000", "1/10001",
                                  "1/" + "9" * 5000, "\u00b2/\u00b3", "1/\u0663"])
def test_a_bad_shard_is_refused_naming_what_was_expected(text):
    with pytest.raises(ValueError, match="expected K/N"):
        parse_shard(text)


def test_the_largest_shard_count_is_accepted():
    assert parse_shard("10000/10000") == (10000, 10000)


def _suite_cases():
    from support.helpers import REPO

    from pytest_gpu_pairs.experiment.cases import expand_all
    from pytest_gpu_pairs.experiment.load import load_experiment

    return expand_all([load_experiment(REPO / "settings" / name)
                       for name in ("parallel_feasibility_test.json", "slice_pairs.json", "hp_study_quick.json")])


SUITE_CASES = _suite_cases()


@given(st.lists(st.sampled_from(range(len(SUITE_CASES))), unique=True, max_size=len(SUITE_CASES)),
       st.integers(1, 5), st.sampled_from(["cuda", "cpu"]))
def test_shards_of_real_selections_partition_them(indices, count, device):
    """Random selections of the suite's own cases, costed by the estimator as the plugin costs them."""
    from pathlib import Path

    from pytest_gpu_pairs.planning.estimate import Earlier, case_costs
    from pytest_gpu_pairs.run.options import GpuPairsOptions

    options = GpuPairsOptions(settings=(), device=device, scale=1.0, vram_budget_mb=None, min_efficiency=None,
                              sample_hz=10.0, out_dir=Path("/nonexistent-results"))
    selected = [SUITE_CASES[i] for i in indices]
    costs = case_costs(selected, options, device, Earlier())
    shards = [shard_ids(costs, k, count) for k in range(1, count + 1)]
    assert sorted(i for shard in shards for i in shard) == sorted(c.id for c in selected)
    assert all(len(set(shard)) == len(shard) for shard in shards)
