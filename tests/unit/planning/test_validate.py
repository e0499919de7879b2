"""The planner's validation: every measured pair predicted by a planner blind to one of its workloads
(then to the pair), errors, interval coverage and the choice of mechanism; a measurement above 2 read
as 2; and `gpu-pairs plan-validate` on the package's H100 reference."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning.measured import Measured, MeasuredPair, pair_key
from pytest_gpu_pairs.planning.predict import Planner
from pytest_gpu_pairs.planning.profiles import parse
from pytest_gpu_pairs.planning.validate import (
    HeldOut,
    leave_one_pair_out,
    leave_one_workload_out,
    leave_one_workload_out_on_host,
    validate,
)
from tools.codegen.reference_pairs import ROOT

BUSY = {"a": 20, "b": 40, "c": 60, "d": 80, "e": 30}


def _profiles():
    return parse({"idle_power_w": 70.0, "device": {"power_limit_w": 700.0},
                  "workloads": [{"model": m, "util_avg_pct": u, "power_avg_w": 200.0, "min_fit_mb": 1000.0}
                                for m, u in BUSY.items()]}, "fixture")


def _measured(values: dict[tuple[str, str], float], sharing: str = "timeslice") -> dict:
    return {(pair_key(*k), sharing): MeasuredPair(pair_key(*k), sharing, v, (v - 0.02, v + 0.02), 0.1, 1000.0, 1, ("x",))
            for k, v in values.items()}


def _all_pairs(offset: float = 0.0) -> dict[tuple[str, str], float]:
    planner = Planner(_profiles())
    names = sorted(BUSY)
    return {(a, b): planner.efficiency((a, b), "timeslice").value + offset
            for i, a in enumerate(names) for b in names[i + 1:]}


def test_every_pair_is_predicted_once_per_workload_by_a_planner_that_never_saw_it():
    values = _all_pairs()
    values[("a", "b")] = 1.2  # far from what the others teach
    planner = Planner(_profiles(), Measured(_measured(values)))
    rows = leave_one_workload_out(planner)
    assert sorted((r.models, r.held_out) for r in rows) == sorted((pair_key(*k), w) for k in values for w in k)
    spiked = [r for r in rows if r.models == ("a", "b")]
    assert all(r.error > 0.2 for r in spiked)  # nothing it taught leaks into its own prediction
    assert all(r.predicted.basis.startswith("solo profiles") for r in rows)
    blind = planner.without_workload("a")
    assert not any("a" in models for models, _ in blind.measured.pairs)


def test_pairs_that_follow_the_model_are_predicted_within_their_intervals():
    planner = Planner(_profiles(), Measured(_measured(_all_pairs())))
    summary = validate(planner, 10240.0)
    workloads = summary["leave_one_workload_out"]["timeslice"]
    assert workloads["n_pairs"] == 10 and workloads["n_predictions"] == 20
    assert workloads["max_error"] == pytest.approx(0.0, abs=1e-9)
    assert len(leave_one_pair_out(planner)) == 10
    assert summary["mechanism_choice"]["n"] == 0  # nothing measured under both: nothing to judge


def _with_host_busy(values: dict[tuple[str, str], float], busy: dict[tuple[str, str], dict[str, float]]) -> Measured:
    pairs = _measured(values)
    for models, read in busy.items():
        key = (pair_key(*models), "timeslice")
        pairs[key] = replace(pairs[key], solo_busy=tuple(sorted(read.items())))
    return Measured(pairs)


def test_a_pair_is_predicted_again_from_the_busy_fractions_its_own_solo_phases_read():
    """The host's share of an error: where a pair's solo phases read its jobs busier than their
    profiles, the row from those readings predicts it lower; a pair without readings is left out."""
    values = _all_pairs()
    busier = {("c", "d"): {"c": 0.75, "d": 0.95}, ("a", "b"): {"a": 0.2, "b": 0.4}}
    planner = Planner(_profiles(), _with_host_busy(values, busier))
    shipped = {(r.models, r.held_out): r for r in leave_one_workload_out(planner)}
    on_host = leave_one_workload_out_on_host(planner)
    assert sorted((r.models, r.held_out) for r in on_host) == [(("a", "b"), "a"), (("a", "b"), "b"),
                                                              (("c", "d"), "c"), (("c", "d"), "d")]
    for row in on_host:
        blind = planner.without_workload(row.held_out)
        assert row.predicted.value == blind.efficiency_from_busy(row.models, "timeslice", busier[row.models]).value
        if row.models == ("c", "d"):
            assert row.predicted.value < shipped[(row.models, row.held_out)].predicted.value
    summary = validate(planner, 10240.0)
    assert summary["leave_one_workload_out_busy_on_host"]["timeslice"]["n_pairs"] == 2


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 0.9), st.floats(0.05, 0.9), st.floats(0.0, 0.1))
def test_busier_jobs_are_never_predicted_to_share_better(busy_a, busy_b, more):
    """The physics alone (no measured pair, so no learnt correction to bend it)."""
    planner = Planner(_profiles())
    lighter = planner.efficiency_from_busy(("a", "b"), "timeslice", {"a": busy_a, "b": busy_b}).value
    busier = planner.efficiency_from_busy(("a", "b"), "timeslice", {"a": busy_a + more, "b": busy_b + more}).value
    assert busier <= lighter + 1e-12
    assert planner.efficiency_from_busy(("a", "z"), "timeslice", {"a": 0.5, "z": 0.5}).value is None


def test_a_held_out_prediction_without_an_interval_is_not_counted_as_covered():
    from pytest_gpu_pairs.planning.predict import Figure
    open_ended = HeldOut(("a", "b"), "timeslice", "a", 1.5, None, Figure(1.4, 0.0, 2.0, "solo profiles only", estimated=False))
    assert open_ended.covered is None and open_ended.width is None and open_ended.error == pytest.approx(0.1 / 1.5)


def test_the_recommended_mechanism_is_judged_against_the_measured_better_one():
    slicing = {("a", "d"): 1.3, ("b", "d"): 1.4, ("c", "d"): 1.2, ("a", "b"): 1.9, ("b", "c"): 1.6}
    mps = {("a", "d"): 1.9, ("b", "d"): 1.9, ("c", "d"): 1.8, ("a", "b"): 1.95, ("b", "c"): 1.9}
    planner = Planner(_profiles(), Measured({**_measured(slicing), **_measured(mps, "mps")}))
    choice = validate(planner, 10240.0)["mechanism_choice"]
    assert choice["pairs"] == 5 and choice["n"] == 10
    clear = [r for r in choice["rows"] if r["clearly"]]
    assert clear and all(r["measured_better"] == "mps" for r in clear)
    assert choice["share_right"] == sum(r["right"] for r in choice["rows"]) / 10


def test_a_measurement_above_two_reads_as_two_and_says_so():
    planner = Planner(_profiles(), Measured(_measured({("a", "b"): 2.12})))
    figure = planner.efficiency(("a", "b"), "timeslice")
    assert figure.value == 2.0 and figure.high == 2.0 and "above the physical bound" in figure.basis


def test_plan_validate_on_the_reference_writes_the_committed_validation(tmp_path, capsys):
    assert gpu_pairs(["plan-validate", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "leave one workload out" in printed and "mechanism:" in printed
    mps_lines = [line for line in printed.splitlines() if line.startswith("MPS's base model: ")]
    assert len(mps_lines) == 1 and mps_lines[0] in (tmp_path / "validation.md").read_text().splitlines()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["measured_pairs"] == {"timeslice": 39, "mps": 12}
    for mechanism in ("timeslice", "mps"):
        figures = summary["leave_one_workload_out"][mechanism]
        assert 0.0 <= figures["median_error"] <= figures["max_error"] and 0.0 <= figures["coverage"] <= 1.0
    predictions = summary["predictions"]["leave_one_workload_out"]
    assert all(p["measured"] <= 2.0 and p["held_out"] in p["pair"] for p in predictions)
    assert (tmp_path / "validation.md").read_text().startswith("# Planner validation")
    committed = ROOT / "reports/reference/planner_validation"  # the planner study's summary holds the same validation
    assert json.loads((committed / "summary.json").read_text())["leave_one_workload_out"] == summary["leave_one_workload_out"]


def test_plan_validate_without_any_measured_pair_or_with_a_bad_folder_says_so_in_one_line(tmp_path, capsys):
    assert gpu_pairs(["plan-validate", "--no-reference"]) == 2
    assert capsys.readouterr().out.startswith("error: no measured pair")
    bad = tmp_path / "bad"
    (bad / "x").mkdir(parents=True)
    (bad / "x" / "result.json").write_text("{not json")
    assert gpu_pairs(["plan-validate", "--results", str(bad), "--out", str(tmp_path / "out")]) == 2
    line = capsys.readouterr().out
    assert line.startswith("error: ") and line.count("\n") == 1 and "result.json" in line
    assert not (tmp_path / "out").exists()  # nothing half-written



def test_the_study_sets_its_own_pairs_beside_what_the_planner_says_without_them(tmp_path):
    from pytest_gpu_pairs.record.store import save_result
    from pytest_gpu_pairs.studies.collates import planner_validation

    record = {"case_id": "f01-mrt_oast+siamese-default-concurrent", "mode": "concurrent", "fg_model": "mrt_oast",
              "bg_model": "siamese", "sharing": "timeslice", "method": "interleaved", "device": "NVIDIA H200",
              "concurrency_efficiency": 1.884, "concurrency_efficiency_ci": [1.821, 1.947], "oom": False}
    save_result(tmp_path / "fresh" / record["case_id"], record)
    shutil.copy(ROOT / "reports/reference/planner_validation/plan.json", tmp_path / "plan.json")
    summary = planner_validation.summarize(tmp_path, ROOT)
    (fresh,) = summary["fresh"]
    assert fresh["pair"] == ["mrt_oast", "siamese"] and fresh["measured"] == 1.884
    assert fresh["predicted"] is not None and fresh["error"] == pytest.approx(abs(fresh["predicted"] - 1.884) / 1.884)
    assert fresh["planned_before"]["value"] == pytest.approx(1.79307, abs=1e-5)  # what the plan said before the run
    assert "| mrt_oast+siamese | timeslice | 1.884 [1.821, 1.947] |" in planner_validation.table(summary)
    assert "| 1.793 [1.576, 2.000] |" in planner_validation.table(summary)
    assert planner_validation.summarize(tmp_path / "nothing", ROOT)["fresh"] == []
    (tmp_path / "plan.json").write_text(json.dumps({"pairs": [{"pair": ["a", "b"], "mechanisms": {"timeslice": 3}}]}))
    with pytest.raises(SettingsError) as caught:
        planner_validation.summarize(tmp_path, ROOT)
    assert str(caught.value).startswith(f"{tmp_path / 'plan.json'}: $.pairs[0].mechanisms.timeslice.efficiency: ")


def _profiled_here(folder, busy: dict[str, float], device_name="NVIDIA H200"):
    from pytest_gpu_pairs.planning.own_profiles import KIND
    from pytest_gpu_pairs.record.store import save_profile

    for workload, pct in busy.items():
        save_profile(folder, workload, "cuda", {"kind": KIND, "version": 1, "workload": workload, "builtin": True,
                                                "device": "cuda", "device_name": device_name, "startup_s": 5.0,
                                                "step_time_s": 0.05, "util_avg_pct": pct, "power_avg_w": 200.0})


def _pair_here(folder, fg: str, bg: str, efficiency: float):
    from pytest_gpu_pairs.record.store import save_result

    record = {"case_id": f"r-{fg}+{bg}-default-concurrent", "mode": "concurrent", "fg_model": fg, "bg_model": bg,
              "sharing": "timeslice", "method": "interleaved", "device": "NVIDIA H200",
              "concurrency_efficiency": efficiency, "concurrency_efficiency_ci": [efficiency - 0.03, efficiency + 0.03],
              "oom": False}
    save_result(folder / record["case_id"], record)


def test_the_planner_is_validated_on_the_profiles_measured_beside_its_pairs(tmp_path, capsys):
    """An H200's pairs judged by the H200's own solo profiles: the H100 table and its reference pairs
    stay out, and the summary names where the profiles came from."""
    results = tmp_path / "timeslice"
    _profiled_here(results, {"mnist": 20.0, "resnet20": 45.0, "siamese": 30.0})
    for fg, bg, eff in (("mnist", "resnet20", 1.85), ("resnet20", "siamese", 1.55), ("mnist", "siamese", 1.9)):
        _pair_here(results, fg, bg, eff)
    out = tmp_path / "out"
    assert gpu_pairs(["plan-validate", "--results", str(results), "--profiles-here", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["measured_pairs"] == {"timeslice": 3, "mps": 0} and summary["reference"] is None
    assert summary["profiles"] == f"gpu-pairs profile in {results}"
    assert {p["held_out"] for p in summary["predictions"]["leave_one_workload_out"]} == {"mnist", "resnet20", "siamese"}
    capsys.readouterr()


def test_profiles_here_that_are_missing_or_of_two_gpus_are_refused_in_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert gpu_pairs(["plan-validate", "--results", str(empty), "--profiles-here"]) == 2
    assert capsys.readouterr().out.startswith("error: --profiles-here: no cuda profile in the _profiles/ of")
    two = tmp_path / "two"
    _profiled_here(two, {"mnist": 20.0})
    _profiled_here(two, {"resnet20": 45.0}, device_name="NVIDIA H100 80GB HBM3")
    assert gpu_pairs(["plan-validate", "--results", str(two), "--profiles-here"]) == 2
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and "expected profiles of one GPU model" in line
    assert gpu_pairs(["plan-validate", "--results", str(two), "--profiles-here", "--profiles", "x.json"]) == 2
    assert "not --profiles and --profiles-here" in capsys.readouterr().out


def _plan_r05(results, capsys, *extra):
    code = gpu_pairs(["plan", str(ROOT / "settings/planner_reference.json"), "-k", "r05", "--results", str(results),
                      "--json", *extra])
    out = capsys.readouterr().out
    return code, (json.loads(out) if code == 0 else out)


def test_a_plan_for_the_gpu_profiled_here_takes_its_card_and_its_profiles(tmp_path, capsys):
    """The plan for an H200 from the H200's own profiles: its card's size, and energy from its idle
    power and power limit (session.json), where the H100 table would plan for an 80 GB card."""
    results = tmp_path / "h200"
    _profiled_here(results, {"mnist": 20.0, "mnist_ff": 15.0})
    _pair_here(results, "mnist", "mnist_ff", 1.97)
    code, unknown_card = _plan_r05(results, capsys, "--profiles-here")
    assert code == 0 and unknown_card["card_mb"] == 81_559.0
    assert unknown_card["pairs"][0]["mechanisms"]["mps"]["energy_saved"]["value"] is None
    (results / "session.json").write_text(json.dumps({"device": "NVIDIA H200", "idle_power_w": 80.6, "gpu": {
        "name": "NVIDIA H200", "memory_total_mb": 143_771.0, "power_limit_w": 700.0}}))
    code, plan = _plan_r05(results, capsys, "--profiles-here")
    assert code == 0 and plan["card_mb"] == 143_771.0
    assert plan["model"]["profiled_device"] == "NVIDIA H200" and plan["model"]["reference"] is None
    assert plan["model"]["profiles"] == f"gpu-pairs profile in {results}"
    [pair] = plan["pairs"]
    assert pair["rests_on"] == "measured" and pair["mechanisms"]["mps"]["energy_saved"]["value"] > 0
    code, h100 = _plan_r05(results, capsys)
    assert code == 0 and h100["model"]["profiled_device"].startswith("NVIDIA H100") and h100["card_mb"] < 143_771.0


def test_a_plan_from_profiles_here_without_any_is_refused_in_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = _plan_r05(empty, capsys, "--profiles-here")
    assert code == 2 and out.startswith("error: --profiles-here: no cuda profile") and out.count("\n") == 1
    code, out = _plan_r05(empty, capsys, "--profiles-here", "--profiles", "x.json")
    assert code == 2 and "not --profiles and --profiles-here" in out
