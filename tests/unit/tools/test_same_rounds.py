"""tools/command_workloads/same_rounds.py takes a record's figures again over its complete rounds,
reading and writing the record through the store: a benchmark JSON's and a case folder's alike."""
import json
import shutil
import statistics
from pathlib import Path

from pytest_gpu_pairs.record.store import load_run, read_record
from tools.command_workloads import same_rounds

ROOT = Path(__file__).resolve().parents[3]
CASE = ROOT / "reports" / "archive" / "planner" / "p23-rerun"
BENCH = ROOT / "reports" / "reference" / "command_workloads" / "interleaved.json"


def _silent_first_round(record: dict) -> dict:
    rounds = [dict(r) for r in record["rounds"]]
    rounds[0]["concurrency_efficiency"] = None
    return {**record, "rounds": [{**r, "complete": True} for r in rounds]}


def test_a_case_folder_record_is_retaken_over_its_complete_rounds(tmp_path):
    case = tmp_path / "case"
    case.mkdir()
    record = load_run(BENCH).records["c01-lstm_lm_script+resnet20-default-concurrent"].to_dict()
    (case / "result.json").write_text(json.dumps(_silent_first_round(record)))
    assert same_rounds.main([str(case)]) == 0
    fixed = read_record(case / "result.json")
    used = [r["concurrency_efficiency"] for r in fixed.rounds if r["complete"]]
    assert fixed.rounds_excluded == len(fixed.rounds) - len(used) == 1 and fixed.n_rounds == len(used)
    assert not fixed.rounds[0]["complete"] and fixed.concurrency_efficiency == statistics.fmean(used)


def test_the_archived_rerun_is_already_over_its_complete_rounds(tmp_path):
    case = tmp_path / "p23"
    shutil.copytree(CASE, case)
    before = read_record(case / "result.json")
    assert same_rounds.main([str(case)]) == 0
    after = read_record(case / "result.json")
    assert (after.n_rounds, after.rounds_excluded, after.concurrency_efficiency) == \
        (before.n_rounds, before.rounds_excluded, before.concurrency_efficiency)


def test_a_benchmark_json_keeps_its_layout_and_every_record_reads_back(tmp_path):
    bench = tmp_path / "bench.json"
    data = json.loads(BENCH.read_text())
    data["benchmarks"][0]["extra_info"] = _silent_first_round(data["benchmarks"][0]["extra_info"])
    bench.write_text(json.dumps(data))
    assert same_rounds.main([str(bench)]) == 0
    after = json.loads(bench.read_text())
    assert [b["stats"] for b in after["benchmarks"]] == [b["stats"] for b in data["benchmarks"]]
    records = load_run(bench).records
    first = records[data["benchmarks"][0]["extra_info"]["case_id"]]
    assert not first.rounds[0]["complete"] and first.rounds_excluded >= 1
