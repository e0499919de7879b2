"""tools/planner/validate.py on synthetic study output: every measured pair predicted without itself,
errors and fit correctness computed from the table, the predecessor's matrix beside it."""
from __future__ import annotations

import json

import pytest

from pytest_gpu_pairs.record.store import save_result
from tools.planner import validate

MODELS = {"mnist": (20, 700), "mnist_ff": (12, 650), "resnet20": (44, 900), "siamese": (26, 900),
          "resnet32": (49, 1000), "pcb": (92, 12000)}


def _study(tmp_path):
    folder = tmp_path / "planner"
    folder.mkdir()
    workloads = [{"model": m, "util_avg_pct": u, "power_avg_w": 100 + 4 * u, "min_fit_mb": need}
                 for m, (u, need) in MODELS.items()]
    (folder / "workload_profiles_raw.json").write_text(json.dumps(
        {"device": {"name": "fixture", "memory_total_mb": 81559, "power_limit_w": 700}, "idle_power_w": 70,
         "min_fit_method": "bisection (fixture)", "workloads": workloads}))
    measured = [("mnist", "resnet20", 1.8, False), ("mnist_ff", "resnet20", 1.85, False), ("mnist", "siamese", 1.9, False),
                ("siamese", "resnet32", 1.5, False), ("mnist", "resnet32", 1.7, False), ("mnist", "pcb", None, True)]
    for index, (a, b, efficiency, oom) in enumerate(measured):
        case = f"p{index:02d}-{a}+{b}-default-concurrent"
        save_result(folder / "pairs-10g" / case, {
            "case_id": case, "mode": "concurrent", "fg_model": a, "bg_model": b, "sharing": "timeslice",
            "method": "interleaved", "device": "NVIDIA H100", "concurrency_efficiency": efficiency,
            "gpu_memory_mb": 10240.0, "gpu_used_before_ballast_mb": 500.0 + index, "oom": oom})
    return folder


def test_validation_predicts_each_pair_without_it_and_scores_the_fit(tmp_path):
    report = validate.validate(_study(tmp_path))
    assert report["measured_pairs"] == 5 and report["fit_pairs"] == 6
    row = next(r for r in report["pairs"] if r["pair"] == ["mnist", "resnet20"])
    assert row["measured"] == 1.8 and row["abs_error"] == pytest.approx(abs(row["predicted"] - 1.8))
    errors = sorted(r["abs_error"] for r in report["pairs"])
    assert report["median_abs_error"] == pytest.approx(errors[2])
    pcb = next(r for r in report["fit_checks"][0]["rows"] if r["pair"] == ["mnist", "pcb"])
    # the card's reserve, the records' median 502.5 MB, held once: 12000 + 700 - 502.5
    assert report["card_reserve_mb"] == 502.5
    assert pcb == {"pair": ["mnist", "pcb"], "measured_fits": False, "predicted": "no", "need_mb": 12197.5,
                   "basis": "card reserve + min fit", "correct": True}
    assert report["fit_correct"] == 1.0
    groups = {g["group"]: g for g in report["predecessor"]["groups"]}
    assert groups["g01"]["predecessor_mb"] == 1300 and groups["g01"]["predicted_at_card"] == "fits"
    text = validate.markdown(report)
    assert "| mnist+resnet20 | timeslice | 1.80 [-, -] |" in text and "## The predecessor's pair matrix" in text


def test_validate_writes_both_files(tmp_path):
    assert validate.main([str(_study(tmp_path)), "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "validation.json").read_text())["measured_pairs"] == 5
    assert (tmp_path / "out" / "validation.md").read_text().startswith("# Planner validation")
    written = json.loads((tmp_path / "out" / "workload_profiles.json").read_text())
    assert written["device"]["reserved_mb"] == 502.5 and "median" in written["device"]["reserved_method"]


def test_a_smaller_card_scores_fit_alone_and_leaves_the_efficiencies_alone(tmp_path):
    folder = _study(tmp_path)
    for index, (a, b, efficiency, oom) in enumerate([("mnist", "resnet20", 1.2, False), ("siamese", "resnet32", None, True)]):
        case = f"p{index:02d}-{a}+{b}-default-concurrent"
        save_result(folder / "pairs-8g" / case, {
            "case_id": case, "mode": "concurrent", "fg_model": a, "bg_model": b, "sharing": "timeslice",
            "method": "interleaved", "device": "NVIDIA H100", "concurrency_efficiency": efficiency,
            "gpu_memory_mb": 8192.0, "gpu_used_before_ballast_mb": 500.0, "oom": oom})
    report = validate.validate(folder)
    assert report["measured_pairs"] == 5 and report["fit_pairs"] == 6 and report["fit_correct"] == 1.0
    assert next(r for r in report["pairs"] if r["pair"] == ["mnist", "resnet20"])["measured"] == 1.8
    small = report["fit_checks"][1]
    # mnist+pcb, out of memory on 10 GB, is evidence on 8 GB too
    assert small["card_mb"] == 8192.0 and small["pairs"] == 3 and small["correct"] == pytest.approx(2 / 3)
    wrong = next(r for r in small["rows"] if not r["correct"])
    assert wrong["pair"] == ["resnet32", "siamese"] and wrong["predicted"] == "fits" and not wrong["measured_fits"]
    assert "on 8192 MB for 67 % of 3" in validate.markdown(report) and "## Fit on 8192 MB" in validate.markdown(report)


def test_pairs_measured_again_sit_beside_the_same_prediction_without_moving_the_headline(tmp_path):
    folder = _study(tmp_path)
    first = validate.validate(folder)
    save_result(folder / "pairs-10g-long" / "p00-mnist+resnet20-default-concurrent", {
        "case_id": "p00-mnist+resnet20-default-concurrent", "mode": "concurrent", "fg_model": "mnist",
        "bg_model": "resnet20", "sharing": "timeslice", "method": "interleaved", "device": "NVIDIA H100",
        "concurrency_efficiency": 1.6, "concurrency_efficiency_ci": [1.55, 1.65], "gpu_memory_mb": 10240.0,
        "oom": False})
    report = validate.validate(folder)
    assert report["median_abs_error"] == first["median_abs_error"] and report["measured_pairs"] == 5
    (row,) = report["remeasured"]
    predicted = next(r for r in first["pairs"] if r["pair"] == ["mnist", "resnet20"])["predicted"]
    assert row["first"] == 1.8 and row["again"] == 1.6 and row["again_ci"] == [1.55, 1.65]
    assert row["predicted"] == predicted and row["abs_error_again"] == pytest.approx(abs(predicted - 1.6))
    assert "## The noisiest pairs measured again" in validate.markdown(report)
    assert "## The noisiest pairs" not in validate.markdown(first)
