"""``gpu-pairs sharing-report``: grouping by pair and mechanism, spread, recommendation, outputs."""
import json
import shutil
import tarfile

import pytest
from support.helpers import H100_DATA

from pytest_gpu_pairs.analysis.sharing import compare, load_records, recommend, summarise_mechanism
from pytest_gpu_pairs.cli import main
from pytest_gpu_pairs.record.store import save_result


def _record(pair, sharing, effs, saved, failure=None):
    case_id = f"{pair}-densenet121+pcb-default-concurrent" + ("-mps" if sharing == "mps" else "")
    rounds = [{"concurrency_efficiency": e, "energy_saved_vs_serial": s, "fg_slowdown": 1.5, "failure": failure}
              for e, s in zip(effs, saved)]
    return {"case_id": case_id, "sharing": sharing, "mode": "concurrent", "fg_model": "densenet121",
            "bg_model": "pcb", "device": "NVIDIA H100 80GB HBM3", "rounds": rounds, "failure": failure,
            "oom": False, "energy_split_method": "progress_x_solo_energy" if sharing == "mps" else "sm_util",
            "concurrency_efficiency": sum(effs) / len(effs)}


RECORDS = [_record("m01", "timeslice", [1.38, 1.40, 1.42], [0.12, 0.13, 0.14]),
           _record("m01", "mps", [1.80, 1.83, 1.86], [0.30, 0.31, 0.32]),
           _record("m02", "timeslice", [1.50, 1.60, 1.70], [0.20, 0.25, 0.30]),
           _record("m02", "mps", [1.55, 1.62, 1.66], [0.22, 0.24, 0.29])]


def test_pairs_are_grouped_across_mechanisms_with_mean_and_spread():
    entries = compare(RECORDS)
    assert [e["pair"] for e in entries] == ["m01-densenet121+pcb-default-concurrent",
                                            "m02-densenet121+pcb-default-concurrent"]
    mps = entries[0]["mechanisms"]["mps"]["concurrency_efficiency"]
    assert mps["mean"] == pytest.approx(1.83) and mps["std"] == pytest.approx(0.03) and mps["n"] == 3


def test_recommendation_needs_a_difference_beyond_the_spread():
    first, second = compare(RECORDS)
    assert first["recommended"] == "mps" and "efficiency 1.83 vs 1.4" in first["reason"]
    assert second["recommended"] == "timeslice" and "no difference beyond the spread" in second["reason"]


def test_a_mechanism_that_failed_every_round_is_not_recommended():
    failed = _record("m01", "mps", [1.9, 1.9, 1.9], [0.3, 0.3, 0.3], failure="sharing mps: no server")
    mechanisms = {"timeslice": summarise_mechanism(RECORDS[0]), "mps": summarise_mechanism(failed)}
    choice, reason = recommend(mechanisms)
    assert choice == "timeslice" and "only timeslice measured usably" in reason


def test_energy_decides_when_efficiency_is_within_the_spread():
    ts = _record("m03", "timeslice", [1.5, 1.6, 1.7], [0.10, 0.11, 0.12])
    mps = _record("m03", "mps", [1.5, 1.6, 1.7], [0.20, 0.21, 0.22])
    entry = compare([ts, mps])[0]
    assert entry["recommended"] == "mps" and entry["reason"].startswith("energy saved")


def test_report_files_and_cli_from_benchmark_json_results_dir_and_tgz(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"benchmarks": [{"extra_info": r} for r in RECORDS[:2]]}))
    results = tmp_path / "results"
    for record in RECORDS[2:]:
        save_result(results / record["case_id"], record)
        for n, round_ in enumerate(record["rounds"], 1):  # as a case with repeats saves them
            save_result(results / record["case_id"] / f"round-{n:02d}", {**record, **round_, "rounds": None})
    with tarfile.open(tmp_path / "results.tgz", "w:gz") as archive:
        archive.add(results, arcname="results")
    assert len(load_records([bench, results])) == 4 and len(load_records([tmp_path / "results.tgz"])) == 2

    out = tmp_path / "reports" / "sharing_mps"
    assert main(["sharing-report", str(bench), str(tmp_path / "results.tgz"), "--out", str(out)]) == 0
    report = json.loads(out.with_suffix(".json").read_text())
    assert [p["recommended"] for p in report["pairs"]] == ["mps", "timeslice"]
    text = out.with_suffix(".md").read_text()
    assert "| m01-densenet121+pcb-default-concurrent | mps | 3 | 1.83 ± 0.03 | 31.00 ± 1.00 % |" in text
    assert "| m02-densenet121+pcb-default-concurrent | timeslice | 3 | 1.60 ± 0.10 | 25.00 ± 5.00 % |" in text
    assert out.with_suffix(".png").exists() and report["plot"] == "sharing_mps.png"
    assert "Recommendations" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"not": "benchmarks"}))
    assert main(["sharing-report", str(bad), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{bad}: $: expected pytest-benchmark JSON" in err


def test_terminal_summary_compares_pairs_measured_both_ways():
    from pytest_gpu_pairs.plugin.summary import sharing_lines

    lines = sharing_lines(RECORDS + [_record("m09", "timeslice", [1.5], [0.1])])
    assert lines[0] == "sharing (timeslice vs mps):" and len(lines) == 3  # m09 has one mechanism only
    assert "m01-densenet121+pcb-default-concurrent: efficiency timeslice 1.40, mps 1.83 -> mps" in lines[1]


def test_a_single_round_per_mechanism_recommends_nothing():
    from pytest_gpu_pairs.analysis.sharing import recommend

    def summary(eff):
        return {"concurrency_efficiency": {"mean": eff, "std": 0.0, "n": 1, "values": [eff]},
                "energy_saved_vs_serial": {"mean": 0.1, "std": 0.0, "n": 1, "values": [0.1]},
                "oom": False, "failed_rounds": 0, "repeats": 1}

    choice, reason = recommend({"timeslice": summary(1.5), "mps": summary(1.9)})
    assert choice is None and "undecided" in reason and "favour mps" in reason


def test_a_mechanism_never_measured_is_no_reason_to_recommend_the_other():
    from pytest_gpu_pairs.analysis.sharing import recommend

    measured = {"concurrency_efficiency": {"mean": 1.8, "std": 0.1, "n": 3, "values": [1.7, 1.8, 1.9]},
                "energy_saved_vs_serial": {"mean": 0.2, "std": 0.0, "n": 3, "values": [0.2] * 3},
                "oom": False, "failed_rounds": 0, "repeats": 3}
    choice, reason = recommend({"timeslice": measured})
    assert choice is None and reason == "not compared: mps was not measured"


def test_a_case_found_in_two_inputs_is_refused_naming_both(tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(H100_DATA / "run", copy)
    assert main(["sharing-report", str(H100_DATA / "run"), str(copy), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu-pairs sharing-report: {copy}: case ") and f"is also in {H100_DATA / 'run'}" in err
    assert err.count("\n") == 1
