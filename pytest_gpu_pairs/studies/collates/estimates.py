"""The estimates study's table: ``--gpu-pairs-plan``'s estimate of each case beside the case's measured
wall time, and the total beside the pytest session's, from the comparison the run's last step wrote
(``estimates.json``: the estimates taken before the session, the measured times read through the store).

    gpu-pairs study collect estimates --out reports/reference/estimates
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpu_pairs.inputs import SettingsError, read_json
from pytest_gpu_pairs.record.store import atomic_write_text

COMPARISON = "estimates.json"
TABLE = "estimates.md"
_TOTALS = ("total_estimate_s", "cases_measured_s", "session_wall_s", "ratio_to_session", "within", "within_target")


def read_comparison(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not isinstance(data.get("select"), str):
        raise SettingsError(path, "$", "expected the estimates comparison: cases, totals and the selection")
    for index, case in enumerate(data["cases"]):
        if not isinstance(case, dict) or not isinstance(case.get("case_id"), str):
            raise SettingsError(path, f"$.cases[{index}]", "expected a case with its case_id and figures")
    missing = [key for key in _TOTALS if key not in data]
    if missing:
        raise SettingsError(path, f"$.{missing[0]}", "expected the totals of the comparison")
    return data


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Estimate against measured wall time: -k {result['select']}", "",
             "| case | estimate s | measured s | estimate / measured |", "| --- | --- | --- | --- |"]
    lines += [f"| {c['case_id']} | {_number(c.get('estimate_s'))} | {_number(c.get('measured_s'))} | "
              f"{_number(c.get('ratio'))} |" for c in result["cases"]]
    lines += ["", f"Total: estimate {_number(result['total_estimate_s'])} s; the cases' own wall time "
              f"{_number(result['cases_measured_s'])} s; the pytest session {_number(result['session_wall_s'])} s "
              f"(ratio {_number(result['ratio_to_session'])}; target within ±{result['within']:.0%}: "
              f"{'met' if result['within_target'] else 'not met'})."]
    return "\n".join(lines) + "\n"


def write(folder: Path, root: Path) -> str:
    text = markdown(read_comparison(folder / COMPARISON))
    atomic_write_text(folder / TABLE, text)
    return text
