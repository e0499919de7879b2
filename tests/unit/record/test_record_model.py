"""The typed record: one key table, one model, and the store as its only way to and from disk."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.record import build
from pytest_gpu_pairs.record.keys import KEYS, PER_ROUND, SCHEMA_VERSION, comparable, direction, markdown_table
from pytest_gpu_pairs.record.model import Record, ValidationError, built
from pytest_gpu_pairs.record.store import StoreError, load_result, load_run, read_record, save_result, typed

WRONG = {"float": "1.2", "int": 1.5, "str": 3, "bool": "yes", "dict": [1], "list": {"a": 1}}
RECORD = {"case_id": "g01-a+b-default-concurrent", "mode": "concurrent", "concurrency_efficiency": 1.4,
          "fg_hparams": {"epochs": 1}, "notes": {"gpu_energy_j": "no GPU"}, "gpu_energy_j": None, "oom": False,
          "fg_exit_code": 0, "perf": {"accuracy": 0.9}}


def test_a_saved_record_reads_back_the_same(tmp_path):
    save_result(tmp_path, RECORD)
    back = load_result(tmp_path)
    assert back is not None and back.to_dict() == {**RECORD, "schema": SCHEMA_VERSION, "complete": True}
    assert back.concurrency_efficiency == 1.4 and back["mode"] == "concurrent" and "fg_model" not in back


@given(name=st.sampled_from(sorted(KEYS)))
def test_a_value_of_the_wrong_type_is_refused_with_the_key_named(name):
    if name == "schema":
        return
    with pytest.raises(StoreError) as caught:
        typed({**RECORD, name: WRONG[KEYS[name].type]}, "result.json")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"result.json: $.{name}: expected a gpu-pairs result record")


def test_a_broken_file_on_disk_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**RECORD, "concurrency_efficiency": "1.2"}))
    with pytest.raises(StoreError, match=r"result.json: \$\.concurrency_efficiency: expected"):
        read_record(path)
    assert load_result(tmp_path) is None  # a resumed session measures such a case again
    path.write_bytes(b"\xff\xfe not json")
    with pytest.raises(StoreError, match=r"result.json: \$: expected"):
        read_record(path)


def test_keys_of_other_plugins_and_spreads_are_kept():
    record = Record.model_validate({**RECORD, "plugin_keys": ["my_plugin_key"], "my_plugin_key": [1, 2],
                                    "gpu_energy_j_std": 0.5})
    assert record.get("my_plugin_key") == [1, 2] and record.gpu_energy_j_std == 0.5


def test_every_figure_averaged_over_rounds_is_a_number_with_a_spread():
    assert all(KEYS[name].type in ("float", "int") for name in PER_ROUND)
    assert {f"{name}_std" for name in PER_ROUND} <= set(Record.model_fields)


@given(metric=st.text(min_size=1, max_size=20))
def test_a_model_metric_is_better_lower_exactly_when_it_names_a_loss_error_or_perplexity(metric):
    lower = any(word in metric.lower() for word in ("loss", "error", "perplexity"))
    assert direction(f"perf.{metric}") == ("lower" if lower else "higher")


def test_the_gate_knows_every_figure_with_a_direction_and_the_docs_list_every_key():
    assert "concurrency_efficiency" in comparable() and direction("gpu_energy_j") == "lower"
    assert direction("case_id") is None
    table = markdown_table()
    assert all(f"`{name}`" in table for name in KEYS)


def test_a_misspelt_key_is_refused_naming_it_and_the_key_meant():
    with pytest.raises(StoreError) as caught:
        typed({"case_id": "x", "concurency_efficiency": 1.2}, "out/c/result.json")
    assert str(caught.value).startswith("out/c/result.json: $.concurency_efficiency: expected a gpu-pairs result record")
    assert "did you mean 'concurrency_efficiency'" in str(caught.value)
    with pytest.raises(ValueError, match="'concurency_efficiency' is not a key of the record"):
        Record.model_validate({"case_id": "x", "concurency_efficiency": 1.2})


def test_a_misspelt_key_on_disk_names_the_file_and_where_in_the_benchmark_json(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": [{"extra_info": {"case_id": "x", "fg_slowdwn": 1.1}}]}))
    with pytest.raises(StoreError, match=r"bench.json: \$\.benchmarks\[0\]\.extra_info\.fg_slowdwn: .*'fg_slowdown'"):
        load_run(path)


def test_keys_another_plugin_added_are_kept_where_the_record_names_them():
    record = typed({"case_id": "x", "plugin_keys": ["cluster_node"], "cluster_node": "node-7"})
    assert record.get("cluster_node") == "node-7"
    with pytest.raises(StoreError, match=r"\$\.rack: "):
        typed({"case_id": "x", "plugin_keys": ["cluster_node"], "rack": "r12"})


def test_a_misspelt_key_is_an_error_where_the_record_is_built():
    with pytest.raises(ValidationError, match="'fg_slowdwn' is not a key of the record.*did you mean 'fg_slowdown'"):
        built({**RECORD, "fg_slowdwn": 1.2})
    with pytest.raises(ValidationError, match="did you mean 'fg_slowdown'"):
        built(RECORD).updated(fg_slowdwn=1.2)


def test_a_builder_that_writes_or_reads_a_misspelt_key_fails_in_its_test(monkeypatch):
    rounds = [built({**RECORD, "fg_slowdown": s, "failure": None}) for s in (1.5, 1.7)]
    assert build.aggregate(rounds).fg_slowdown == pytest.approx(1.6)
    with monkeypatch.context() as patch:
        patch.setattr(build, "with_impossible_notes", lambda record: {**record, "fg_slowdwn": 1.6})
        with pytest.raises(ValidationError, match="did you mean 'fg_slowdown'"):
            build.aggregate(rounds)
    monkeypatch.setattr(build, "PER_ROUND", (*PER_ROUND, "fg_slowdwn"))
    with pytest.raises(AttributeError, match="fg_slowdwn"):
        build.aggregate(rounds)


def test_an_update_keeps_every_other_key_and_leaves_the_record_as_it_was():
    record = built(RECORD)
    changed = record.updated(concurrency_efficiency=1.1, reused_measurement="here")
    assert changed.to_dict() == {**RECORD, "concurrency_efficiency": 1.1, "reused_measurement": "here"}
    assert record.to_dict() == RECORD


def test_a_round_is_checked_as_a_record_is_and_stays_a_dict():
    rounds = [{"round": 1, "bracketed": True, "fg_slowdown": 2.0, "phases": [{"name": "pair", "start": 1.0}]}]
    assert built({**RECORD, "rounds": rounds}).rounds == rounds
    with pytest.raises(ValidationError, match="round: 'fg_slowdwn' is not a key.*did you mean 'fg_slowdown'"):
        built({**RECORD, "rounds": [{"round": 1, "fg_slowdwn": 2.0}]})
    with pytest.raises(StoreError, match=r"result.json: \$\.rounds\[0\]\.fg_slowdown: expected"):
        typed({**RECORD, "rounds": [{"fg_slowdown": "2.0"}]}, "result.json")
