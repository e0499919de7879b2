"""Combining default-method studies: each case from the newest study that measured it in every
session, the gates over every study, and the committed summary as the tool writes it."""
import json
from pathlib import Path

from pytest_gpu_pairs.run.options import DEFAULT_PRECISION
from tools.default_method import combine

STUDIES = Path(__file__).resolve().parents[3] / "reports" / "reference" / "default_method"


def study(folder: Path, spreads: dict, target: float, **gates) -> Path:
    folder.mkdir()
    cases = {case: {"1": {"efficiency": 1.9, "efficiency_ci": [1.8, 2.0], "precision_target": target}}
             for case in spreads}
    summary = {"cases": cases, "efficiency_spread": spreads, "efficiency_spread_limit": 0.05,
               "sessions": {"1": {"gpu": f"gpu of {folder.name}"}}, "energy_gate_between_sessions": [{}] * 3,
               **gates}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


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


def test_a_folder_without_a_collated_summary_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text('{"cases": []}')
    assert combine.main([str(tmp_path / "broken"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "summary.json" in err and "$.cases" in err
    assert not (tmp_path / "out").exists()


def test_the_committed_summary_is_what_combine_writes_from_the_committed_studies():
    committed = json.loads((STUDIES / "summary.json").read_text())
    rebuilt = combine.combine([STUDIES / name for name in committed["studies"]])
    assert json.loads(json.dumps(rebuilt)) == committed
