"""Each job's pace beside the other, as a measured pair keeps it: read from the records (the jobs'
progress ratios, or the foreground's slowdown and the background's progress in older records), carried
in the package's reference pairs, and what MPS's capacity is read from."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning import cards
from pytest_gpu_pairs.planning.measured import read_measured, read_reference
from pytest_gpu_pairs.planning.predict import Planner
from pytest_gpu_pairs.record.store import save_result


def _record(case_id: str, **fields) -> dict:
    return {"case_id": case_id, "mode": "concurrent", "fg_model": "a", "bg_model": "b", "sharing": "mps",
            "method": "interleaved", "device": "NVIDIA H200", "concurrency_efficiency": 1.5,
            "concurrency_efficiency_ci": [1.4, 1.6], "oom": False, **fields}


def _jobs(fg: float, bg: float, models=("a", "b")) -> list[dict]:
    return [{"role": "fg", "model": models[0], "progress_ratio": fg}, {"role": "bg", "model": models[1], "progress_ratio": bg}]


def _read(tmp_path, *records):
    for record in records:
        save_result(tmp_path / record["case_id"], record)
    [pair] = read_measured([tmp_path]).pairs.values()
    return dict(pair.rates)


def test_a_pairs_paces_are_its_jobs_progress_ratios_averaged_over_its_records(tmp_path):
    rates = _read(tmp_path, _record("p1", jobs=_jobs(0.9, 0.6)), _record("p2", jobs=_jobs(0.7, 0.8)))
    assert rates == pytest.approx({"a": 0.8, "b": 0.7})


def test_a_record_without_its_jobs_gives_the_inverse_slowdown_and_the_background_progress(tmp_path):
    assert _read(tmp_path, _record("p1", fg_slowdown=1.25, bg_progress_ratio=0.6)) == pytest.approx({"a": 0.8, "b": 0.6})


def test_two_jobs_of_one_workload_give_it_their_mean(tmp_path):
    record = _record("p1", bg_model="a", jobs=_jobs(0.9, 0.5, ("a", "a")))
    assert _read(tmp_path, record) == pytest.approx({"a": 0.7})


@pytest.mark.parametrize("fields", [{}, {"fg_slowdown": 0.0, "bg_progress_ratio": 0.5}, {"jobs": _jobs(0.9, None)},
                                    {"oom": True, "jobs": _jobs(0.9, 0.6)}])
def test_a_record_that_gave_no_paces_or_ran_out_of_memory_teaches_none(tmp_path, fields):
    assert _read(tmp_path, _record("p1", **fields)) == {}


def test_the_reference_tables_carry_every_measured_pairs_paces_and_the_h200_reads_its_mps_capacity_from_them():
    for card in cards.CARDS:
        measured = card.pairs().measured
        assert all(dict(p.rates).keys() == set(p.models) for p in measured.pairs.values() if p.efficiency is not None)
    h200 = cards.card_named("h200")
    planner = Planner(h200.table(), h200.pairs().measured)
    assert 0.85 < planner.mps.capacity < 0.95  # two heavy jobs (mrt_oast + pcb) filled about 0.90 of it


@given(st.one_of(st.floats(-1.0, -1e-6), st.floats(2.0 + 1e-6, 10.0)), st.sampled_from(["a", "z"]))
def test_a_reference_pairs_pace_out_of_range_or_of_another_workload_is_one_line(rate, name):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reference.json"
        path.write_text(json.dumps({"device": "x", "pairs": [
            {"models": ["a", "b"], "sharing": "mps", "records": 1, "rates": {name: rate if name == "a" else 0.5}}]}))
        with pytest.raises(SettingsError) as caught:
            read_reference(path)
    assert str(caught.value).startswith(f"{path}: $.pairs[0].rates.{name}: expected a pace from 0 to 2 times alone")
    assert "\n" not in str(caught.value)
