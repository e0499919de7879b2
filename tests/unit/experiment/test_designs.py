"""The hp_study design: 11 runs per pair, ids that select variants, each pair with its own solo cases."""
import re

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.helpers import REPO

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import expand
from pytest_gpu_pairs.experiment.load import load_experiment, parse_experiment
from pytest_gpu_pairs.inputs import SettingsError

ID = re.compile(r"^[A-Za-z0-9_.]+-[a-z0-9_]+\+[a-z0-9_]+-[a-z0-9_.]+-(concurrent|solo)$")
VARIANTS = ("default", "lr_min", "lr_max", "epochs_min", "epochs_max")
STUDY = REPO / "settings" / "concurrent_hp_study.json"
WITH_LR_AND_EPOCHS = sorted(n for n, w in BUILTINS.items() if {"learning_rate", "epochs"} <= set(w.hyperparameters))


def study(pairs, **top):
    return parse_experiment({"name": "s", "design": "hp_study", "pairs": pairs, **top}, "s.json")


def runs_of_pair(cases, group, varied_model, load_model):
    """The 11 runs of one pair: its concurrent cases, and its own solo cases of its jobs."""
    concurrent = [c for c in cases if c.group == group and c.mode == "concurrent"]
    jobs = {c.fg for c in concurrent} | {concurrent[0].bg}
    solos = [c for c in cases if c.group == group and c.mode == "solo" and c.fg in jobs]
    return concurrent, solos


def test_shipped_study_has_twelve_pairs_and_132_runs_each_pair_with_its_own_solo_cases():
    cases = expand(load_experiment(STUDY))
    experiment = load_experiment(STUDY)
    assert len(experiment.pairs) == 12
    for p in experiment.pairs:
        mine = [c for c in cases if c.group == p.group]
        assert sum(c.mode == "concurrent" for c in mine) == 5 and sum(c.mode == "solo" for c in mine) == 6
        assert {c.fg for c in mine if c.mode == "solo"} == {c.fg for c in mine} | {mine[-1].bg}
    assert len(cases) == 132
    assert len({c.fg for c in cases if c.mode == "solo"}) == 47  # jobs two pairs share: measured once per process
    assert len({c.id for c in cases}) == len(cases) and all(ID.match(c.id) for c in cases)


def test_study_ids_name_the_variant_and_each_shared_run_follows_its_solo_run():
    cases = expand(load_experiment(STUDY))
    ids = [c.id for c in cases if c.group == "hp01"]
    assert ids == ["hp01-mnist+none-default-solo",
                   "hp01-densenet121+none-default-solo", "hp01-densenet121+mnist-default-concurrent",
                   "hp01-densenet121+none-lr_min-solo", "hp01-densenet121+mnist-lr_min-concurrent",
                   "hp01-densenet121+none-lr_max-solo", "hp01-densenet121+mnist-lr_max-concurrent",
                   "hp01-densenet121+none-epochs_min-solo", "hp01-densenet121+mnist-epochs_min-concurrent",
                   "hp01-densenet121+none-epochs_max-solo", "hp01-densenet121+mnist-epochs_max-concurrent"]
    position = {c.id: i for i, c in enumerate(cases)}
    for case in cases:
        if case.mode == "concurrent":
            solo_positions = [position[s.id] for s in cases
                              if s.group == case.group and s.mode == "solo" and s.fg in (case.fg, case.bg)]
            assert len(solo_positions) == 2 and max(solo_positions) < position[case.id]


def test_variants_scale_the_default_by_the_issue_bounds_and_keep_the_rest():
    cases = {c.id: c for c in expand(load_experiment(STUDY))}
    default = cases["hp06-resnet20+mnist-default-concurrent"].fg.hyperparameters
    for variant, name, factor in (("lr_min", "learning_rate", 0.2), ("lr_max", "learning_rate", 5.0),
                                  ("epochs_min", "epochs", 0.5), ("epochs_max", "epochs", 1.5)):
        for mode, bg in (("concurrent", "mnist"), ("solo", "none")):
            job = cases[f"hp06-resnet20+{bg}-{variant}-{mode}"].fg.hyperparameters
            assert job == {**default, name: pytest.approx(default[name] * factor)}
        assert cases[f"hp06-resnet20+mnist-{variant}-concurrent"].bg.hyperparameters == BUILTINS["mnist"].defaults()


def test_half_of_a_one_epoch_default_is_half_an_epoch_for_a_builtin():
    cases = expand(study([{"group": "s1", "foreground": {"model": "mnist_ff", "hyperparameters": {"epochs": 1}},
                           "background": {"model": "mnist"}}]))
    epochs = {c.variant: c.fg.hyperparameters["epochs"] for c in cases if c.mode == "solo" and c.fg.model == "mnist_ff"}
    assert epochs == {"default": 1, "lr_min": 1, "lr_max": 1, "epochs_min": 0.5, "epochs_max": 1.5}


def test_an_int_hyperparameter_of_a_command_workload_is_rounded_and_at_least_one():
    workload = {"command": ["python", "t.py"], "hyperparameters": {
        "epochs": {"flag": "--epochs", "type": "int", "default": 1},
        "learning_rate": {"flag": "--lr", "type": "float", "default": 0.1}}}
    cases = expand(study([{"group": "s1", "foreground": {"model": "mine"}, "background": {"model": "mnist"}}],
                         workloads={"mine": workload}, vary={"epochs": [0.5, 2.5]}))
    epochs = {c.variant: c.fg.hyperparameters["epochs"] for c in cases if c.mode == "concurrent"}
    assert epochs == {"default": 1, "epochs_min": 1, "epochs_max": 3}


def test_a_pair_may_vary_other_hyperparameters():
    experiment = load_experiment(STUDY)
    bug = next(p for p in experiment.pairs if p.foreground.model == "bug_localization")
    cases = [c for c in expand(experiment) if c.group == bug.group and c.mode == "concurrent"]
    assert [c.variant for c in cases] == ["default", "max_iter_min", "max_iter_max", "alpha_min", "alpha_max"]


@pytest.mark.parametrize("top, pair_extra, where, expected", [
    ({}, {"vary": {"dropout": [0.5, 2]}}, "$.pairs[0].vary.dropout", "expected one of mnist_ff's hyperparameters"),
    ({"vary": {"learning_rate": [0, 5]}}, {}, "$.vary", "positive [min, max] factors"),
    ({}, {"mutate": ["epochs"]}, "$.pairs[0].mutate", "expected only with design 'mutation'"),
])
def test_bad_study_settings_are_one_line(top, pair_extra, where, expected):
    pair = {"group": "s1", "foreground": {"model": "mnist_ff"}, "background": {"model": "mnist"}, **pair_extra}
    with pytest.raises(SettingsError) as info:
        study([pair], **top)
    assert f"s.json: {where}" in str(info.value) and expected in str(info.value)


def test_study_keys_are_refused_in_a_pairs_design():
    with pytest.raises(SettingsError, match=r"\$\.pairs\[0\]\.vary: expected only with design 'hp_study'"):
        parse_experiment({"name": "x", "pairs": [{"group": "g", "foreground": {"model": "mnist"},
                                                   "background": {"model": "mnist"}, "vary": {"epochs": [1, 2]}}]},
                         "s.json")


@hsettings(max_examples=60, deadline=None)
@given(models=st.lists(st.tuples(st.sampled_from(WITH_LR_AND_EPOCHS), st.sampled_from(sorted(BUILTINS))),
                       min_size=1, max_size=6),
       epochs=st.lists(st.one_of(st.integers(1, 300), st.floats(0.1, 50)), min_size=6, max_size=6))
def test_the_design_always_gives_eleven_runs_per_pair(models, epochs):
    pairs = [{"group": f"p{i}", "foreground": {"model": fg, "hyperparameters": {"epochs": e}}, "background": {"model": bg}}
             for i, ((fg, bg), e) in enumerate(zip(models, epochs))]
    cases = expand(study(pairs))
    for i, (fg, bg) in enumerate(models):
        concurrent, solos = runs_of_pair(cases, f"p{i}", fg, bg)
        assert [c.variant for c in concurrent] == list(VARIANTS)
        varied_jobs, load = {c.fg for c in concurrent}, concurrent[0].bg
        assert len(varied_jobs) == 5 and {s.fg for s in solos} == varied_jobs | {load}
        assert len(solos) == 6 or load in varied_jobs  # A and B the very same job: one solo run is both
        assert concurrent[0].bg.model == bg and all(c.fg.model == fg for c in concurrent)
    assert len({c.id for c in cases}) == len(cases)
    assert len({(c.group, c.fg) for c in cases if c.mode == "solo"}) == sum(c.mode == "solo" for c in cases)


def varied_pair(model, hyperparameters=None, vary=None):
    pair = {"group": "s1", "foreground": {"model": model, "hyperparameters": hyperparameters or {}},
            "background": {"model": "mnist"}}
    return {**pair, "vary": vary} if vary else pair


@pytest.mark.parametrize("pair, workloads, expected", [
    (varied_pair("densenet121", vary={"dropout": [0.5, 2]}), {},
     "dropout 0.5 x 2 = 1.0 for pair s1: expected a value in [0, 0.99] for densenet121's dropout, got 1.0"),
    (varied_pair("mnist", {"learning_rate": 100}, vary={"learning_rate": [0.5, 1000]}), {},
     "learning_rate 100 x 1000 = 100000 for pair s1: expected a value in (0, 100] for mnist's learning_rate, "
     "got 100000"),
    (varied_pair("mine", vary={"scale": [0.5, 1000]}),
     {"mine": {"command": ["python", "t.py"], "hyperparameters": {"scale": {"type": "float", "default": 1e306}}}},
     "scale 1e+306 x 1000 = inf for pair s1: expected a finite number, got inf"),
], ids=["dropout 1.0", "a learning rate of 1e5", "Infinity"])
def test_a_scaled_value_the_settings_could_not_have_written_is_one_line(pair, workloads, expected):
    with pytest.raises(SettingsError) as info:
        expand(study([pair], workloads=workloads))
    assert str(info.value) == f"s.json: $.pairs[0].vary.{next(iter(pair['vary']))}: {expected}; choose factors " \
                              "that keep the value valid"


def test_a_huge_integer_default_is_one_line_at_collection(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"name": "s", "design": "hp_study", "workloads": {"mine": {"command": ["python", "t.py"], '
                    '"hyperparameters": {"epochs": {"type": "int", "default": ' + "9" * 400 + '}}}}, '
                    '"pairs": [{"group": "s1", "foreground": {"model": "mine"}, "background": {"model": "mnist"}, '
                    '"vary": {"epochs": [0.5, 2]}}]}')
    with pytest.raises(SettingsError, match=r"\$\.workloads\.mine\.hyperparameters\.epochs\.default: expected a "
                                            r"finite number, got an integer of 400 digits$"):
        load_experiment(path)
    pair = varied_pair("mine", vary={"epochs": [0.5, 2]})
    workload = {"command": ["python", "t.py"], "hyperparameters": {"epochs": {"type": "int", "default": 10**400}}}
    with pytest.raises(SettingsError, match=r"\$\.workloads\.mine\.hyperparameters\.epochs\.default: expected a "
                                            r"finite number .*got an integer of 401 digits"):
        study([pair], workloads={"mine": workload})
