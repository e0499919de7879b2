"""Take a committed interleaved record's figures again over the same rounds, as the harness now does.

The command-workload study's c03 (and the archived planner study's p23 rerun) was recorded before
every figure of an interleaved case was the mean over the same complete rounds: its round 3 had no
efficiency and no energy split (a job was silent through a phase), yet its energy above idle entered
that figure's mean, so the two jobs' shares did not add up to it (2.8 % apart). This takes each
figure's mean, standard deviation and interval over the rounds that carry both an efficiency and the
split, marks every round ``complete`` or not, and counts the others in ``rounds_excluded``. Nothing
measured changes: only which rounds each mean is over. Records are read and written back through the
store, typed (a record of an older layout is written in today's).

    python -m tools.command_workloads.same_rounds reports/reference/command_workloads/interleaved.json \
        reports/archive/planner/p23-rerun
"""
from __future__ import annotations

import sys
from pathlib import Path

from pytest_gpu_pairs.inputs import read_json
from pytest_gpu_pairs.record.metrics import mean_and_std
from pytest_gpu_pairs.record.phases import HEADLINE_INTERVALS
from pytest_gpu_pairs.record.stats import interval
from pytest_gpu_pairs.record.store import (
    RESULT,
    atomic_write_json,
    benchmark_entries_typed,
    load_run,
    read_record,
    typed,
    write_record,
)


def complete(round_: dict) -> bool:
    return round_.get("concurrency_efficiency") is not None and round_.get("fg_gpu_energy_j") is not None


def retaken(record: dict) -> dict:
    rounds = [{**r, "complete": complete(r)} for r in record["rounds"]]
    used = [r for r in rounds if r["complete"]]
    out = {**record, "rounds": rounds, "n_rounds": len(used), "rounds_excluded": len(rounds) - len(used)}
    for key in {k for r in used for k, v in r.items() if isinstance(v, float)} & set(record):
        values = [r[key] for r in used]
        ci = interval(values)
        out[key] = ci.mean
        if f"{key}_std" in record:
            out[f"{key}_std"] = mean_and_std(values)[1]
        if key in HEADLINE_INTERVALS and f"{key}_ci" in record:
            out[f"{key}_ci"] = ci.as_list()
    return out


def _fixed(info: dict) -> dict:
    if not info.get("rounds") or all(complete(r) for r in info["rounds"]):
        return info
    fixed = retaken(info)
    print(f"{info['case_id']}: figures over {fixed['n_rounds']} of {len(info['rounds'])} rounds")
    return fixed


def main(argv: list[str]) -> int:
    """Each path: a benchmark JSON (every record in it), or a case's folder holding its record."""
    for path in map(Path, argv):
        if path.is_dir():
            record = read_record(path / RESULT)
            write_record(path, typed(_fixed(record.to_dict()), path))
            continue
        records = load_run(path).records
        data = read_json(path)
        for entry in data["benchmarks"]:
            case_id = (entry.get("extra_info") or {}).get("case_id")
            if case_id in records:
                entry["extra_info"] = _fixed(records[case_id].to_dict())
        atomic_write_json(path, benchmark_entries_typed(data, str(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
