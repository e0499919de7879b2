"""Seeds replicate a hyperparameter study: every run of a replicate, A's and B's, trains from that
seed; each case id names its replicate; a whole replicate comes before the next; a solo baseline
belongs to its own replicate; and seeds are refused where they cannot replicate anything."""
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import expand
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
