"""Seeds replicate a hyperparameter study: every run of a replicate, A's and B's, trains from that
seed; each case id names its replicate; a whole replicate comes before the next; a solo baseline
belongs to its own replicate; and seeds are refused where they cannot replicate anything."""
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import dependency_group, expand
from pytest_gpu_pairs.experiment.load import SettingsError, parse_experiment

PAIRS = [{"group": "hp01", "foreground": {"model": "densenet121"}, "background": {"model": "mnist"}},
         {"group": "hp02", "foreground": {"model": "mrt_oast"}, "background": {"model": "mnist"}}]


def _study(seeds, design="hp_study", pairs=PAIRS, **top):
    return parse_experiment({"name": "t", "design": design, "seeds": seeds, "pairs": pairs, **top}, "s.json")


@given(st.lists(st.integers(0, 9999), min_size=1, max_size=4, unique=True))
def test_every_replicate_holds_the_whole_study_at_its_own_seed(seeds):
    cases = expand(_study(seeds))
    unseeded = expand(parse_experiment({"name": "t", "design": "hp_study", "pairs": PAIRS}, "s.json"))
    assert len(cases) == len(seeds) * len(unseeded)
    for position, seed in enumerate(seeds):
        replicate = cases[position * len(unseeded):(position + 1) * len(unseeded)]
        assert [c.id for c in replicate] == [c.id.replace(f"-{c.variant}-", f"-{c.variant}_s{seed}-")
                                             for c in unseeded]
        assert all(dict(job.hparams)["seed"] == seed for c in replicate for job in c.jobs)
    assert len({c.id for c in cases}) == len(cases)


def test_a_concurrent_run_finds_the_solo_baseline_of_its_own_replicate():
    cases = expand(_study([3, 4]))
    solos = {c.fg for c in cases if c.mode == "solo"}
    for case in cases:
        if case.mode == "concurrent":
            assert case.fg in solos and case.bg in solos


@pytest.mark.parametrize("top, path, words", [
    ({"seeds": [1, 1]}, "$.seeds", "each seed once"),
    ({"seeds": []}, "$.seeds", ""),
    ({"seeds": [-1]}, "$.seeds[0]", ""),
    ({"seeds": [1], "design": "pairs"}, "$", "seeds replicate the hp_study"),
])
def test_seeds_that_cannot_replicate_a_study_are_refused_in_one_line(top, path, words):
    data = {"name": "t", "design": "hp_study", "pairs": PAIRS, **top}
    with pytest.raises(SettingsError) as caught:
        parse_experiment(data, "s.json")
    line = str(caught.value)
    assert line.startswith(f"s.json: {path}:") and words in line and "\n" not in line


def test_a_workload_without_a_seed_hyperparameter_cannot_be_replicated_by_seed():
    workload = {"command": [sys.executable, "train.py"], "hyperparameters": {"lr": {"type": "float", "flag": "--lr"}}}
    pairs = [{"group": "c1", "foreground": {"model": "mine", "hyperparameters": {"lr": 0.1}},
              "background": {"model": "mnist"}}]
    study = _study([1], pairs=pairs, workloads={"mine": workload}, vary={"lr": [0.5, 2.0]})
    with pytest.raises(SettingsError, match=r"\$\.seeds: expected every job of the study to take a 'seed' "
                                            r"hyperparameter; mine \(pair c1\) has none"):
        expand(study)


@given(st.lists(st.integers(0, 9999), min_size=1, max_size=3, unique=True))
def test_a_pair_split_by_factor_measures_each_block_with_its_own_solo_runs(seeds):
    split = [{**PAIRS[0], "split_by_factor": True}, PAIRS[1]]
    cases = expand(_study(seeds, pairs=split, vary={"learning_rate": [0.2, 5.0], "epochs": [0.5, 1.5]}))
    blocked = [c for c in cases if c.group == "hp01"]
    assert len(blocked) == len(seeds) * 2 * 7  # per factor: A and B's three levels alone, B's three beside A
    groups: dict = {}
    for case in blocked:
        groups.setdefault(dependency_group(case), []).append(case)
    assert sorted(groups) == sorted(f"hp01-s{seed}-{block}" for seed in seeds for block in ("lr", "epochs"))
    for name, members in groups.items():
        seed, block = int(name.split("-")[1][1:]), name.split("-")[2]
        assert {c.block for c in members} == {block}
        assert all(dict(job.hparams)["seed"] == seed for c in members for job in c.jobs)
        solos = {c.fg for c in members if c.mode == "solo"}
        shared = [c for c in members if c.mode == "concurrent"]
        assert len(shared) == 3 and all(c.fg in solos and c.bg in solos for c in shared)
        assert sorted(c.variant for c in shared) == sorted(
            f"{v}_s{seed}" for v in (f"default_{block}", f"{block}_min", f"{block}_max"))
        positions = [cases.index(c) for c in members]
        assert positions == list(range(positions[0], positions[0] + 7))  # a block runs whole
        assert [c.mode for c in members] == ["solo"] + ["solo", "concurrent"] * 3  # A alone, then B alone and shared
        for solo, shared in zip(members[1::2], members[2::2]):
            assert solo.fg == shared.fg  # each shared run right after its solo run
        assert all(job.scope == name for c in members for job in c.jobs)  # measured alone in the block itself
    assert all(c.block == "" and dependency_group(c) == f"hp02-s{c.variant.rsplit('_s', 1)[1]}"
               for c in cases if c.group == "hp02")


def test_split_by_factor_is_refused_outside_the_hp_study_design():
    pairs = [{**PAIRS[0], "split_by_factor": True}]
    with pytest.raises(SettingsError) as caught:
        parse_experiment({"name": "t", "pairs": pairs}, "s.json")
    assert str(caught.value).startswith("s.json: $.pairs[0].split_by_factor: expected only with design 'hp_study'")


@pytest.mark.parametrize("kept, method", [(True, None), (False, None), (True, "interleaved")])
def test_a_kept_running_background_is_compared_with_its_solo_run_of_several_runs_in_one_process(kept, method):
    from pytest_gpu_pairs.experiment.cases import KEPT_SOLO_RUNS, Overrides, describe

    cases = expand(_study([1], defaults={"keep_background": kept}), Overrides(method=method))
    shared = [c for c in cases if c.mode == "concurrent"]
    solo_a = {c.group: c for c in cases if c.mode == "solo" and c.fg.model == "mnist"}
    runs = KEPT_SOLO_RUNS if kept and method is None else 1
    assert {c.bg.runs for c in shared} == {runs} and {c.fg.runs for c in shared} == {1}
    for case in shared:
        assert solo_a[case.group].fg == case.bg  # A's solo case is the baseline its shared runs are compared with
    assert all(describe(c).get("fg_runs") == (runs if c in solo_a.values() and runs > 1 else None)
               for c in cases if c.mode == "solo")
