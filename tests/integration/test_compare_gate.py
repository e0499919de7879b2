"""``--gpu-pairs-compare`` in real pytest sessions (pytester subprocesses).

A case that trains takes minutes on two CPU cores, so these sessions hand the plugin recorded H100
records through the public session object (``gpu_pairs.results``), as a user's own test built on
the fixtures would; everything from option parsing to the exit status is the real path."""
import json
from pathlib import Path

from support.helpers import H100_DATA, with_rounds

from pytest_gpu_pairs.record.keys import PER_ROUND

BENCH = H100_DATA / "slice_full_scale.json"

RECORDED_SUITE = """
import json
from pytest_gpu_pairs.record.checks import CaseResult

def test_recorded_cases(gpu_pairs):
    for bench in json.loads(open({path!r}).read())["benchmarks"]:  # five rounds each
        gpu_pairs.results.append(CaseResult(case=None, record=bench["extra_info"]))
"""


def _cpu_baseline(tmp: Path, energy_factor: float) -> Path:
    """The H100 records as if measured on this (cpu) machine, with gpu_energy_j scaled."""
    data = json.loads(BENCH.read_text())
    data["machine_info"]["gpu_pairs"] = {"device": "cpu", "gpu_name": None, "driver": None,
                                         "cuda_driver_version": None}
    for bench in data["benchmarks"]:
        bench["extra_info"]["gpu_energy_j"] *= energy_factor
        bench["extra_info"] = with_rounds(bench["extra_info"], PER_ROUND)
    path = tmp / f"baseline-{energy_factor}.json"
    path.write_text(json.dumps(data))
    return path


def _session_records(tmp: Path) -> Path:
    """The H100 records as this session's, each with five rounds."""
    data = json.loads(BENCH.read_text())
    for bench in data["benchmarks"]:
        bench["extra_info"] = with_rounds(bench["extra_info"], PER_ROUND)
    path = tmp / "session-records.json"
    path.write_text(json.dumps(data))
    return path


def _run(pytester, baseline, *extra):
    pytester.makepyfile(test_recorded=RECORDED_SUITE.format(path=str(_session_records(pytester.path))))
    return pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", pytester.path / "out",
                                         "--gpu-pairs-compare", baseline, *extra)


def test_a_regression_at_session_end_prints_the_table_and_exits_1(pytester):
    # the baseline used 10 % less energy than this session: +11 % is beyond the 5 % limit
    result = _run(pytester, _cpu_baseline(pytester.path, 1 / 1.10), "--gpu-pairs-compare-fail", "gpu_energy_j:5%")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*gpu-pairs compare with *baseline-*.json*",
                                 "g01-mnist_ff+resnet20-default-concurrent  gpu_energy_j *+10.0%*REGRESSION*",
                                 "FAILED: 2 regression(s)*", "*exit status 1 even where every test passed*"])


def test_within_the_limit_the_session_passes(pytester):
    result = _run(pytester, _cpu_baseline(pytester.path, 1 / 1.02), "--gpu-pairs-compare-fail", "gpu_energy_j:5%")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*gpu_energy_j *+2.0%*ok", "passed: no regression beyond the limits*"])


def test_a_baseline_from_another_gpu_is_refused_before_any_case_runs(pytester):
    result = _run(pytester, BENCH, "--gpu-pairs-compare-fail", "gpu_energy_j:5%")
    assert result.ret == 4
    result.stdout.fnmatch_lines(["*--gpu-pairs-compare: baseline *slice_full_scale.json was measured on another "
                                 "machine (device 'NVIDIA H100 80GB HBM3' vs 'cpu')*--gpu-pairs-compare-force*"])
    assert "passed" not in result.stdout.str().splitlines()[-1]


def test_force_compares_anyway_with_a_warning(pytester):
    result = _run(pytester, BENCH, "--gpu-pairs-compare-fail", "gpu_energy_j:5%", "--gpu-pairs-compare-force")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["warning: baseline *measured on another machine*compared anyway*"])


def test_bad_thresholds_and_baselines_stop_the_session_at_once(pytester):
    pytester.makepyfile(test_recorded=RECORDED_SUITE.format(path=str(BENCH)))
    for args, message in (
            (["--gpu-pairs-compare", str(BENCH), "--gpu-pairs-compare-fail", "gpu_energy_j"], "expected METRIC:PCT"),
            (["--gpu-pairs-compare", str(pytester.path / "none.json")], "expected a readable"),
            (["--gpu-pairs-compare-fail", "gpu_energy_j:5%"], "needs a baseline")):
        result = pytester.runpytest_subprocess(*args)
        assert result.ret == 4
        result.stderr.fnmatch_lines([f"ERROR: *{message}*"])
        assert "Traceback" not in result.stderr.str()


def test_machine_info_names_the_gpu_driver_and_cuda(pytester):
    pytester.makepyfile(test_recorded=RECORDED_SUITE.format(path=str(BENCH)) +
                        "\ndef test_bench(benchmark):\n    benchmark(lambda: None)\n")
    result = pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", pytester.path / "out",
                                           "--benchmark-json", pytester.path / "bench.json")
    assert result.ret == 0
    machine = json.loads((pytester.path / "bench.json").read_text())["machine_info"]["gpu_pairs"]
    assert machine["device"] == "cpu"
    assert {"gpu_name", "driver", "cuda_driver_version", "memory_total_mb", "idle_power_w",
            "gpu_memory_mb"} <= set(machine)


def test_a_baseline_that_shares_no_case_fails_the_gate(pytester):
    data = json.loads(_cpu_baseline(pytester.path, 1.0).read_text())
    for bench in data["benchmarks"]:
        bench["extra_info"]["case_id"] = "other-" + bench["extra_info"]["case_id"]
    baseline = pytester.path / "unrelated.json"
    baseline.write_text(json.dumps(data))
    result = _run(pytester, baseline, "--gpu-pairs-compare-fail", "gpu_energy_j:5%")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["no case appears in both runs: nothing was compared",
                                 "FAILED: no case appears in both runs against *unrelated.json"])
