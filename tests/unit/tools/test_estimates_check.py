"""tools/estimates/check.py: estimated against measured, per case and in total."""
import json

from tools.estimates import check


def _record(out, case_id, seconds):
    folder = out / case_id
    folder.mkdir(parents=True)
    src = json.loads((check.Path(__file__).parents[2] / "data/h100/run" / case_id / "result.json").read_text())
    src.update(complete=True, timeline={"solo": [], "rounds": [], "case_start_t": 100.0, "case_end_t": 100.0 + seconds})
    (folder / "result.json").write_text(json.dumps(src))


def test_the_comparison_divides_each_estimate_by_the_cases_own_wall_time(tmp_path):
    case = "g01-mnist_ff+resnet20-default-concurrent"
    _record(tmp_path, case, 50.0)
    result = check.compare({case: 60.0, "missing-case": 10.0}, tmp_path, session_s=80.0)
    assert result["cases"][0]["ratio"] == 60.0 / 50.0 and result["cases"][1]["measured_s"] is None
    assert result["total_estimate_s"] == 70.0 and result["cases_measured_s"] is None
    assert result["within_target"] is True  # 70 / 80 is within 25 %
    assert "| g01-mnist_ff+resnet20-default-concurrent | 60.0 | 50.0 | 1.2 |" in check.markdown(result, "g01")
    assert check.compare({case: 200.0}, tmp_path, session_s=80.0)["within_target"] is False
