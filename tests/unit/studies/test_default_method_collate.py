"""Combining default-method studies: each case from the newest study that measured it in every
session, the gates over every study, and a folder that holds no study is one line naming it."""
import json
from pathlib import Path

import pytest

from pytest_gpu_pairs.record.store import StoreError
from pytest_gpu_pairs.run.options import DEFAULT_PRECISION
from pytest_gpu_pairs.studies.collates import default_method as combine


def study(folder: Path, spreads: dict, target: float, **gates) -> tuple[str, dict]:
    cases = {case: {"1": {"efficiency": 1.9, "efficiency_ci": [1.8, 2.0], "precision_target": target}}
             for case in spreads}
    summary = {"cases": cases, "efficiency_spread": spreads, "efficiency_spread_limit": 0.05,
               "sessions": {"1": {"gpu": f"gpu of {folder.name}"}}, "energy_gate_between_sessions": [{}] * 3,
               **gates}
    return folder.name, json.loads(json.dumps(summary))


def test_a_case_comes_from_the_newest_study_that_spread_it(tmp_path):
    new = study(tmp_path / "new", {"g01": 0.02, "g10": None}, DEFAULT_PRECISION, energy_gate_false_alarms=0,
                energy_gate_catches_heavy=True, benchmark_compare_fail_ok=True)
    old = study(tmp_path / "old", {"g01": 0.09, "g10": 0.03}, 0.03, energy_gate_false_alarms=1,
                energy_gate_catches_heavy=True, benchmark_compare_fail_ok=False,
                finite_script_cases_passed=6, finite_script_case_sessions=6)
    summary = combine.combine([new, old])
    assert summary["cases"]["g01"]["study"] == "new" and summary["cases"]["g10"]["study"] == "old"
    assert summary["efficiency_spread"] == {"g01": 0.02, "g10": 0.03} and summary["efficiency_spread_max"] == 0.03
    assert summary["cases_not_at_current_target"] == ["g10"]
    assert summary["energy_gate_false_alarms"] == 1 and summary["energy_gate_session_pairs"] == 6
    assert summary["energy_gate_catches_heavy"] is True and summary["benchmark_compare_fail_ok"] is False
    assert summary["finite_script_cases_passed"] == 6 and summary["finite_script_case_sessions"] == 6


def test_a_gate_no_study_could_judge_stays_unknown(tmp_path):
    only = study(tmp_path / "only", {"g01": 0.02}, DEFAULT_PRECISION)
    summary = combine.combine([only])
    assert summary["energy_gate_catches_heavy"] is None and summary["benchmark_compare_fail_ok"] is None


def test_a_folder_without_sessions_is_one_line_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="empty: no session-") as raised:
        combine.summarize(tmp_path / "empty", tmp_path)
    assert len(str(raised.value).splitlines()) == 1
