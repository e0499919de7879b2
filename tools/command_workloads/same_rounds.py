"""Take a committed interleaved record's figures again over the same rounds, as the harness now does.

The command-workload study's c03 (and the planner study's p23 rerun) was recorded before every figure of an interleaved case was the mean
over the same complete rounds: its round 3 had no efficiency and no energy split (a job was silent
through a phase), yet its energy above idle entered that figure's mean, so the two jobs' shares did
not add up to it (2.8 % apart). This takes each figure's mean, standard deviation and interval over
the rounds that carry both an efficiency and the split, marks every round ``complete`` or not, and
counts the others in ``rounds_excluded``. Nothing measured changes: only which rounds each mean is over.

    python -m tools.command_workloads.same_rounds reports/reference/command_workloads/interleaved.json \
        reports/reference/planner/p23-rerun/result.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_gpu_pairs.record.metrics import mean_and_std
from pytest_gpu_pairs.record.phases import HEADLINE_INTERVALS
from pytest_gpu_pairs.record.stats import interval


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
    """Each file: a benchmark JSON (every record in it) or one ``result.json``."""
    for path in map(Path, argv):
        data = json.loads(path.read_text())
        if "benchmarks" in data:
            for bench in data["benchmarks"]:
                bench["extra_info"] = _fixed(bench["extra_info"])
        else:
            data = _fixed(data)
        path.write_text(json.dumps(data, indent=4 if "benchmarks" in data else 2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
