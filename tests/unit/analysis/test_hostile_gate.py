"""Hostile records against the gate, merge and the report, on copies of real H100 records
(tests/data/h100): rounds a record left out, cases measured with different methods, a layout newer
than this version's, figures no measurement gives (1e200), shards of one GPU model on different
drivers, interleaved records in the report, and a ``$`` in a workload's name."""
from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import H100_DATA, with_rounds

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.analysis.compare import LARGEST_FIGURE, Threshold, compare_runs
from pytest_gpu_pairs.record.keys import HEADLINE, PER_ROUND, SCHEMA_VERSION
from pytest_gpu_pairs.record.store import Run, load_result, load_run

BENCH = H100_DATA / "slice_full_scale.json"
RUN = H100_DATA / "run"
CASE = "g01-mnist_ff+resnet20-default-concurrent"
EFFICIENCY = Threshold("concurrency_efficiency", 5.0, "higher")


def bench(tmp_path: Path, name: str, change=lambda record: None) -> Path:
    """The H100 benchmark JSON, each record given five rounds 1 % apart and then ``change``d."""
    data = json.loads(BENCH.read_text())
    for entry in data["benchmarks"]:
        entry["extra_info"] = with_rounds(entry["extra_info"], PER_ROUND)
        change(entry["extra_info"])
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def regressed_with_excluded_rounds(values: list[float]):
    """20 % less efficient in every complete round, plus rounds the record marked incomplete."""
    def change(record):
        record["concurrency_efficiency"] *= 0.8
        for entry in record["rounds"]:
            entry["concurrency_efficiency"] *= 0.8
        record["rounds"] += [{**record["rounds"][0], "concurrency_efficiency": v, "complete": False} for v in values]
    return change


def test_a_round_the_record_left_out_does_not_turn_a_regression_into_noise(tmp_path, capsys):
    base = bench(tmp_path, "base.json")
    new = bench(tmp_path, "new.json", regressed_with_excluded_rounds([100.0]))
    assert cli.main(["compare", str(base), str(new), "--fail", "concurrency_efficiency:5%"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION (95 % intervals apart; 5 vs 5 rounds" in out


@settings(max_examples=30)
@given(st.lists(st.floats(0.0, 1e6), min_size=1, max_size=10))
def test_incomplete_rounds_of_any_value_never_change_the_verdict(tmp_path_factory, values):
    tmp = tmp_path_factory.mktemp("rounds")
    base = load_run(bench(tmp, "base.json"))
    plain = load_run(bench(tmp, "plain.json", regressed_with_excluded_rounds([])))
    padded = load_run(bench(tmp, "padded.json", regressed_with_excluded_rounds(values)))
    judged = [[(r.status, r.regression) for r in compare_runs(base, new, [EFFICIENCY]).rows] for new in (plain, padded)]
    assert judged[0] == judged[1]
    assert ("REGRESSION", True) in judged[0]


def interleaved(record):
    record["method"] = "interleaved"


def test_an_epoch_baseline_against_an_interleaved_run_is_refused_in_one_line(tmp_path, capsys):
    base, new = bench(tmp_path, "base.json"), bench(tmp_path, "new.json", interleaved)
    assert cli.main(["compare", str(base), str(new), "--fail", "concurrency_efficiency:5%"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err.strip()
    assert "\n" not in line and line.startswith(f"error: baseline {base} measured 2 case(s) with another method")
    assert f"{CASE} (epoch in BASE, interleaved in NEW)" in line
    assert cli.main(["compare", str(base), str(new), "--force"]) == 2  # --force lifts machine refusals only


def test_a_gate_inside_a_session_fails_on_cases_measured_with_another_method(tmp_path):
    base, new = load_run(bench(tmp_path, "base.json")), load_run(bench(tmp_path, "new.json", interleaved))
    comparison = compare_runs(base, new, [EFFICIENCY])
    assert comparison.failed and comparison.rows == []
    assert comparison.unjudged == ["2 case(s) measured with another method", "no case appears in both runs"]


@given(st.integers(SCHEMA_VERSION + 1, 10**6))
def test_a_record_of_a_newer_layout_is_refused_by_every_reader(tmp_path_factory, layout):
    tmp = tmp_path_factory.mktemp("layout")
    newer = bench(tmp, "newer.json", lambda record: record.update(schema=layout))
    folder = tmp / "run" / CASE
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({**json.loads((RUN / CASE / "result.json").read_text()),
                                                    "schema": layout, "complete": True}))
    for reader in (lambda: load_run(newer), lambda: load_run(tmp / "run")):
        with pytest.raises(ValueError, match=rf"\.schema: expected a record of layout 1 to {SCHEMA_VERSION}, got "
                                             rf"{layout}; it was written by a newer gpu-pairs"):
            reader()
    assert load_result(folder) is None  # resume measures the case again


def test_compare_and_report_refuse_a_newer_layout_with_exit_2(tmp_path, capsys):
    base = bench(tmp_path, "base.json")
    newer = bench(tmp_path, "newer.json", lambda record: record.update(schema=SCHEMA_VERSION + 1))
    assert cli.main(["compare", str(base), str(newer)]) == 2
    assert cli.main(["report", str(newer), "-o", str(tmp_path / "report")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(f"{newer}: $.benchmarks[0].extra_info.schema" in e for e in errors)
    assert not (tmp_path / "report").exists()


@settings(max_examples=25)
@given(metric=st.sampled_from([m for m in HEADLINE if m in PER_ROUND]),
       magnitude=st.floats(LARGEST_FIGURE * 1.01, 1.7e308), in_round=st.booleans(), negative=st.booleans())
def test_a_figure_no_measurement_gives_is_exit_2_naming_file_and_path(tmp_path_factory, metric, magnitude,
                                                                     in_round, negative):
    tmp = tmp_path_factory.mktemp("huge")
    value = -magnitude if negative else magnitude

    def change(record):
        target = record["rounds"][2] if in_round else record
        target[metric] = value
    base, new = bench(tmp, "base.json"), bench(tmp, "new.json", change)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert cli.main(["compare", str(base), str(new), "--fail", f"{metric}:5%"]) == 2
    assert out.getvalue() == ""
    err = err.getvalue().strip()
    where = f"$.benchmarks[0].extra_info{'.rounds[2]' if in_round else ''}.{metric}"
    assert err == (f"error: {new}: {where}: expected a measured figure within ±{LARGEST_FIGURE:g}, got {value:g}; "
                   "the record is no measurement of this case")


FIGURES = st.floats(-LARGEST_FIGURE, LARGEST_FIGURE)


@settings(max_examples=40)
@given(values=st.lists(FIGURES, min_size=5, max_size=5), parts=st.lists(FIGURES, min_size=5, max_size=5),
       method=st.sampled_from(["epoch", "interleaved"]))
def test_every_figure_within_the_bound_is_judged_without_an_error(values, parts, method):
    data = json.loads(BENCH.read_text())
    records = {e["extra_info"]["case_id"]: {**with_rounds(e["extra_info"], PER_ROUND), "method": method}
               for e in data["benchmarks"]}
    new = copy.deepcopy(records)
    for record in new.values():
        for entry, value, part in zip(record["rounds"], values, parts):
            entry["fg_slowdown"] = entry["gpu_energy_j"] = value
            entry["serial_energy_j"] = entry["fg_alone_energy_j"] = entry["fg_gpu_energy_j"] = part
    thresholds = [Threshold(m, 5.0, "lower") for m in ("fg_slowdown", "gpu_energy_j", "fg_gpu_energy_j")]
    comparison = compare_runs(Run("base", records), Run("new", new), thresholds)
    assert comparison.bad_figures == [] and len(comparison.rows) == 3 * len(records)


def shard(tmp_path: Path, folder_name: str, case: str, **gpu) -> Path:
    folder = tmp_path / folder_name
    folder.mkdir()
    session = json.loads((RUN / "session.json").read_text())
    session["gpu"].update(gpu)
    (folder / "session.json").write_text(json.dumps(session))
    (folder / case).mkdir()
    (folder / case / "result.json").write_text((RUN / case / "result.json").read_text())
    return folder


@pytest.mark.parametrize("gpu, where", [({"driver": "575.57.08"}, "$.gpu.driver: driver '575.57.08'"),
                                        ({"cuda_driver_version": "12.9"}, "$.gpu.cuda_driver_version: CUDA '12.9'"),
                                        ({"name": "NVIDIA H200"}, "$.gpu.name: GPU 'NVIDIA H200'")])
def test_shards_on_another_driver_cuda_or_gpu_model_do_not_merge(tmp_path, capsys, gpu, where):
    a = shard(tmp_path, "a", CASE)
    b = shard(tmp_path, "b", "s01-mnist+resnet20-default-concurrent", **gpu)
    assert cli.main(["merge", str(a), str(b), "-o", str(tmp_path / "out")]) == 2
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"error: {b / 'session.json'}: {where} differs from {a}'s ") and "\n" not in line
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_shards_of_one_gpu_model_driver_and_cuda_merge_whatever_card_they_ran_on(tmp_path):
    a = shard(tmp_path, "a", CASE)
    b = shard(tmp_path, "b", "s01-mnist+resnet20-default-concurrent", index=3, uuid="GPU-another-card")
    assert cli.main(["merge", str(a), str(b), "-o", str(tmp_path / "out")]) == 0


def interleaved_record(fg: str = "mnist_ff", bg: str = "resnet20", efficiency: float = 1.5) -> dict:
    record = json.loads((RUN / CASE / "result.json").read_text())
    record.update(method="interleaved", fg_model=fg, bg_model=bg, case_id=f"g01-{fg}+{bg}-default-concurrent",
                  fg_duration_s=None, fg_solo_duration_s=None, concurrency_efficiency=efficiency,
                  fg_slowdown=1.25, bg_progress_ratio=efficiency - 0.8, peak_vram_mb=900.0, vram_budget_mb=7500.0)
    return record


def results_folder(tmp_path: Path, *records: dict) -> Path:
    for record in records:
        (tmp_path / "out" / record["case_id"]).mkdir(parents=True)
        (tmp_path / "out" / record["case_id"] / "result.json").write_text(json.dumps(record))
    return tmp_path / "out"


def test_the_report_analyses_interleaved_records(tmp_path, capsys):
    out = results_folder(tmp_path, interleaved_record(), interleaved_record("mnist", "siamese", 1.2))
    assert cli.main(["report", str(out), "-o", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert "efficiency" in printed.split("plots:")[1].split("\n")[0]
    assert "no concurrent run names both of its jobs" not in printed
    assert "2 run(s) measured in interleaved rounds" in printed
    html = (tmp_path / "report" / "report.html").read_text()
    assert "2 runs analysed: 0 solo, 2 concurrent" in html
    import pandas as pd

    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    assert len(summary) == 2 and summary["in_analysis"].all()


def test_an_interleaved_records_phase_energies_are_never_read_as_a_whole_runs(tmp_path):
    from pytest_gpu_pairs.analysis.report.analysis import analyse
    from pytest_gpu_pairs.analysis.report.load import load_runs

    solo = json.loads((RUN / CASE / "result.json").read_text())
    solo.update(mode="solo", case_id="s-mnist_ff-solo", bg_model=None, gpu_energy_j=5000.0)
    loaded = load_runs([results_folder(tmp_path, interleaved_record(), solo)])
    runs = analyse(loaded.runs).runs.set_index("case_id")
    row = runs.loc["g01-mnist_ff+resnet20-default-concurrent"]
    assert row["fg_slowdown"] == 1.25 and row["slowdown_basis"] == "measured"
    assert pd_isna(row["gpu_energy_j"]) and pd_isna(row["energy_ratio"]) and pd_isna(row["solo_duration_s"])


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


@pytest.mark.parametrize("name", ["m$^^$", "$", "a$b", r"$\frac{$", "cost $5 + $6"])
def test_a_dollar_in_a_workload_name_is_drawn_as_written(tmp_path, capsys, name):
    out = results_folder(tmp_path, interleaved_record(fg=name, bg=f"{name}bg"))
    assert cli.main(["report", str(out), "-o", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert "efficiency" in printed.split("plots:")[1].split("\n")[0]
    assert (tmp_path / "report" / "plots" / "efficiency.png").stat().st_size > 0
    assert name in (tmp_path / "report" / "summary.csv").read_text()


def test_figures_within_the_bound_that_overflow_when_judged_are_exit_2_not_a_regression(tmp_path, capsys):
    def phases(phase_s: float, energy: float):
        def change(record):
            record.update(method="interleaved", phase_s=phase_s, serial_energy_j=energy)
            for index, entry in enumerate(record["rounds"]):
                entry["serial_energy_j"] = energy * (1 + index / 100)
        return change
    base, new = bench(tmp_path, "base.json", phases(0.5, 100.0)), bench(tmp_path, "new.json", phases(1e-300, 1e40))
    assert cli.main(["compare", str(base), str(new), "--fail", "serial_energy_j:5%"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {new}: $.benchmarks[0].extra_info.serial_energy_j: expected figures a comparison can "
                          f"compute with, but judged against {base}: $.benchmarks[0].extra_info they leave a float's range")
