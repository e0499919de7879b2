import re

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import REPO, pair

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import DuplicateCaseError, Overrides, expand, expand_all, unavailable_reason
from pytest_gpu_pairs.experiment.load import load_experiment, parse_experiment

ID = re.compile(r"^[A-Za-z0-9_.]+-[a-z0-9_]+\+[a-z0-9_]+-[a-z0-9_.]+-(concurrent|solo)$")


def test_feasibility_ids_follow_the_contract():
    cases = expand(load_experiment(REPO / "settings" / "parallel_feasibility_test.json"))
    assert cases[0].id == "g01-mnist_ff+resnet20-default-concurrent"
    assert all(ID.match(c.id) for c in cases)
    assert len({c.id for c in cases}) == 12


def test_ids_are_stable_across_loads():
    path = REPO / "settings" / "parallel_feasibility_test.json"
    assert [c.id for c in expand(load_experiment(path))] == [c.id for c in expand(load_experiment(path))]


def test_effective_hyperparameters_merge_workload_defaults():
    case = expand(parse_experiment({"name": "x", "pairs": [pair(fg_hp={"epochs": 2})]}, "s.json"))[0]
    assert case.fg.hyperparameters == {**BUILTINS["mnist_ff"].defaults(), "epochs": 2}


def test_duplicate_ids_across_files_are_refused():
    first = parse_experiment({"name": "a", "pairs": [pair()]}, "a.json")
    second = parse_experiment({"name": "b", "pairs": [pair()]}, "b.json")
    with pytest.raises(DuplicateCaseError, match="b.json: case id 'g01-mnist_ff\\+resnet20-default-concurrent' also comes from a.json"):
        expand_all([first, second])


def test_unimplemented_builtins_are_reported_not_failed():
    case = expand(parse_experiment({"name": "x", "pairs": [pair(bg="word_lm")]}, "s.json"))[0]
    reason = unavailable_reason(case)
    assert reason is None if BUILTINS["word_lm"].implemented else "word_lm" in reason


@hsettings(max_examples=200, deadline=None)
@given(default=st.floats(0, 5), per_pair=st.none() | st.floats(0, 5), cli=st.none() | st.floats(0, 5),
       budget_default=st.floats(1, 1e5), budget_pair=st.none() | st.floats(1, 1e5), budget_cli=st.none() | st.floats(1, 1e5))
def test_command_line_beats_pair_beats_defaults(default, per_pair, cli, budget_default, budget_pair, budget_cli):
    extra = {k: v for k, v in (("min_efficiency", per_pair), ("vram_budget_mb", budget_pair)) if v is not None}
    experiment = parse_experiment({"name": "x", "defaults": {"min_efficiency": default, "vram_budget_mb": budget_default},
                                   "pairs": [pair(**extra)]}, "s.json")
    case = expand(experiment, Overrides(vram_budget_mb=budget_cli, min_efficiency=cli))[0]
    assert case.min_efficiency == next(v for v in (cli, per_pair, default) if v is not None)
    assert case.vram_budget_mb == next(v for v in (budget_cli, budget_pair, budget_default) if v is not None)


@hsettings(max_examples=100, deadline=None)
@given(groups=st.lists(st.from_regex(r"[A-Za-z0-9_]{1,6}", fullmatch=True), min_size=1, max_size=8, unique=True),
       models=st.lists(st.tuples(st.sampled_from(sorted(BUILTINS)), st.sampled_from(sorted(BUILTINS))), min_size=8, max_size=8))
def test_one_case_per_pair_with_unique_ids_that_name_both_models(groups, models):
    pairs = [{"group": g, "foreground": {"model": fg}, "background": {"model": bg}} for g, (fg, bg) in zip(groups, models)]
    cases = expand(parse_experiment({"name": "x", "pairs": pairs}, "s.json"))
    assert len(cases) == len(pairs) == len({c.id for c in cases})
    for case, (fg, bg) in zip(cases, models):
        assert ID.match(case.id) and f"-{fg}+{bg}-" in case.id
