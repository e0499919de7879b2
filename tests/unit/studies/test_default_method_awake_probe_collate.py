"""The awake probe's collate: a foreground faster beside the keeper only beyond its interval, a
runner's results folder read as the committed benchmark file is, a folder without the probe one line."""
import json
from pathlib import Path

import pytest

from pytest_gpu_pairs.record.store import StoreError
from pytest_gpu_pairs.studies.collates import default_method_awake_probe as awake

ROOT = Path(__file__).resolve().parents[3]
PROBE = ROOT / "reports" / "reference" / "default_method" / "awake-probe"


def _as_runner_left_it(tmp_path: Path, change=lambda record: record) -> Path:
    """The committed probe's records as ``gpu-pairs study run`` leaves them: ``awake/<case>/result.json``."""
    for bench in json.loads((PROBE / "awake.json").read_text())["benchmarks"]:
        record = change(bench["extra_info"])
        case = tmp_path / "awake" / record["case_id"]
        case.mkdir(parents=True)
        (case / "result.json").write_text(json.dumps(record))
    return tmp_path


def test_the_committed_probe_found_no_job_faster_beside_the_keeper():
    summary = awake.summarize(PROBE, ROOT)
    assert summary["faster_beside_the_keeper"] == [] and len(summary["cases"]) == 2
    assert all(c["fg_slowdown_ci"][0] < 1.0 < c["fg_slowdown_ci"][1] for c in summary["cases"].values())


def test_a_runners_folder_gives_the_same_cases_and_a_slowdown_wholly_below_one_is_faster(tmp_path):
    kept = awake.summarize(PROBE, ROOT)
    assert awake.summarize(_as_runner_left_it(tmp_path / "same"), ROOT)["cases"] == kept["cases"]

    def quicker(record):
        return {**record, "fg_slowdown": 0.9, "fg_slowdown_ci": [0.85, 0.95]} if record["case_id"].startswith("a01") \
            else record

    summary = awake.summarize(_as_runner_left_it(tmp_path / "quicker", quicker), ROOT)
    assert [c.split("-")[0] for c in summary["faster_beside_the_keeper"]] == ["a01"]
    assert "beyond the interval: a01." in awake.table(summary)


def test_a_folder_without_the_probe_is_one_line_naming_it(tmp_path):
    with pytest.raises(StoreError, match="not an awake probe") as raised:
        awake.summarize(tmp_path, ROOT)
    assert str(tmp_path) in str(raised.value) and len(str(raised.value).splitlines()) == 1
