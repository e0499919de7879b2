"""The mutation design: the predecessor's sampling rules, reproducible ids, and no configuration run twice."""
import json
import math
import random
import warnings
from dataclasses import dataclass
from typing import Optional

import pytest
from hypothesis import assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.compat.raw_data import seed_row_run
from pytest_gpu_pairs.experiment import mutation
from pytest_gpu_pairs.experiment.cases import Overrides, expand
from pytest_gpu_pairs.experiment.history import GpuPairsWarning, History, load_history
from pytest_gpu_pairs.experiment.load import load_experiment, parse_experiment
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.record.store import complete_records


@dataclass
class Spec:
    type: str
    range: tuple
    distribution: Optional[str]
    zero_probability: float = 0.0


ranges = st.tuples(st.floats(1e-6, 1e3), st.floats(1.0, 1e3)).map(lambda r: (r[0], r[0] * r[1]))
specs = st.builds(Spec, type=st.sampled_from(["int", "float"]), range=ranges,
                  distribution=st.sampled_from([None, "uniform", "log_uniform"]),
                  zero_probability=st.sampled_from([0.0, 0.0, 0.3, 1.0]))


@hsettings(max_examples=300, deadline=None)
@given(spec=specs, seed=st.integers(0, 2**32))
def test_a_sample_stays_inside_its_range_or_is_zero(spec, seed):
    if spec.type == "int":
        assume(math.ceil(spec.range[0]) <= math.floor(spec.range[1]))
    value = mutation.sample_value(spec, random.Random(seed))
    if spec.zero_probability == 1.0 or value == 0 and spec.zero_probability > 0:
        assert value == 0
        return
    assert spec.range[0] <= value <= spec.range[1]
    assert isinstance(value, int) is (spec.type == "int")


@hsettings(max_examples=25, deadline=None)
@given(low=st.floats(1e-5, 10.0), ratio=st.floats(50.0, 1e4), seed=st.integers(0, 2**32))
def test_samples_follow_their_distribution(low, ratio, seed):
    """Half of a uniform sample lies under the arithmetic middle, half of a log-uniform one under the
    geometric middle (a binomial with n=2000: 0.5 +- 0.05 is over four standard deviations)."""
    high = low * ratio
    rng = random.Random(seed)
    uniform = [mutation.sample_value(Spec("float", (low, high), "uniform"), rng) for _ in range(2000)]
    log_uniform = [mutation.sample_value(Spec("float", (low, high), "log_uniform"), rng) for _ in range(2000)]
    assert abs(sum(v < (low + high) / 2 for v in uniform) / 2000 - 0.5) < 0.05
    assert abs(sum(v < math.sqrt(low * high) for v in log_uniform) / 2000 - 0.5) < 0.05


def test_zero_probability_is_honoured():
    rng = random.Random(7)
    values = [mutation.sample_value(Spec("float", (1e-5, 1e-3), "log_uniform", 0.3), rng) for _ in range(4000)]
    assert abs(sum(v == 0 for v in values) / 4000 - 0.3) < 0.03


def test_keys_normalise_like_the_seed():
    assert mutation.run_key("m", {"epochs": 10, "lr": 0.0100000001}, "solo") == \
        mutation.run_key("m", {"epochs": 10.0, "lr": 0.01}, "solo")
    assert mutation.run_key("m", {"lr": 0.01}, "solo") != mutation.run_key("m", {"lr": 0.01}, "concurrent")
    assert mutation.run_key("m", {"lr": 0.01}, "solo") != mutation.run_key("n", {"lr": 0.01}, "solo")


WORKLOAD = {"command": ["python", "t.py"], "hyperparameters": {
    "k": {"flag": "--k", "type": "int", "default": 1, "range": [1, 6], "distribution": "uniform"},
    "lr": {"flag": "--lr", "type": "float", "default": 0.1, "range": [0.01, 1.0], "distribution": "log_uniform"}}}


def mutation_experiment(pairs, **top):
    return parse_experiment({"name": "m", "design": "mutation", "workloads": {"mine": WORKLOAD}, "pairs": pairs, **top},
                            "m.json")


def mutated_pair(group="g1", mutate=("k",), mutations=3, bg="mnist"):
    return {"group": group, "foreground": {"model": "mine"}, "background": {"model": bg},
            "mutate": list(mutate), "mutations": mutations}


def keys(cases):
    return [mutation.run_key(c.fg.model, c.fg.hyperparameters, c.mode) for c in cases]


def write_result(out, case_id, model, hparams, mode="concurrent"):
    folder = out / case_id
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"complete": True, "case_id": case_id, "fg_model": model,
                                                    "fg_hparams": hparams, "mode": mode}))


@hsettings(max_examples=80, deadline=None)
@given(ran=st.lists(st.integers(1, 6), max_size=6, unique=True), counts=st.lists(st.integers(1, 4), min_size=2, max_size=3),
       seed=st.integers(0, 10**6))
def test_dedup_never_repeats_a_key(tmp_path_factory, ran, counts, seed):
    out = tmp_path_factory.mktemp("out")
    for k in ran:
        write_result(out, f"old-{k}", "mine", {"k": k, "lr": 0.1})
    experiment = mutation_experiment([mutated_pair(f"g{i}", mutations=n) for i, n in enumerate(counts)],
                                     mutation={"seed": seed})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpuPairsWarning)
        cases = expand(experiment, Overrides(earlier_runs=lambda: complete_records(out)))
    found = keys(cases)
    assert len(found) == len(set(found))
    assert not {mutation.run_key("mine", {"k": k, "lr": 0.1}, "concurrent") for k in ran} & set(found)
    assert len(found) == min(sum(counts), 6 - len(ran))


def test_the_same_file_gives_the_same_cases_and_ids():
    pairs = [mutated_pair("g1", ("k", "lr"), 3), mutated_pair("g2", ("lr",), 2)]
    first, second = expand(mutation_experiment(pairs)), expand(mutation_experiment(pairs))
    assert [c.id for c in first] == [c.id for c in second]
    assert [c.fg for c in first] == [c.fg for c in second]
    assert first[0].id.startswith("g1-mine+mnist-k_lr_") and first[3].id.startswith("g2-mine+mnist-lr_")


def test_own_earlier_results_keep_the_ids_and_others_move_the_sample(tmp_path):
    experiment = mutation_experiment([mutated_pair("g1", ("lr",), 2)])
    own, other = tmp_path / "own", tmp_path / "other"
    cases = expand(experiment, Overrides(earlier_runs=lambda: complete_records(own)))
    for case in cases:
        write_result(own, case.id, "mine", case.fg.hyperparameters)
    again = expand(experiment, Overrides(earlier_runs=lambda: complete_records(own)))
    assert [c.id for c in again] == [c.id for c in cases]
    write_result(other, "another-experiment-case", "mine", cases[0].fg.hyperparameters)
    moved = expand(experiment, Overrides(earlier_runs=lambda: complete_records(other)))
    assert cases[0].id not in [c.id for c in moved] and moved[0].id == cases[1].id


def test_too_small_a_space_gives_fewer_cases_and_one_warning():
    experiment = mutation_experiment([mutated_pair("g1", ("k",), 9)], mutation={"max_attempts": 200})
    with pytest.warns(GpuPairsWarning, match=r"m.json: \$.pairs\[0\].mutate: only 6 of 9 configurations of k"):
        cases = expand(experiment)
    assert sorted(c.fg.hyperparameters["k"] for c in cases) == [1, 2, 3, 4, 5, 6]


def test_a_pair_without_mutate_is_its_default_case_and_takes_its_key():
    experiment = mutation_experiment([{"group": "g0", "foreground": {"model": "mine", "hyperparameters": {"k": 2}},
                                       "background": {"model": "mnist"}}, mutated_pair("g1", ("k",), 5)])
    cases = expand(experiment)
    assert cases[0].id == "g0-mine+mnist-default-concurrent"
    assert 2 not in [c.fg.hyperparameters["k"] for c in cases[1:]]


@pytest.mark.parametrize("pair_extra, where, expected", [
    ({"mutate": ["nope"]}, "$.pairs[0].mutate[0]", "expected one of mnist_ff's hyperparameters or 'all'"),
    ({"mutate": ["epochs"], "foreground": {"model": "resnet20", "hyperparameters": {}}},
     "$.pairs[0].mutate[0]", None),
    ({"mutate": ["batch_size"], "foreground": {"model": "resnet20"}}, "$.pairs[0].mutate[0]",
     "expected a numeric hyperparameter with a range to sample from; resnet20's batch_size has none"),
    ({"vary": {"epochs": [1, 2]}}, "$.pairs[0].vary", "expected only with design 'hp_study'"),
])
def test_mutation_settings_are_checked(pair_extra, where, expected):
    pair = {"group": "g1", "foreground": {"model": "mnist_ff"}, "background": {"model": "mnist"}, **pair_extra}
    data = {"name": "m", "design": "mutation", "pairs": [pair]}
    if expected is None:
        assert expand(parse_experiment(data, "m.json"))
        return
    with pytest.raises(SettingsError) as info:
        parse_experiment(data, "m.json")
    assert f"m.json: {where}: {expected}" in str(info.value)


SEED_MUTATION = {"experiment_name": "seed_mut", "mode": "mutation", "use_deduplication": True,
                 "historical_csvs": ["data/history.csv"], "runs_per_config": 1, "experiments": [
                     {"comment": "only a comment"},
                     {"repo": "examples", "model": "mnist_ff", "mode": "parallel",
                      "foreground": {"repo": "examples", "model": "mnist_ff", "mode": "mutation", "mutate": ["batch_size"]},
                      "background": {"repo": "examples", "model": "mnist", "hyperparameters": {}}, "runs_per_config": 3},
                     {"repo": "examples", "model": "mnist_ff", "mode": "parallel",
                      "foreground": {"repo": "examples", "model": "mnist_ff", "mode": "mutation", "mutate": ["nope"]},
                      "background": {"repo": "examples", "model": "mnist", "hyperparameters": {}}}]}

CSV_HEADER = ("experiment_id,repository,model,hyperparam_batch_size,hyperparam_epochs,mode,fg_repository,fg_model,"
              "fg_hyperparam_batch_size,fg_hyperparam_epochs\n")


def test_seed_mutation_file_maps_runs_per_config_to_distinct_samples(tmp_path):
    data = dict(SEED_MUTATION, experiments=SEED_MUTATION["experiments"][:2])
    (tmp_path / "seed.json").write_text(json.dumps(data))
    with pytest.warns(GpuPairsWarning, match=r"seed.json: \$.historical_csvs\[0\]: data/history.csv not found"):
        experiment = load_experiment(tmp_path / "seed.json")
        cases = expand(experiment)
    assert experiment.design == "mutation" and experiment.pairs[0].mutations == 3
    assert len(cases) == 3 and all(c.runs_per_config == 1 and c.id.startswith("g02-mnist_ff+mnist-batch_size_")
                                   for c in cases)
    assert len({c.fg.hyperparameters["batch_size"] for c in cases}) == 3


def test_seed_csv_rows_are_history_found_beside_the_settings_file(tmp_path):
    data = dict(SEED_MUTATION, experiments=SEED_MUTATION["experiments"][:2])
    (tmp_path / "seed.json").write_text(json.dumps(data))
    taken = [b for b in range(16, 129) if b != 77]
    rows = [f"x_{b}_parallel,,,,,parallel,examples,mnist_ff,{b},10\n" for b in taken]
    rows.append("solo_77,examples,mnist_ff,77,10,,,,,\n")
    (tmp_path / "history.csv").write_text(CSV_HEADER + "".join(rows))
    experiment = load_experiment(tmp_path / "seed.json")
    with pytest.warns(GpuPairsWarning, match="only 1 of 3"):
        cases = expand(experiment)
    assert [c.fg.hyperparameters["batch_size"] for c in cases] == [77]


def test_seed_file_errors_point_into_the_foreground(tmp_path):
    (tmp_path / "seed.json").write_text(json.dumps(SEED_MUTATION))
    with pytest.raises(SettingsError, match=r"seed.json: \$.experiments\[2\].foreground.mutate\[0\]: expected one of"):
        load_experiment(tmp_path / "seed.json")


def test_a_seed_row_reads_the_foreground_columns_of_a_parallel_run_and_fills_defaults():
    model, hparams, mode = seed_row_run({"experiment_id": "a_parallel", "mode": "parallel", "fg_repository": "examples",
                                         "fg_model": "mnist_ff", "fg_hyperparam_epochs": "12.0"})
    assert (model, mode) == ("mnist_ff", "concurrent") and hparams == {**BUILTINS["mnist_ff"].defaults(), "epochs": 12.0}
    assert seed_row_run({"experiment_id": "b_parallel", "repository": "VulBERTa", "model": "mlp"})[0::2] == \
        ("vulberta_mlp", "concurrent")
    assert seed_row_run({"experiment_id": "c", "repository": "nowhere", "model": "x"}) is None


def test_history_reads_case_and_solo_records_and_skips_incomplete_ones(tmp_path):
    write_result(tmp_path, "a", "mnist", {"epochs": 1})
    write_result(tmp_path / "_solo", "mnist-123", "mnist", {"epochs": 2}, mode="solo")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "result.json").write_text('{"complete": false, "fg_model": "mnist", "fg_hparams": {}}')
    history = load_history(complete_records(tmp_path), [], tmp_path, "s.json")
    assert isinstance(history, History) and len(history) == 2
    assert history.ran_elsewhere(mutation.run_key("mnist", {"epochs": 1}, "concurrent"), "other")
    assert not history.ran_elsewhere(mutation.run_key("mnist", {"epochs": 1}, "concurrent"), "a")


def test_the_seeds_stage3_4_file_loads_and_expands_as_it_is(seed_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpuPairsWarning)
        experiment = load_experiment(seed_dir / "stage3_4_merged_optimized_parallel.json")
        cases = expand(experiment)
    assert experiment.design == "mutation" and len(experiment.pairs) == 25
    assert len({c.id for c in cases}) == len(cases) and len(cases) <= sum(p.mutations for p in experiment.pairs)
    assert len(set(keys(cases))) == len(cases)


finite_bounds = st.floats(-1e300, 1e300) | st.integers(-(2**70), 2**70)


@hsettings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["int", "float"]), bounds=st.tuples(finite_bounds, finite_bounds),
       distribution=st.sampled_from([None, "uniform", "log_uniform"]), zero=st.sampled_from([0.0, 0.5, 1.0]),
       seed=st.integers(0, 2**32))
def test_every_drawn_value_passes_the_checks_of_a_written_one_or_the_range_is_refused(kind, bounds, distribution,
                                                                                       zero, seed):
    low, high = sorted(bounds)
    workload = {"command": ["python", "t.py"], "hyperparameters": {
        "k": {"type": kind, "range": [low, high], "distribution": distribution, "zero_probability": zero}}}
    try:
        experiment = parse_experiment({"name": "m", "design": "mutation", "workloads": {"mine": workload},
                                       "mutation": {"seed": seed}, "pairs": [mutated_pair(mutations=3)]}, "m.json")
    except SettingsError as refused:  # an empty int range, a log range through zero, a width beyond a float
        assert "\n" not in str(refused) and str(refused).startswith("m.json: $.")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpuPairsWarning)
        cases = expand(experiment)  # a drawn value the checks refuse would raise here
    low, high = experiment.workloads["mine"].hyperparameters["k"].range  # as read: floats
    for case in cases:
        value = case.fg.hyperparameters["k"]
        assert math.isfinite(value) and (value == 0 or low <= value <= high)
        written = parse_experiment({"name": "w", "workloads": {"mine": workload},
                                    "pairs": [{**mutated_pair(), "mutate": None, "mutations": None,
                                               "foreground": {"model": "mine", "hyperparameters": {"k": value}}}]},
                                   "w.json")
        assert written.pairs[0].foreground.hyperparameters["k"] == value


def test_zero_from_zero_probability_may_also_be_written_below_a_positive_range():
    workload = {"command": ["python", "t.py"], "hyperparameters": {
        "wd": {"type": "float", "default": 0.0001, "range": [1e-5, 1e-3], "distribution": "log_uniform",
               "zero_probability": 1.0}}}
    cases = expand(parse_experiment({"name": "m", "design": "mutation", "workloads": {"mine": workload},
                                     "pairs": [mutated_pair(mutate=["wd"], mutations=1)]}, "m.json"))
    assert cases[0].fg.hyperparameters["wd"] == 0.0
    written = {"group": "g", "foreground": {"model": "mine", "hyperparameters": {"wd": 0}}, "background": {"model": "mnist"}}
    assert parse_experiment({"name": "w", "workloads": {"mine": workload}, "pairs": [written]}, "w.json")


def test_a_range_whose_width_is_beyond_a_float_is_one_line():
    workload = {"command": ["python", "t.py"], "hyperparameters": {"k": {"type": "float", "range": [-1e308, 1e308]}}}
    with pytest.raises(SettingsError, match=r"m\.json: \$\.workloads\.mine\.hyperparameters\.k: expected a range "
                                            r"whose width is a finite number"):
        mutation_experiment([mutated_pair()], workloads={"mine": workload})
