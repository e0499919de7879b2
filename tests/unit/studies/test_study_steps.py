"""The steps of the scaling and estimates studies: the emulated card from the pilot, and estimated
against measured wall time, per case and in total, from what the session left."""
import json
from pathlib import Path

from pytest_gpu_pairs.record.store import save_result, typed
from pytest_gpu_pairs.studies.collates.estimates import markdown
from pytest_gpu_pairs.studies.steps import estimates, scaling

RUN = Path(__file__).parents[2] / "data" / "h100" / "run"


def _pilot(memory):
    return {"case_id": scaling.PILOT_CASE, "design": "scaling", "mode": "scaling", "fg_model": "vulberta_mlp",
            "gpus": 2, "peak_memory_fraction": memory, "card_memory_mb": 5120.0, "failure": None, "oom": False}


def test_the_card_is_what_the_pilots_fullest_gpu_fills_to_the_predecessors_share(tmp_path, capsys):
    assert scaling.card_mb(typed(_pilot(0.5))) == 2752  # 2560 MB in use / 0.935 = 2738, up to 64 MB
    assert scaling.card_mb(typed(_pilot(None))) is None
    save_result(tmp_path / "pilot" / scaling.PILOT_CASE, _pilot(0.5))
    assert scaling.main(["card", str(tmp_path)]) == 0
    assert (tmp_path / "card.txt").read_text() == "2752\n"
    assert json.loads((tmp_path / "card.json").read_text()) == {"options": ["--gpu-pairs-gpu-memory-mb", "2752"]}


def test_without_a_pilot_the_study_runs_on_the_whole_cards_and_says_why(tmp_path, capsys):
    assert scaling.main(["card", str(tmp_path)]) == 0
    assert (tmp_path / "card.txt").read_text() == "none\n"
    assert json.loads((tmp_path / "card.json").read_text()) == {"options": []}
    assert "it runs on a GPU only" in capsys.readouterr().out


def _record(out, case_id, seconds):
    src = json.loads((RUN / case_id / "result.json").read_text())
    src.update(complete=True, timeline={"solo": [], "rounds": [], "case_start_t": 100.0, "case_end_t": 100.0 + seconds})
    save_result(out / case_id, src)


def test_the_comparison_divides_each_estimate_by_the_cases_own_wall_time(tmp_path):
    case = "g01-mnist_ff+resnet20-default-concurrent"
    _record(tmp_path, case, 50.0)
    result = estimates.compare({case: 60.0, "missing-case": 10.0}, tmp_path, session_s=80.0)
    assert result["cases"][0]["ratio"] == 60.0 / 50.0 and result["cases"][1]["measured_s"] is None
    assert result["total_estimate_s"] == 70.0 and result["cases_measured_s"] is None
    assert result["within_target"] is True  # 70 / 80 is within 25 %
    assert "| g01-mnist_ff+resnet20-default-concurrent | 60.0 | 50.0 | 1.2 |" in markdown({**result, "select": "g01"})
    assert estimates.compare({case: 200.0}, tmp_path, session_s=80.0)["within_target"] is False
    assert estimates.compare({case: 200.0}, tmp_path, session_s=None)["within_target"] is False


def test_compare_reads_the_estimate_and_the_sessions_wall_time_from_the_study_folder(tmp_path):
    case = "g01-mnist_ff+resnet20-default-concurrent"
    _record(tmp_path / "session-1", case, 50.0)
    (tmp_path / "estimate.json").write_text(json.dumps({"estimates_s": {case: 55.0}}))
    (tmp_path / "runs.json").write_text(json.dumps({"session-1": [{"exit": 2, "wall_s": 9.0}, {"exit": 0, "wall_s": 60.0}]}))
    assert estimates.main(["compare", str(tmp_path), "--select", "g01"]) == 0
    result = json.loads((tmp_path / "estimates.json").read_text())
    assert result["session_wall_s"] == 60.0 and result["pytest_exit_code"] == 0 and result["select"] == "g01"
    (tmp_path / "estimate.json").write_text(json.dumps({"estimates_s": {case: "soon"}}))
    assert estimates.main(["compare", str(tmp_path), "--select", "g01"]) == 2
