"""The collates whose summary is a report of files: teardown's evidence table, the estimates table, the
sharing study's MPS limits from the runner's folders. Bad input is one line naming the file and where."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.studies.collates import estimates, sharing, teardown

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "reports" / "reference"
RUN = ROOT / "tests" / "data" / "h100" / "run"


def test_teardown_evidence_that_is_not_json_lines_is_one_line(tmp_path, capsys):
    lines = (REFERENCE / "teardown" / "evidence.jsonl").read_text().splitlines()
    (tmp_path / "evidence.jsonl").write_text("\n".join([lines[0], "{not json", *lines[2:]]))
    assert main(["study", "collect", "teardown", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'evidence.jsonl'}: line 2: $: expected valid JSON" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "teardown.md").exists()


def test_a_phase_missing_from_the_evidence_is_said_not_passed(tmp_path):
    lines = [line for line in (REFERENCE / "teardown" / "evidence.jsonl").read_text().splitlines()
             if '"after_sigterm"' not in line]
    (tmp_path / "evidence.jsonl").write_text("\n".join(lines))
    assert "| after_sigterm | - | - | - | - | MISSING |" in teardown.write(tmp_path, ROOT)


def test_an_estimates_comparison_without_its_totals_is_refused(tmp_path):
    data = json.loads((REFERENCE / "estimates" / "estimates.json").read_text())
    del data["session_wall_s"]
    (tmp_path / "estimates.json").write_text(json.dumps(data))
    with pytest.raises(SettingsError, match=r"\$\.session_wall_s: expected the totals"):
        estimates.write(tmp_path, ROOT)


def test_the_limits_runs_the_runner_left_are_read_through_the_store(tmp_path):
    shutil.copy(REFERENCE / "sharing" / "m05_bench.json", tmp_path)
    shutil.copytree(RUN, tmp_path / "limits" / "a_ballast_10240")
    (tmp_path / "limits" / "leftover-mps.txt").write_text("")
    (tmp_path / "runs.json").write_text(json.dumps({"limits/a_ballast_10240": [{"exit": 2}, {"exit": 1}]}))
    text = sharing.write(tmp_path, ROOT)
    limits = json.loads((tmp_path / "mps_limits.json").read_text())
    run = limits["runs"]["a_ballast_10240"]
    assert run["exit_code"] == 1 and run["cases"] and all(c["case_id"] for c in run["cases"])
    assert limits["leftovers"] == {"leftover-mps.txt": ""}
    assert "| a_ballast_10240 | 1 |" in text and (tmp_path / "sharing_mps.md").is_file()
