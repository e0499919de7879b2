"""The comparison gate: thresholds, directions, machine checks, and the ``gpu-pairs compare`` command,
on copies of real H100 records (tests/data/h100, the first device run)."""
import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import H100_DATA, with_rounds

from pytest_gpu_pairs import cli
from pytest_gpu_pairs.analysis.compare import (
    CompareError,
    Threshold,
    compare_runs,
    direction_of,
    is_regression,
    machine_differences,
    parse_thresholds,
    verdict,
)
from pytest_gpu_pairs.record.keys import PER_ROUND
from pytest_gpu_pairs.record.store import Run, load_run

BENCH = H100_DATA / "slice_full_scale.json"
RUN_DIR = H100_DATA / "run"
CASE = "g01-mnist_ff+resnet20-default-concurrent"


def scaled_copy(tmp_path: Path, name: str = "new.json", rounds: int = 5, **factors) -> Path:
    """The H100 benchmark JSON with some record keys multiplied, e.g. gpu_energy_j=1.10, each record
    given ``rounds`` rounds 1 % apart around its values (1: the single round the records hold)."""
    data = json.loads(BENCH.read_text())
    for bench in data["benchmarks"]:
        for key, factor in factors.items():
            bench["extra_info"][key] *= factor
        if rounds > 1:
            bench["extra_info"] = with_rounds(bench["extra_info"], PER_ROUND, rounds)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def with_machine(tmp_path: Path, name: str = "other.json", **machine) -> Path:
    data = json.loads(BENCH.read_text())
    data["machine_info"]["gpu_pairs"].update(machine)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_a_10_percent_energy_regression_fails_the_gate(tmp_path, capsys):
    base, new = scaled_copy(tmp_path, "base.json"), scaled_copy(tmp_path, gpu_energy_j=1.10)
    assert cli.main(["compare", str(base), str(new), "--fail", "gpu_energy_j:5%,peak_vram_mb:3%"]) == 1
    out = capsys.readouterr().out
    assert f"{CASE}  gpu_energy_j" in out and "+10.0%" in out and "REGRESSION" in out
    assert "FAILED: 2 regression(s)" in out


def test_a_change_beyond_the_limit_with_one_round_on_a_side_cannot_be_told(tmp_path, capsys):
    new = scaled_copy(tmp_path, rounds=1, gpu_energy_j=1.10)
    assert cli.main(["compare", str(BENCH), str(new), "--fail", "gpu_energy_j:5%"]) == 0
    out = capsys.readouterr().out
    assert "+10.0%" in out and "cannot tell" in out and "REGRESSION" not in out.split("limit:")[0]
    assert "could not be judged: one round on a side" in out


def test_a_change_beyond_the_limit_inside_the_noise_is_no_regression(tmp_path, capsys):
    base = scaled_copy(tmp_path, "base.json", rounds=5)
    noisy = json.loads(base.read_text())
    for bench in noisy["benchmarks"]:
        info = bench["extra_info"]
        info["gpu_energy_j"] *= 1.06
        info["rounds"] = [{**r, "gpu_energy_j": info["gpu_energy_j"] * f} for r, f in zip(info["rounds"], (0.7, 1.3, 0.8, 1.2, 1.0))]
    new = tmp_path / "noisy.json"
    new.write_text(json.dumps(noisy))
    assert cli.main(["compare", str(base), str(new), "--fail", "gpu_energy_j:5%"]) == 0
    assert "within noise (95 % intervals overlap; 5 vs 5 rounds" in capsys.readouterr().out


def with_phase(path: Path, phase_s: float) -> Path:
    data = json.loads(path.read_text())
    for bench in data["benchmarks"]:
        bench["extra_info"]["phase_s"] = phase_s
    path.write_text(json.dumps(data))
    return path


def test_per_phase_energies_are_judged_at_the_baseline_phase_length(tmp_path, capsys):
    """Twice the phase, twice the energy: the same power is no regression; 10 % more power is."""
    base = with_phase(scaled_copy(tmp_path, "base.json"), 0.5)
    same_power = with_phase(scaled_copy(tmp_path, "same.json", gpu_energy_j=2.0, fg_gpu_energy_j=2.0), 1.0)
    assert cli.main(["compare", str(base), str(same_power), "--fail", "gpu_energy_j:5%,fg_gpu_energy_j:5%"]) == 0
    out = capsys.readouterr().out
    assert "+0.0%" in out and "NEW scaled from its 1 s phases to BASE's 0.5 s" in out
    more_power = with_phase(scaled_copy(tmp_path, "more.json", gpu_energy_j=2.2), 1.0)
    assert cli.main(["compare", str(base), str(more_power), "--fail", "gpu_energy_j:5%"]) == 1
    assert "+10.0%" in capsys.readouterr().out


def test_equal_phases_compare_energies_as_recorded(tmp_path, capsys):
    base = with_phase(scaled_copy(tmp_path, "base.json"), 0.5)
    doubled = with_phase(scaled_copy(tmp_path, "new.json", gpu_energy_j=2.0), 0.5)
    assert cli.main(["compare", str(base), str(doubled), "--fail", "gpu_energy_j:5%"]) == 1
    out = capsys.readouterr().out
    assert "+100.0%" in out and "scaled" not in out


def test_a_2_percent_energy_regression_passes_the_gate(tmp_path, capsys):
    new = scaled_copy(tmp_path, gpu_energy_j=1.02)
    assert cli.main(["compare", str(BENCH), str(new), "--fail", "gpu_energy_j:5%,peak_vram_mb:3%"]) == 0
    out = capsys.readouterr().out
    assert "+2.0%" in out and "REGRESSION" not in out.split("limit:")[0] and "passed" in out


def test_efficiency_is_judged_in_its_own_direction(tmp_path):
    better, worse = scaled_copy(tmp_path, "b.json", concurrency_efficiency=1.2), \
        scaled_copy(tmp_path, "w.json", concurrency_efficiency=0.9)
    base = scaled_copy(tmp_path, "base.json")
    assert cli.main(["compare", str(base), str(better), "--fail", "concurrency_efficiency:5"]) == 0
    assert cli.main(["compare", str(base), str(worse), "--fail", "concurrency_efficiency:5"]) == 1


def test_a_gpu_mismatch_is_refused_unless_forced(tmp_path, capsys):
    other = with_machine(tmp_path, gpu_name="NVIDIA A100-SXM4-40GB")
    assert cli.main(["compare", str(BENCH), str(other), "--fail", "gpu_energy_j:5%"]) == 2
    err = capsys.readouterr().err
    assert "measured on another machine" in err and "A100" in err and "--force" in err
    assert cli.main(["compare", str(BENCH), str(other), "--fail", "gpu_energy_j:5%", "--force"]) == 0
    assert "warning:" in capsys.readouterr().out


def test_a_driver_cuda_or_emulated_card_size_mismatch_is_refused(tmp_path, capsys):
    driver = with_machine(tmp_path, "d.json", driver="550.54.15")
    cuda = with_machine(tmp_path, "c.json", cuda_driver_version="12.4")
    smaller = with_machine(tmp_path, "m.json", gpu_memory_mb=10240)
    assert cli.main(["compare", str(BENCH), str(driver)]) == 2
    assert cli.main(["compare", str(BENCH), str(cuda)]) == 2
    assert cli.main(["compare", str(BENCH), str(smaller)]) == 2
    assert "emulated card size (--gpu-pairs-gpu-memory-mb) None vs 10240" in capsys.readouterr().err


def test_run_directory_and_result_json_read_the_machine_from_session_json(tmp_path):
    from_dir = load_run(RUN_DIR)
    single = load_run(RUN_DIR / CASE / "result.json")
    bench = load_run(BENCH)
    assert set(from_dir.records) == set(bench.records) and list(single.records) == [CASE]
    assert from_dir.machine["gpu_name"] == single.machine["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert machine_differences(bench, from_dir) == [] and machine_differences(bench, single) == []
    assert cli.main(["compare", str(RUN_DIR), str(BENCH), "--fail", "peak_vram_mb:0%"]) == 0


def test_a_metric_not_measured_in_new_fails_a_gate_on_it(tmp_path, capsys):
    data = json.loads(BENCH.read_text())
    info = data["benchmarks"][0]["extra_info"]
    info["gpu_energy_j"] = None
    info["notes"]["gpu_energy_j"] = "the NVML total-energy counter was not readable over the window"
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    assert cli.main(["compare", str(BENCH), str(new), "--fail", "gpu_energy_j:5%"]) == 1
    assert "NOT MEASURED (the NVML total-energy counter" in capsys.readouterr().out


def test_a_case_that_failed_in_new_fails_the_gate(tmp_path, capsys):
    data = json.loads(BENCH.read_text())
    data["benchmarks"][1]["extra_info"].update(oom=True, failure="foreground mnist ran out of memory")
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    assert cli.main(["compare", str(BENCH), str(new), "--fail", "peak_vram_mb:3%"]) == 1
    assert "failed in" in capsys.readouterr().out


def test_cases_are_matched_by_id_and_the_unmatched_are_listed():
    base = load_run(BENCH)
    new = Run("new", {CASE: copy.deepcopy(base.records[CASE]), "x-new": {"case_id": "x-new"}}, dict(base.machine))
    comparison = compare_runs(base, new, parse_thresholds("gpu_energy_j:5%"))
    assert {row.case_id for row in comparison.rows} == {CASE}
    assert comparison.missing_in_new == ["s01-mnist+resnet20-default-concurrent"]
    assert comparison.new_cases == ["x-new"]
    assert comparison.failed and comparison.unjudged == ["1 baseline case(s) missing from new"]
    selected = compare_runs(base, new, parse_thresholds("gpu_energy_j:5%"), expected=[CASE, "x-new"])
    assert selected.missing_in_new == [] and not selected.failed  # a case not selected is not missing


def test_a_gate_between_runs_that_share_no_case_fails(capsys, tmp_path):
    base = load_run(BENCH)
    new = Run("new", {"x-new": {"case_id": "x-new", "gpu_energy_j": 1.0}}, dict(base.machine))
    comparison = compare_runs(base, new, parse_thresholds("gpu_energy_j:5%"))
    assert comparison.failed and "no case appears in both runs" in comparison.unjudged
    assert verdict(comparison).startswith("FAILED")
    assert not compare_runs(base, new).failed  # without limits nothing can fail


@pytest.mark.parametrize("base_value, new_value, status", [
    (None, 1.0, "NO BASELINE VALUE"), (1.0, None, "NOT MEASURED"), (None, None, "NOT MEASURED in either")])
def test_an_unmeasured_gated_figure_fails_with_the_reason(base_value, new_value, status):
    base = Run("base", {"c": {"case_id": "c", "gpu_energy_j": base_value, "notes": {"gpu_energy_j": "no counter"}}})
    new = Run("new", {"c": {"case_id": "c", "gpu_energy_j": new_value, "notes": {"gpu_energy_j": "no counter"}}})
    comparison = compare_runs(base, new, parse_thresholds("gpu_energy_j:5%"))
    row = next(r for r in comparison.rows if r.metric == "gpu_energy_j")
    assert comparison.failed and row.regression and row.status == status and row.reason == "no counter"


@pytest.mark.parametrize("text, message", [
    ("gpu_energy_j", "expected METRIC:PCT"),
    ("gpu_energy:5%", "expected a recorded metric"),
    ("gpu_energy_j:five", "expected a percentage"),
    ("gpu_energy_j:-1%", "expected a percentage"),
])
def test_bad_thresholds_are_one_clear_line(tmp_path, capsys, text, message):
    assert cli.main(["compare", str(BENCH), str(BENCH), "--fail", text]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --fail: ") and message in err and "\n" not in err


def test_bad_inputs_name_the_file_and_what_was_expected(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"benchmarks": [{"extra_info": {}}]}))
    for path, message in ((broken, "invalid JSON"), (other, "expected gpu-pairs records"),
                          (tmp_path / "missing.json", "expected a readable"), (tmp_path, "expected a gpu-pairs run")):
        assert cli.main(["compare", str(path), str(BENCH)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {path}: $") and message in err and "\n" not in err


def test_directions_are_documented_by_name():
    assert direction_of("gpu_energy_j") == direction_of("peak_vram_mb") == direction_of("fg_slowdown") == "lower"
    assert direction_of("concurrency_efficiency") == direction_of("bg_progress_ratio") == "higher"
    assert direction_of("energy_saved_vs_serial") == "higher" and direction_of("mps_server_vram_mb") == "lower"
    assert direction_of("perf.test_accuracy") == "higher" and direction_of("perf.eval_loss") == "lower"
    assert direction_of("case_id") is None


@given(base=st.floats(1e-3, 1e6), change=st.floats(-0.9, 3.0), pct=st.floats(0, 50),
       direction=st.sampled_from(["lower", "higher"]))
def test_a_regression_is_exactly_a_change_beyond_the_limit_in_the_bad_direction(base, change, pct, direction):
    new = base * (1 + change)
    worse = (new - base) / base if direction == "lower" else (base - new) / base
    flagged = is_regression(base, new, Threshold("m", pct, direction))
    if not math.isclose(worse, pct / 100, rel_tol=1e-9, abs_tol=1e-12):
        assert flagged == (worse > pct / 100)


def test_parse_accepts_percent_signs_spaces_and_perf_metrics():
    parsed = parse_thresholds(" gpu_energy_j:5% , perf.test_accuracy:1,peak_vram_mb:3 ")
    assert [(t.metric, t.pct, t.direction) for t in parsed] == [
        ("gpu_energy_j", 5.0, "lower"), ("perf.test_accuracy", 1.0, "higher"), ("peak_vram_mb", 3.0, "lower")]
    with pytest.raises(CompareError):
        parse_thresholds("nosuch:1")


def interleaved_run(tmp_path: Path, name: str, pace: float = 1.0, pair: float = 1.0, n: int = 8) -> Path:
    """An interleaved record whose rounds hold the energies compare judges per unit of work.
    ``pace`` scales every energy alike (a host that does more steps per phase); ``pair`` scales
    only what the pair spent (sharing got worse or better)."""
    rounds = []
    for i in range(n):
        wobble = 1 + 0.01 * ((i % 3) - 1)
        fg_alone, bg_alone = 20.0 * pace * wobble, 60.0 * pace * wobble
        above = 0.8 * (fg_alone + bg_alone) * pair
        fg_j = fg_alone + (above - fg_alone - bg_alone) / 2
        rounds.append({"complete": True, "concurrency_efficiency": 1.9 * wobble, "gpu_energy_j": above + 40.0 * pace,
                       "gpu_energy_above_idle_j": above, "fg_gpu_energy_j": fg_j, "bg_gpu_energy_j": above - fg_j,
                       "fg_alone_energy_j": fg_alone, "bg_alone_energy_j": bg_alone,
                       "serial_energy_j": (fg_alone + bg_alone + 60.0) * pace})
    record = {"case_id": CASE, "method": "interleaved", "device": "NVIDIA H100 80GB HBM3", "phase_s": 0.5,
              "interval_method": "student_t_lag1", "rounds": rounds, "failure": None, "oom": False}
    for key in ("concurrency_efficiency", "gpu_energy_j", "gpu_energy_above_idle_j", "fg_gpu_energy_j",
                "bg_gpu_energy_j", "serial_energy_j"):
        record[key] = sum(r[key] for r in rounds) / n
    path = tmp_path / name
    path.write_text(json.dumps({"machine_info": {"gpu_pairs": {"device": "NVIDIA H100 80GB HBM3"}},
                                "benchmarks": [{"name": f"test_pair[{CASE}]", "extra_info": record}]}))
    return path


def test_interleaved_energies_are_judged_per_unit_of_work_so_a_faster_host_is_no_regression(tmp_path, capsys):
    base = interleaved_run(tmp_path, "base.json")
    faster_host = interleaved_run(tmp_path, "faster.json", pace=1.10)
    gate = ["--fail", "gpu_energy_j:5%,gpu_energy_above_idle_j:5%,fg_gpu_energy_j:5%,bg_gpu_energy_j:5%"]
    assert cli.main(["compare", str(base), str(faster_host), *gate]) == 0
    out = capsys.readouterr().out
    assert "judged per unit of work" in out and "as measured" in out and "(+10.0%)" in out
    worse_sharing = interleaved_run(tmp_path, "worse.json", pair=1.10)
    assert cli.main(["compare", str(base), str(worse_sharing), *gate]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out.split("limit:")[0] and "+10.0%" in out


def test_records_without_stand_alone_energies_judge_shares_at_the_phase_length(tmp_path, capsys):
    base = json.loads(interleaved_run(tmp_path, "base.json").read_text())
    for bench in base["benchmarks"]:
        for r in bench["extra_info"]["rounds"]:
            del r["fg_alone_energy_j"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(base))
    faster_host = interleaved_run(tmp_path, "faster.json", pace=1.10)
    assert cli.main(["compare", str(old), str(faster_host), "--fail", "fg_gpu_energy_j:5%"]) == 1
    assert "judged per unit of work" not in capsys.readouterr().out


def _paced(fg_rate: float, bound=None) -> dict:
    return {"fg_solo_steps_per_s": fg_rate, "bg_solo_steps_per_s": 100.0, "efficiency_bound": bound}


def test_a_pace_that_held_is_not_named():
    from pytest_gpu_pairs.analysis.compare import pace_note
    assert pace_note(_paced(100.0, 2.0), _paced(103.0, 2.0)) is None


def test_a_moved_pace_says_whether_the_cards_time_limited_the_pair():
    from pytest_gpu_pairs.analysis.compare import pace_note
    spare = pace_note(_paced(100.0, 2.0), _paced(120.0, 2.0))
    assert "fg +20.0%" in spare and "time to spare at both paces" in spare
    limited = pace_note(_paced(100.0, 1.62), _paced(120.0, 1.41))
    assert "at most 1.62 in BASE and 1.41 in NEW" in limited
    unknown = pace_note(_paced(100.0), _paced(120.0))
    assert "contends for the GPU" in unknown


@pytest.mark.parametrize("metric, extra", [("peak_vram_mb", {}),
                                           ("vram_fit_mb", {"vram_uncertainty_mb": 3.0})])
def test_a_memory_peak_that_moved_beyond_its_limit_is_a_regression_with_one_reading_a_side(tmp_path, capsys, metric,
                                                                                           extra):
    """A peak is one reading per run, not a mean of rounds: the gate judges it against its limit and
    the readings' resolution, never "cannot tell"."""
    def run(name, mb):
        data = json.loads(BENCH.read_text())
        for bench in data["benchmarks"]:
            bench["extra_info"].update({metric: mb, **extra})
        path = tmp_path / name
        path.write_text(json.dumps(data))
        return path

    base = run("base.json", 4640.0)
    assert cli.main(["compare", str(base), str(run("big.json", 13216.0)), "--fail", f"{metric}:3%"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "resolution" in out and "cannot tell" not in out
    assert cli.main(["compare", str(base), str(run("edge.json", 4640.0 * 1.03 + 2.0)), "--fail", f"{metric}:3%"]) == 0
    assert "within resolution" in capsys.readouterr().out
    assert cli.main(["compare", str(base), str(run("same.json", 4641.0)), "--fail", f"{metric}:3%"]) == 0
