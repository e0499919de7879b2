"""Every record the repository keeps (reference runs, test data, layout 1 included) still reads
through the store: the typed record refuses unknown keys, so a key an older version wrote must be
upgraded by ``compat``, not dropped on the floor or left to fail a reader later."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpu_pairs.record.keys import SCHEMA_VERSION
from pytest_gpu_pairs.record.store import load_run, read_record, write_record

ROOT = Path(__file__).resolve().parents[3]


def _record_files() -> list[Path]:
    """The committed result.json files and benchmark JSONs (any JSON holding records)."""
    found = []
    for path in sorted([*ROOT.joinpath("reports").rglob("*.json"), *ROOT.joinpath("tests", "data").rglob("*.json")]):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and ("benchmarks" in data or "case_id" in data):
            found.append(path)
    return found


RECORD_FILES = _record_files()


def test_the_repository_keeps_records_of_both_kinds():
    assert sum(p.name == "result.json" for p in RECORD_FILES) >= 40
    assert sum(p.name != "result.json" for p in RECORD_FILES) >= 10


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_record_file_loads_through_the_store(path):
    run = load_run(path)
    assert run.records and all(record.case_id == case_id for case_id, record in run.records.items())


CURRENT = [p for p in RECORD_FILES if p.name == "result.json"
           and json.loads(p.read_text(encoding="utf-8")).get("schema") == SCHEMA_VERSION]


def test_the_repository_keeps_records_of_the_current_layout():
    assert len(CURRENT) >= 40


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_record_of_the_current_layout_is_written_back_as_it_was(path, tmp_path):
    """Read and written through the typed record, a GPU run's record keeps every key and value."""
    written = write_record(tmp_path, read_record(path))
    assert json.loads(written.read_text(encoding="utf-8")) == json.loads(path.read_text(encoding="utf-8"))


def _split_records():
    for path in RECORD_FILES:
        for case_id, record in load_run(path).records.items():
            if record.method == "interleaved" and record.fg_gpu_energy_j is not None:
                yield pytest.param(record, id=f"{path.relative_to(ROOT)}:{case_id}")


@pytest.mark.parametrize("record", list(_split_records()))
def test_every_committed_interleaved_energy_split_adds_up_to_the_energy_above_idle(record):
    """Every job's share: a pair's fg_ and bg_ keys, a group's jobs (its fg_ and bg_ keys are the first two)."""
    shares = [job.gpu_energy_j for job in record.jobs] if (record.n_jobs or 2) > 2 else [record.fg_gpu_energy_j,
                                                                                       record.bg_gpu_energy_j]
    assert len(shares) == (record.n_jobs or 2)
    assert sum(shares) == pytest.approx(record.gpu_energy_above_idle_j, rel=1e-6)
