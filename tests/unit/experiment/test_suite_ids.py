"""The project's suite owns its case ids: another experiment's case that would take one is named
after its experiment as well; everything else keeps its id."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import expand, expand_all, sharing_modes, with_sharing
from pytest_gpu_pairs.experiment.load import parse_experiment

GROUPS = st.lists(st.sampled_from(["g01", "g02", "g03", "x01", "x02"]), min_size=1, max_size=4, unique=True)


def experiment(name: str, groups: list[str]):
    return parse_experiment({"name": name, "pairs": [{"group": g, "foreground": {"model": "mnist_ff"},
                                                      "background": {"model": "resnet20"}} for g in groups]},
                            f"{name}.json")


def owned_by(suite) -> dict[str, str]:
    return {case.id: suite.name for case in with_sharing(expand(suite), sharing_modes(suite))}


@given(GROUPS, GROUPS)
def test_an_experiment_never_takes_a_suite_id_and_keeps_every_other(suite_groups, own_groups):
    suite, mine = experiment("parallel_feasibility_test", suite_groups), experiment("my_experiment", own_groups)
    owned = owned_by(suite)
    suite_cases = expand_all([suite], owned=owned)
    assert [c.id for c in suite_cases] == list(owned)  # the suite keeps its ids
    for case in expand_all([mine], owned=owned):
        plain = case.id.removeprefix("my_experiment.")
        assert case.id not in owned
        assert (case.id != plain) == (plain in owned)
        assert plain.startswith(case.group + "-")  # -k g01 still finds it by its group


def test_both_in_one_session_are_two_cases_not_a_duplicate():
    suite, mine = experiment("parallel_feasibility_test", ["g01"]), experiment("my_experiment", ["g01"])
    ids = [c.id for c in expand_all([suite, mine], owned=owned_by(suite))]
    assert ids == ["g01-mnist_ff+resnet20-default-concurrent", "my_experiment.g01-mnist_ff+resnet20-default-concurrent"]


def test_without_a_suite_every_id_is_as_it_was():
    mine = experiment("my_experiment", ["g01"])
    assert [c.id for c in expand_all([mine])] == ["g01-mnist_ff+resnet20-default-concurrent"]
