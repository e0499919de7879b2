"""The hand-out order of xdist workers: longest first, and an hp_study replicate of one pair kept
together in its settings order, so the worker that takes it measures the solo baselines before the
concurrent runs that are compared with them."""
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import dependency_group, expand
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.plugin.xdist import handout_rank

PAIRS = [{"group": "hp01", "foreground": {"model": "densenet121"}, "background": {"model": "mnist"}},
         {"group": "hp02", "foreground": {"model": "mrt_oast"}, "background": {"model": "mnist"}}]


def _cases(design="hp_study", seeds=(1, 2)):
    data = {"name": "t", "design": design, "pairs": PAIRS}
    if design == "hp_study":
        data["seeds"] = list(seeds)
    return expand(parse_experiment(data, "s.json"))


def _order(cases, cost):
    rank = handout_rank(cases, cost)
    return [c for _, c in sorted(enumerate(cases), key=lambda pair: (*rank[pair[1].id], pair[0]))]


def test_each_replicate_of_a_pair_is_one_group():
    cases = _cases(seeds=(1, 2))
    groups = {dependency_group(c) for c in cases}
    assert groups == {"hp01-s1", "hp02-s1", "hp01-s2", "hp02-s2"}
    assert all(dependency_group(c) is None for c in _cases(design="pairs"))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_group_stays_together_in_settings_order_and_groups_go_longest_first(data):
    cases = _cases()
    cost = {c.id: data.draw(st.floats(0.0, 1000.0), label=c.id) for c in cases}
    ordered = _order(cases, cost)
    names = [dependency_group(c) for c in ordered]
    seen: list[str] = []
    for name in names:
        if not seen or seen[-1] != name:
            assert name not in seen, f"group {name} split"
            seen.append(name)
    position = {c.id: i for i, c in enumerate(cases)}
    for name in seen:
        members = [position[c.id] for c in ordered if dependency_group(c) == name]
        assert members == sorted(members)  # the solo baselines before the runs compared with them
    totals = [sum(cost[c.id] for c in cases if dependency_group(c) == name) for name in seen]
    assert totals == sorted(totals, reverse=True)


def test_cases_without_a_group_go_longest_first():
    cases = _cases(design="pairs")
    cost = {c.id: float(i) for i, c in enumerate(cases)}
    assert [c.id for c in _order(cases, cost)] == [c.id for c in reversed(cases)]
