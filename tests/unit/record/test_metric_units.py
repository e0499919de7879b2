"""Every accuracy-like metric is a fraction: built-ins state their units, records of layout 1
(percent test accuracy and Rank@k) and the predecessor's percent columns are read as fractions."""
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.catalog import BUILTINS, FRACTION, metric_unit
from pytest_gpu_pairs.compat import record_v1
from pytest_gpu_pairs.compat.raw_data import seed_run
from pytest_gpu_pairs.record.keys import SCHEMA_VERSION
from pytest_gpu_pairs.record.store import load_run, read_record, save_result

ACCURACY_LIKE = ("accuracy", "precision", "recall", "f1", "rank", "map", "error")


def test_every_builtin_metric_has_a_unit_and_every_accuracy_like_one_is_a_fraction():
    for info in BUILTINS.values():
        for name in info.metrics:
            unit = metric_unit(name)
            assert unit is not None, (info.name, name)
            if any(word in name for word in ACCURACY_LIKE):
                assert unit == FRACTION, (info.name, name)


def test_the_upgrade_writes_the_layout_the_store_writes():
    assert record_v1.LAYOUT == SCHEMA_VERSION


def _old(perf, **more):
    return {"schema": 1, "case_id": "g01-mnist+resnet20-default-concurrent", "fg_model": "mnist",
            "bg_model": "resnet20", "perf_metric": "test_accuracy", "perf": perf, **more}


@given(st.floats(min_value=0, max_value=100), st.floats(min_value=0.01, max_value=1e6))
def test_a_layout_1_percent_reads_as_a_fraction_and_energy_per_perf_follows(percent, per_perf):
    new = record_v1.upgrade(_old({"test_accuracy": percent, "test_loss": 0.3}, fg_energy_per_perf_j=per_perf,
                                 bg_perf={"test_accuracy": 50.0, "best_val_accuracy": 60.0}))
    assert new["perf"] == {"test_accuracy": pytest.approx(percent / 100), "test_loss": 0.3}
    assert new["bg_perf"] == {"test_accuracy": pytest.approx(0.5), "best_val_accuracy": pytest.approx(0.6)}
    assert new["fg_energy_per_perf_j"] == pytest.approx(per_perf * 100)
    assert new["schema"] == SCHEMA_VERSION and 0 <= new["perf"]["test_accuracy"] <= 1


def test_rounds_and_intervals_of_a_layout_1_record_are_upgraded_too():
    new = record_v1.upgrade(_old({"test_accuracy": 90.0}, fg_energy_per_perf_j=2.0, fg_energy_per_perf_j_std=0.5,
                                 fg_energy_per_perf_j_ci=[1.5, 2.5],
                                 rounds=[{"fg_energy_per_perf_j": 2.0, "oom": False}]))
    assert new["fg_energy_per_perf_j_std"] == 50.0 and new["fg_energy_per_perf_j_ci"] == [150.0, 250.0]
    assert new["rounds"] == [{"fg_energy_per_perf_j": 200.0, "oom": False}]


def test_a_users_own_workload_and_a_fraction_metric_keep_their_values():
    own = {"schema": 1, "case_id": "c", "fg_model": "my_trainer", "perf": {"test_accuracy": 93.5}}
    assert record_v1.upgrade(own)["perf"] == {"test_accuracy": 93.5}
    reid = {"schema": 1, "case_id": "c", "fg_model": "pcb", "perf": {"rank1": 88.0, "map": 0.7}}
    assert record_v1.upgrade(reid)["perf"] == {"rank1": pytest.approx(0.88), "map": 0.7}


def test_a_current_record_is_not_touched(tmp_path):
    save_result(tmp_path, {"case_id": "c", "fg_model": "mnist", "perf": {"test_accuracy": 0.97}})
    assert json.loads((tmp_path / "result.json").read_text())["schema"] == SCHEMA_VERSION
    assert read_record(tmp_path / "result.json").perf == {"test_accuracy": 0.97}


def test_an_old_benchmark_json_without_schema_reads_as_fractions(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": [{"extra_info": {"case_id": "c", "fg_model": "siamese",
                                                               "perf": {"test_accuracy": 75.0}}}]}))
    assert load_run(path).records["c"].perf == {"test_accuracy": pytest.approx(0.75)}


def test_the_predecessors_percent_columns_read_as_fractions_and_its_fractions_stay():
    row = {"experiment_id": "default__x_001", "repository": "pytorch_resnet_cifar10", "model": "resnet20",
           "mode": "", "perf_test_accuracy": 91.5, "perf_best_val_accuracy": 92.0, "perf_rank1": 0.8,
           "duration_seconds": 10.0, "energy_gpu_total_joules": math.nan}
    run = seed_run(row, "raw.csv", 0)
    assert run["perf_test_accuracy"] == pytest.approx(0.915) and run["perf_best_val_accuracy"] == pytest.approx(0.92)
    assert run["perf_rank1"] == 0.8
