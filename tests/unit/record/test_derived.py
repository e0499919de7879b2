"""The study's figures: overheads, interference, energy per unit of work, energy saved by sharing."""
import pytest

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.record import metrics
from pytest_gpu_pairs.record.derived import comparison_figures, higher_is_better, own_figures
from pytest_gpu_pairs.record.model import built


def test_energy_saved_is_serial_minus_concurrent():
    assert metrics.energy_saved_j(3000.0, 2750.0) == pytest.approx(-250.0)
    assert metrics.energy_saved_j(None, 2750.0) is None and metrics.energy_saved_j(3000.0, None) is None


def test_relative_change_and_per_unit_refuse_what_is_not_measurable():
    assert metrics.relative_change(1.2, 1.0) == pytest.approx(0.2)
    assert metrics.relative_change(-1.0, -2.0) == pytest.approx(0.5)
    assert metrics.relative_change(1.0, 0.0) is None and metrics.relative_change(None, 1.0) is None
    assert metrics.per_unit(10.0, 4) == 2.5 and metrics.per_unit(10.0, 0) is None and metrics.per_unit(None, 1) is None


def test_loss_like_metrics_are_lower_is_better():
    assert not higher_is_better("test_loss") and not higher_is_better("test_error")
    assert higher_is_better("test_accuracy") and higher_is_better("rank1")


def test_own_figures_divide_the_foregrounds_energy_by_its_epochs_and_its_metric():
    job = JobConfig("mnist", (("epochs", 2), ("learning_rate", 0.01)))
    record = {"mode": "solo", "fg_gpu_energy_j": 300.0, "perf": {"test_accuracy": 60.0, "test_loss": 0.5}, "notes": {}}
    figures = own_figures(record, job)
    assert figures["perf_metric"] == "test_accuracy" and figures["fg_epochs"] == 2
    assert figures["fg_energy_per_epoch_j"] == 150.0 and figures["fg_energy_per_perf_j"] == 5.0


def test_own_figures_say_why_without_gpu_energy():
    job = JobConfig("mnist", (("epochs", 2),))
    record = {"mode": "solo", "fg_gpu_energy_j": None, "perf": {"test_accuracy": 60.0},
              "notes": {"fg_gpu_energy_j": "not measurable on this run: no GPU"}}
    figures = own_figures(record, job)
    assert figures["fg_energy_per_epoch_j"] is None
    assert figures["notes"]["fg_energy_per_epoch_j"] == "not measurable on this run: no GPU"


def test_comparisons_of_a_concurrent_round_against_its_solo_runs():
    record = {"mode": "concurrent", "fg_duration_s": 15.0, "gpu_energy_j": 3000.0, "perf_metric": "test_accuracy",
              "perf": {"test_accuracy": 45.0}, "serial_energy_j": 2750.0, "notes": {}}
    solo_fg = built({"fg_duration_s": 10.0, "gpu_energy_j": 2000.0, "perf": {"test_accuracy": 50.0}})
    figures = comparison_figures(record, solo_fg)
    assert figures["concurrent_overhead"] == pytest.approx(0.5)
    assert figures["concurrent_energy_overhead"] == pytest.approx(0.5)
    assert figures["interference"] == pytest.approx(-0.1)
    assert figures["sharing_energy_saved_j"] == pytest.approx(2750.0 - 3000.0)


def test_comparisons_are_null_with_a_reason_for_a_solo_round_and_without_energy():
    solo = comparison_figures({"mode": "solo", "notes": {}}, None)
    assert solo["interference"] is None and solo["notes"]["interference"] == "solo case: nothing shares the device"
    record = {"mode": "concurrent", "fg_duration_s": 15.0, "gpu_energy_j": None, "perf_metric": "test_accuracy",
              "perf": {"test_accuracy": 45.0}, "serial_energy_j": None, "notes": {"gpu_energy_j": "no GPU here"}}
    figures = comparison_figures(record, built({"fg_duration_s": 10.0, "gpu_energy_j": None,
                                                "perf": {"test_accuracy": 50}}))
    assert figures["concurrent_overhead"] == pytest.approx(0.5) and figures["sharing_energy_saved_j"] is None
    assert figures["notes"]["sharing_energy_saved_j"] == "no GPU here"
