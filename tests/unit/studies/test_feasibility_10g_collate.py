"""The feasibility table is made from the committed records: each group's row says what was measured,
and a reading above 2 never reaches the table as a figure."""
from pathlib import Path

from pytest_gpu_pairs.studies.collates.feasibility_10g import markdown, summarize

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "reports/reference/feasibility_10g"


def _result():
    return summarize(FOLDER, ROOT)


def test_every_group_has_a_row_and_all_twelve_were_measured_time_sliced():
    result = _result()
    assert [g["group"] for g in result["groups"]] == [f"g{i:02d}" for i in range(1, 13)]
    assert result["measured"]["timeslice"] == 12


def test_a_pair_over_the_budget_is_said_to_be_over_it():
    rows = {g["group"]: g for g in _result()["groups"]}
    assert rows["g09"]["timeslice"]["within_budget"] is False
    assert rows["g12"]["timeslice"]["within_budget"] is True


def test_a_reading_above_two_is_not_printed_as_a_figure():
    result = _result()
    table = markdown(result)
    above = [g for g in result["groups"] if g["timeslice"]["efficiency"]["above_bound"]]
    assert above
    for group in above:
        row = next(line for line in table.splitlines() if line.startswith(f"| {group['group']} "))
        assert "about 2 (read" in row

