"""``gpu-pairs report``: loading every input kind, the analysis rules, and the files written from our
own records (e2e/test_report.py builds the full seed report and renders the HTML in Chromium)."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import H100_DATA

from pytest_gpu_pairs import cli

BENCH, RUN_DIR = H100_DATA / "slice_full_scale.json", H100_DATA / "run"
SEED_HEADER = ("experiment_id,timestamp,repository,model,training_success,duration_seconds,hyperparam_epochs,"
               "hyperparam_learning_rate,hyperparam_seed,perf_test_accuracy,energy_gpu_total_joules,experiment_source,"
               "mode,error_message,fg_repository,fg_model,fg_duration_seconds,fg_training_success,"
               "fg_hyperparam_epochs,fg_hyperparam_learning_rate,fg_perf_test_accuracy,fg_energy_gpu_total_joules,"
               "bg_repository,bg_model")


def seed_csv(path: Path, rows: list[str]) -> Path:
    path.write_text(SEED_HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def test_the_seed_csv_loads_with_its_runs_modes_and_duplicates(seed_dir):
    from pytest_gpu_pairs.analysis.report.load import load_runs

    loaded = load_runs([seed_dir / "raw_data.csv"])
    runs = loaded.runs
    assert len(runs) == 1225 and (runs["mode"] == "concurrent").sum() == 658
    assert set(runs["fg_model"]) <= {"mnist", "mnist_ff", "mnist_rnn", "siamese", "resnet20", "densenet121", "hrnet18",
                                     "pcb", "vulberta_mlp", "mrt_oast", "bug_localization"}
    assert loaded.duplicates == 227
    kept = runs.set_index("run_id").loc["mutation_2x_safe__MRT-OAST_default_075_parallel"]
    assert kept["bg_model"] == "mnist_rnn" and kept["campaign"] == "mutation_2x_safe" and kept["hp_epochs"] == 9
    assert kept["hp_learning_rate"] == 0.0001
    assert any("mrt_oast: 21 of 69 accuracy values are off the scale" in n for n in loaded.notes)


def test_slowdowns_match_solo_runs_of_the_same_hyperparameters_and_campaign(tmp_path):
    from pytest_gpu_pairs.analysis.report.analysis import add_solo_baselines, valid_runs
    from pytest_gpu_pairs.analysis.report.load import load_runs

    path = seed_csv(tmp_path / "raw.csv", [
        "a__solo1,,examples,mnist,True,100,10,0.01,1,98,1000,,,,,,,,,,,,,",
        "a__solo2,,examples,mnist,True,120,10,0.01,7,98,1200,,,,,,,,,,,,,",
        "a__solo3,,examples,mnist,True,50,5,0.01,1,97,500,,,,,,,,,,,,,",
        "b__solo1,,examples,mnist,True,10,10,0.01,1,98,100,,,,,,,,,,,,,",
        "a__par1,,,,,,,,,,,,parallel,,examples,mnist,165,True,,,98,3300,examples,siamese",
        "a__par2,,,,,,,,,,,,parallel,,examples,mnist,80,True,4,,97,1600,examples,siamese",
        "b__par1,,,,,,,,,,,,parallel,,examples,mnist,20,True,,,98,300,,",
        "a__par3,,,,,,,,,,,,parallel,,examples,mnist,90,True,,0.02,98,900,,",
    ])
    runs = add_solo_baselines(valid_runs(load_runs([path]).runs)).set_index("run_id")
    assert runs.loc["a__par1", "slowdown_basis"] == "same_hparams"
    assert runs.loc["a__par1", "fg_slowdown"] == pytest.approx(165 / 110)
    assert runs.loc["a__par1", "energy_ratio"] == pytest.approx(3300 / 1100)
    assert runs.loc["a__par2", "slowdown_basis"] == "per_epoch"
    assert runs.loc["a__par2", "fg_slowdown"] == pytest.approx(80 / (4 * (100 / 10 + 120 / 10 + 50 / 5) / 3))
    assert runs.loc["b__par1", "fg_slowdown"] == pytest.approx(2.0)
    assert math.isnan(runs.loc["a__par3", "fg_slowdown"])


def test_benchmark_json_and_run_dir_of_one_run_count_once():
    from pytest_gpu_pairs.analysis.report.load import load_runs

    loaded = load_runs([BENCH, RUN_DIR])
    assert len(loaded.runs) == 4 and loaded.duplicates == 2
    first = loaded.runs.iloc[0]
    assert first["gpu_name"] == "NVIDIA H100 80GB HBM3" and first["driver"] == "580.159.04"
    assert first["pair"] == "mnist_ff+resnet20" and first["perf_name"] == "test_accuracy"


def test_a_cpu_run_given_as_benchmark_json_and_as_its_folder_counts_once(tmp_path):
    """No GPU: energies are null. pandas 3 turns them into missing string keys, which a groupby
    without dropna=False leaves out, so both copies of the run were counted."""
    from pytest_gpu_pairs.analysis.report.load import load_runs

    record = json.loads((RUN_DIR / "g01-mnist_ff+resnet20-default-concurrent" / "result.json").read_text())
    record.update({key: None for key in record if "energy" in key and not key.endswith("method")}, device="cpu")
    run_dir = tmp_path / "gpu-pairs-results"
    (run_dir / record["case_id"]).mkdir(parents=True)
    (run_dir / record["case_id"] / "result.json").write_text(json.dumps(record))
    bench = tmp_path / "out.json"
    bench.write_text(json.dumps({"machine_info": {}, "benchmarks": [{"name": record["case_id"], "extra_info": record}]}))
    loaded = load_runs([bench, run_dir])
    assert len(loaded.runs) == 2 and loaded.duplicates == 1


@pytest.mark.parametrize("content, message", [(None, "expected a benchmark JSON file, a run directory"),
                                               ("a,b\n1,2\n", "expected the predecessor's raw_data.csv columns")])
def test_bad_inputs_are_one_clear_line(tmp_path, capsys, content, message):
    path = tmp_path / "in.csv"
    if content is not None:
        path.write_text(content)
    assert cli.main(["report", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: ") and message in err and "\n" not in err


@given(points=st.lists(st.tuples(st.floats(0, 100), st.floats(0, 1)), min_size=1, max_size=40),
       higher=st.booleans())
def test_the_pareto_front_is_exactly_the_undominated_points(points, higher):
    from pytest_gpu_pairs.analysis.report.analysis import pareto_mask

    cost, value = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    front = pareto_mask(cost, value, higher)
    sign = 1 if higher else -1

    def beats(j, i):
        return (cost[j] <= cost[i] and sign * value[j] >= sign * value[i]
                and (cost[j] < cost[i] or sign * value[j] > sign * value[i]))
    for i in range(len(points)):
        assert front[i] == (not any(beats(j, i) for j in range(len(points))))
    assert front.any()


def test_the_interaction_test_sees_a_changed_slope_and_not_an_equal_one():
    from pytest_gpu_pairs.analysis.report.analysis import interaction_test

    rng = np.random.default_rng(7)
    x = np.tile(np.linspace(1, 10, 12), 2)
    concurrent = np.repeat([False, True], 12)
    noise = rng.normal(0, 0.5, 24)
    same = 2 * x + 3 * concurrent + noise
    changed = np.where(concurrent, 5 * x, 2 * x) + noise
    f_same, p_same, n = interaction_test(x, same, concurrent)
    f_changed, p_changed, _ = interaction_test(x, changed, concurrent)
    assert n == 24 and p_changed < 1e-6 < 0.05 < p_same
    assert interaction_test(x[:5], same[:5], concurrent[:5]) is None


def test_our_records_draw_efficiency_and_vram_against_the_budget(tmp_path, capsys):
    assert cli.main(["report", str(BENCH), str(RUN_DIR), "-o", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "efficiency" in out and "vram" in out.split("plots:")[1].split("\n")[0]
    page = (tmp_path / "r" / "report.html").read_text()
    assert "NVIDIA H100 80GB HBM3" in page and "580.159.04" in page
    summary = (tmp_path / "r" / "summary.csv").read_text()
    assert "g01-mnist_ff+resnet20-default-concurrent" in summary and "1.4265" in summary


def test_a_pair_shared_through_mps_is_another_pair_than_time_sliced(tmp_path):
    from pytest_gpu_pairs.analysis.report.load import load_runs

    data = json.loads(BENCH.read_text())
    mps = json.loads(json.dumps(data["benchmarks"][0]))
    mps["extra_info"].update(case_id=mps["extra_info"]["case_id"] + "-mps", sharing="mps", fg_duration_s=18.0)
    data["benchmarks"].append(mps)
    path = tmp_path / "both.json"
    path.write_text(json.dumps(data))
    runs = load_runs([path]).runs
    assert list(runs["pair"]) == ["mnist_ff+resnet20", "mnist+resnet20", "mnist_ff+resnet20 [mps]"]


def test_an_interaction_test_on_an_exact_fit_or_a_constant_metric_says_nothing():
    """A perfect fit leaves a residual of rounding noise; an F from it (even a negative one) is no evidence."""
    from pytest_gpu_pairs.analysis.report.analysis import interaction_test

    x = np.array([1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0])
    concurrent = np.array([False] * 4 + [True] * 4)
    assert interaction_test(x, np.full(8, 0.99), concurrent) is None
    assert interaction_test(x, np.where(concurrent, 2.0 * x, 0.5 * x + 1.0), concurrent) is None
    noisy = np.where(concurrent, 2.0 * x, 0.5 * x + 1.0) + np.array([0.1, -0.1, 0.05, 0.0, -0.05, 0.1, 0.0, -0.1])
    f_value, p, n = interaction_test(x, noisy, concurrent)
    assert f_value > 0 and 0 <= p < 0.05 and n == 8


def test_the_predecessors_percent_accuracy_and_our_old_records_compare_as_fractions(tmp_path):
    from pytest_gpu_pairs.analysis.report.load import load_runs

    path = seed_csv(tmp_path / "raw.csv", ["a__solo1,,examples,mnist_ff,True,100,10,0.01,1,97.5,1000,,,,,,,,,,,,,"])
    loaded = load_runs([path, BENCH])
    values = loaded.runs.loc[loaded.runs["fg_model"] == "mnist_ff", "perf_value"]
    assert sorted(values) == [pytest.approx(0.975), 1.0]
    assert not any("off the scale" in note for note in loaded.notes)


def test_perf_metric_judges_a_model_by_the_metric_chosen_for_it(tmp_path, capsys):
    from pytest_gpu_pairs.analysis.report.load import load_runs

    runs = load_runs([BENCH], {"mnist_ff": "train_error"}).runs.set_index("fg_model")
    assert runs.loc["mnist_ff", "perf_name"] == "train_error" and runs.loc["mnist_ff", "perf_value"] == 0.0
    assert not runs.loc["mnist_ff", "perf_higher_is_better"]
    assert runs.loc["mnist", "perf_name"] == "test_accuracy"
    assert cli.main(["report", str(BENCH), "-o", str(tmp_path / "r"), "--perf-metric", "mnist_ff=train_error",
                     "--perf-metric", "resnet56=test_accuracy"]) == 0
    assert "no run of resnet56 in the inputs" in capsys.readouterr().out


def test_a_metric_no_run_records_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys):
    assert cli.main(["report", str(BENCH), "-o", str(tmp_path / "r"), "--perf-metric", "mnist_ff=auc"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "no run of mnist_ff records auc" in error and "train_error" in error
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("given", ["mrt_oast", "=auc", "mrt_oast="])
def test_perf_metric_takes_model_equals_metric(given, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", str(BENCH), "-o", str(tmp_path / "r"), "--perf-metric", given])
    assert exit_info.value.code == 2 and "expected MODEL=METRIC" in capsys.readouterr().err


HP_STUDY = H100_DATA / "hp_study_hp06.json"  # the H100 hp_study pair: 2-epoch defaults, resnet20 varied


def test_a_hyperparameter_study_is_read_against_its_own_baseline_so_every_varied_factor_is_analysed(tmp_path):
    """resnet20's built-in trains 200 epochs; the study's baseline trains 2. Read against the
    built-in, no run varies the learning rate alone; against the study's default variant, three
    runs per mode do, and the report draws the learning-rate sensitivity as well as the epochs'."""
    from pytest_gpu_pairs.analysis.report.analysis import analyse
    from pytest_gpu_pairs.analysis.report.build import build_report
    from pytest_gpu_pairs.analysis.report.load import load_runs

    sensitivity = analyse(load_runs([HP_STUDY]).runs).sensitivity
    for hp in ("learning_rate", "epochs"):
        resnet = sensitivity[hp][sensitivity[hp]["fg_model"] == "resnet20"]
        assert set(resnet["mode"]) == {"solo", "concurrent"} and (resnet["n"] == 3).all()
    report = build_report([HP_STUDY], tmp_path / "report")
    drawn = {p.name for p in report.plots if p.path is not None}
    assert {"sensitivity_learning_rate_energy", "sensitivity_learning_rate_perf", "sensitivity_epochs_energy",
            "sensitivity_epochs_perf"} <= drawn


@given(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0), st.floats(-1.0, 1.0), st.integers(0, 2**32 - 1))
def test_the_interaction_estimate_recovers_a_known_change_of_slope(slope, change, offset, seed):
    """Three x levels, both modes, three repeats each, small noise: the estimate lies within its
    interval of the true change of slope, and the interval is a Student-t one around it."""
    from pytest_gpu_pairs.analysis.report.analysis import interaction_estimate

    rng = np.random.default_rng(seed)
    x = np.tile(np.repeat([0.0, 1.0, 2.0], 3), 2)
    concurrent = np.repeat([False, True], 9)
    y = 1.0 + slope * x + offset * concurrent + change * x * concurrent + rng.normal(0, 0.01, len(x))
    found = interaction_estimate(x, y, concurrent)
    assert found is not None and found.n == 18
    assert found.low < found.estimate < found.high and abs(found.estimate - change) < 0.05
    assert found.low - 0.05 < change < found.high + 0.05


@given(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0), st.floats(-1.0, 1.0), st.integers(0, 2**32 - 1))
def test_the_joint_fit_recovers_one_change_of_slope_from_pairs_that_share_solo_runs(slope, change, offset, seed):
    """Two pairs vary one model: its nine solo runs enter once, each pair has its own concurrent
    offset, and the common change of slope is found within its interval."""
    from pytest_gpu_pairs.analysis.report.analysis import joint_interaction

    rng = np.random.default_rng(seed)
    levels = np.repeat([0.0, 1.0, 2.0], 3)
    x = np.tile(levels, 3)
    concurrent = np.repeat([False, True, True], 9)
    pair = np.repeat(["a", "a", "b"], 9)
    shift = np.where(pair == "b", offset, -offset) * concurrent
    y = 1.0 + slope * x + shift + change * x * concurrent + rng.normal(0, 0.01, len(x))
    found = joint_interaction(x, y, concurrent, np.repeat("mrt_oast", len(x)), pair)
    assert found is not None and found.n == 27
    assert found.low < found.estimate < found.high and abs(found.estimate - change) < 0.05


def test_the_joint_fit_needs_residual_freedom():
    from pytest_gpu_pairs.analysis.report.analysis import joint_interaction

    x, concurrent = np.array([0.0, 1.0, 0.0, 1.0]), np.array([False, False, True, True])
    assert joint_interaction(x, x, concurrent, np.repeat("m", 4), np.repeat("a", 4)) is None


def test_the_pages_links_to_its_csvs_work_when_the_page_is_moved_alone(tmp_path):
    """The CSVs ride inside the page (download links of data: URIs): moved, mailed or attached
    without its folder, the page still hands over exactly the CSVs the folder holds."""
    import base64
    import re
    import shutil

    assert cli.main(["report", str(BENCH), str(RUN_DIR), "-o", str(tmp_path / "r")]) == 0
    moved = tmp_path / "elsewhere" / "report.html"
    moved.parent.mkdir()
    shutil.move(tmp_path / "r" / "report.html", moved)
    page = moved.read_text()
    links = dict(re.findall(r"<a download='([^']+)' href='data:text/csv;charset=utf-8;base64,([^']+)'>", page))
    assert sorted(links) == ["stats.csv", "summary.csv"]
    for name, data in links.items():
        assert base64.b64decode(data).decode("utf-8") == (tmp_path / "r" / name).read_text()
    assert "href='summary.csv'" not in page and "href='stats.csv'" not in page


@pytest.mark.parametrize("cell, higher", [(False, False), (np.bool_(False), False), (True, True),
                                          (np.bool_(True), True), (None, True), (float("nan"), True)])
def test_a_loss_column_reads_lower_is_better_whether_pandas_hands_back_a_python_or_a_numpy_false(cell, higher):
    from pytest_gpu_pairs.analysis.report.analysis import higher_is_better
    assert higher_is_better(cell) is higher
    assert higher_is_better(pd.Series([cell, cell]).iloc[0]) is higher
