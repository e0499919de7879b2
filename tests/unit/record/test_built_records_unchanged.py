"""The records the builders give for fixed synthetic measurements, written as ``result.json`` is,
against the same records written before the builders returned the typed model: a change of how a
record is put together must not change one key or value of it. A change meant to alter records
rewrites the file: ``GPU_PAIRS_REWRITE_RECORDS=1 pytest tests/unit/record/test_built_records_unchanged.py``.

The measurements are those the builders' own tests use, so one fixture change shows in both."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.helpers import DATA

from pytest_gpu_pairs.record.build import aggregate, case_record, failed_record, interleaved_record, round_record
from pytest_gpu_pairs.record.model import built
from pytest_gpu_pairs.record.scaling import scaling_record
from pytest_gpu_pairs.record.store import save_result
from unit.record import test_phases as phases
from unit.record import test_scaling_record as scaling
from unit.record import test_sharing_records as sharing

EXPECTED = DATA / "records" / "built.json"


def _pair_records(tmp: Path) -> dict:
    mps, timeslice = sharing._case("mps"), sharing._case("timeslice")
    solo = case_record(mps, sharing.SOLO_FG_RUN, sharing.SOLO_FG, None, sharing.ENV)
    first = case_record(mps, sharing._concurrent(tmp, probe=sharing.MPS_PROBE), sharing.SOLO_FG, sharing.SOLO_BG,
                        sharing.ENV, solo)
    second = case_record(mps, sharing._concurrent(tmp, watts=320.0, probe=sharing.MPS_PROBE), sharing.SOLO_FG,
                         sharing.SOLO_BG, sharing.ENV, solo)
    return {"solo": solo, "mps_round": first, "mps_mean_of_two": aggregate([first, second]),
            "mps_one_round": aggregate([first]),
            "timeslice_round": round_record(timeslice, sharing._concurrent(tmp, sm={sharing.FG_PID: 60.0,
                                                                                   sharing.BG_PID: 30.0}),
                                            sharing.SOLO_FG, sharing.SOLO_BG, sharing.ENV),
            "failed": failed_record(timeslice, "solo baseline of m failed: exited with code 1", sharing.ENV)}


def _interleaved_record() -> dict:
    case = sharing._case("timeslice")
    return interleaved_record(case, phases.drifting_measurement(), sharing.ENV)


def _scaling_records() -> dict:
    one = built({"step_time_s": 0.05, "step_time_ci": [0.049, 0.051], "step_time_blocks": 10})
    two_gpus = scaling.measurement(scaling.builtin_ranks(slow_rank_extra=0.01), [scaling.gpu(0), scaling.gpu(1)])
    return {"scaling_two_gpus": scaling_record(scaling.case(), two_gpus, "NVIDIA H200", 1.0, baseline=one),
            "scaling_cpu": scaling_record(scaling.case(), scaling.measurement(scaling.builtin_ranks()), "cpu", 1.0)}


def _written(record, folder: Path) -> dict:
    """The record as ``result.json`` holds it."""
    return json.loads(save_result(folder, record).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("built")
    records = {**_pair_records(tmp / "run"), "interleaved": _interleaved_record(), **_scaling_records()}
    return {name: _written(record, tmp / name) for name, record in records.items()}


def test_the_builders_write_the_records_they_wrote_before(written):
    if os.environ.get("GPU_PAIRS_REWRITE_RECORDS"):
        EXPECTED.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert sorted(written) == sorted(expected)
    for name, record in written.items():
        assert record == expected[name], name
