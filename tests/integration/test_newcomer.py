"""A newcomer's and a pytest user's habits, in real pytest runs (pytester): the estimate before
spending, too many xdist workers refused, renamed options and ini options, an unrelated project that never loads
the package, and pytest-benchmark's view of a case."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from support.helpers import REPO, SUITE, jobs_started_under, pair

from integration.test_supervision import LONG_BG, OK_CASE, OK_PAIR, write_settings
from integration.test_supervision import pair as command_pair


def _settings(pytester, pairs, name="exp", **defaults):
    path = pytester.path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "defaults": defaults, "pairs": pairs}))
    return path


def _plan(pytester, *args):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest("import sys\n"
                          "def pytest_unconfigure(config):\n"
                          "    print('TORCH-LOADED', 'torch' in sys.modules)\n")
    return pytester.runpytest_subprocess("--gpu-pairs-plan", "-s", "-p", "no:cacheprovider", *args)


def test_plan_lists_every_selected_case_with_its_estimate_and_the_total_and_runs_nothing(pytester):
    settings = _settings(pytester, [pair("g01", "mnist_ff", "resnet20"), pair("g02", "mnist", "densenet121")])
    result = _plan(pytester, "--gpu-pairs-settings", settings, "--gpu-pairs-device", "cuda", "-k", "densenet")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*gpu-pairs plan (estimates; nothing runs)*",
                                 "case * estimate * basis * what it counts",
                                 "g02-mnist+densenet121-default-concurrent * profile *rounds of*",
                                 "total: * for 1 case(s) on cuda at scale 1 *", "TORCH-LOADED False"])
    assert "g01-" not in result.stdout.str()
    assert not (pytester.path / "gpu-pairs-results").exists()


def test_plan_warns_of_a_case_far_longer_than_the_rest(pytester):
    settings = _settings(pytester, [pair("g01"), pair("g02", "mnist", "mnist_rnn"), pair("g03", "mnist_ff", "mnist"),
                                    pair("g04", "resnet56", "mnist", fg_hp={"epochs": 200})], method="epoch")
    result = _plan(pytester, "--gpu-pairs-settings", settings, "--gpu-pairs-device", "cuda")
    result.stdout.fnmatch_lines(["warning: g04-resnet56+mnist-default-concurrent is estimated at *, far longer "
                                 "than the other cases*"])
    assert "warning: g01" not in result.stdout.str()


def test_ini_options_set_device_scale_and_output_folder(pytester):
    settings = _settings(pytester, [pair()])
    pytester.makeini(f"[pytest]\ngpu_pairs_settings = {settings.name}\ngpu_pairs_device = cpu\n"
                     "gpu_pairs_scale = 0.25\ngpu_pairs_out = elsewhere\ngpu_pairs_vram_budget_mb = 5000\n")
    result = _plan(pytester)
    result.stdout.fnmatch_lines(["total: * for 1 case(s) on cpu at scale 0.25 *"])
    result = _plan(pytester, "--gpu-pairs-scale", "0.5")
    result.stdout.fnmatch_lines(["total: * on cpu at scale 0.5 *"])


def test_a_bad_ini_value_is_one_line_naming_the_ini_key(pytester):
    settings = _settings(pytester, [pair()])
    pytester.makeini(f"[pytest]\ngpu_pairs_settings = {settings.name}\ngpu_pairs_scale = lots\n")
    result = _plan(pytester)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: ini option gpu_pairs_scale = 'lots': *"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_old_option_spellings_still_work_and_say_what_they_are_now(pytester):
    settings = _settings(pytester, [pair()])
    result = _plan(pytester, "--gpu-pairs-settings", settings, "--vram-budget-mb", "5000", "--sample-hz", "5")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--vram-budget-mb is now --gpu-pairs-vram-budget-mb*"])
    result.stdout.fnmatch_lines(["*--sample-hz is now --gpu-pairs-sample-hz*"])
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    for option in ("--gpu-pairs-vram-budget-mb", "--gpu-pairs-min-efficiency", "--gpu-pairs-sample-hz",
                   "--gpu-pairs-gpu-memory-mb", "--gpu-pairs-plan", "gpu_pairs_out", "gpu_pairs_device",
                   "gpu_pairs_scale", "gpu_pairs_vram_budget_mb"):
        assert option in help_text


def test_a_misspelt_model_gets_a_suggestion(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair(fg="mnsit")])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: *got 'mnsit'; did you mean 'mnist'?"])


def test_more_xdist_workers_than_gpus_are_refused_in_one_line(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair()])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "-n", "3", "--gpu-pairs-gpus", "0,1")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: -n 3 asks for more workers than GPUs (0, 1): each worker owns one GPU*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_an_unrelated_project_runs_under_xdist_and_never_loads_the_package(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    pytester.makeconftest("import sys\n"
                          "def pytest_unconfigure(config):\n"
                          "    loaded = sorted(m for m in sys.modules if m.startswith('pytest_gpu_pairs.')\n"
                          "                    and not m.startswith('pytest_gpu_pairs.plugin')\n"
                          "                    and m != 'pytest_gpu_pairs.experiment.vocabulary'\n"
                          "                    and m != 'pytest_gpu_pairs.experiment')\n"
                          "    print('LOADED', loaded, 'pydantic' in sys.modules)\n")
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["LOADED [[][]] False"])
    assert pytester.runpytest_subprocess("-n", "2").ret == 0


def test_histogram_without_pygal_is_refused_in_one_line(pytester):
    import importlib.util

    if importlib.util.find_spec("pygal") is not None:
        return
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair()])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--benchmark-histogram")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --benchmark-histogram needs pygal*"])


def test_benchmark_json_names_the_case_and_its_group_and_the_summary_reads_at_a_glance(pytester):
    tmp = pytester.path
    pytester.makepyfile(test_suite=SUITE)
    settings = write_settings(tmp, "quick", [OK_PAIR])
    args = ["--gpu-pairs-settings", str(settings), "--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(tmp / "out"),
            "-p", "no:cacheprovider", "--benchmark-json", str(tmp / "bench.json")]
    result = pytester.runpytest_subprocess(*args, timeout=600)
    assert result.ret == 0, result.stdout.str()
    bench = json.loads((tmp / "bench.json").read_text())["benchmarks"][0]
    assert bench["group"] == "g00"
    assert bench["params"] == {"case_id": OK_CASE, "group": "g00", "fg": "trainer", "bg": "loader",
                               "variant": "default", "mode": "concurrent", "sharing": "timeslice", "method": "epoch"}
    result.stdout.fnmatch_lines([f"{OK_CASE} * passed * 0:*", "status: passed, failed*"])
    result.stdout.fnmatch_lines(["not measured here (why, then [[]the record keys left empty]*",
                                 "  --gpu-pairs-device cpu: jobs train on the CPU, GPU figures do not apply  [[]* keys: *]"])
    assert "not measurable" not in result.stdout.str()
    notes = json.loads((tmp / "out" / OK_CASE / "result.json").read_text())["notes"]
    if "cpu_energy_j" in notes:  # no RAPL here: one line for the figure and its method, their reasons kept
        cpu_energy = [line for line in result.stdout.lines if "cpu_energy" in line]
        assert len(cpu_energy) == 1 and cpu_energy[0].endswith("[cpu_energy_j, cpu_energy_method]"), cpu_energy
        assert notes["cpu_energy_method"] == notes["cpu_energy_j"]
    csv_lines = (tmp / "out" / "summary.csv").read_text().splitlines()
    assert csv_lines[0].startswith("case_id,status,") and csv_lines[1].startswith(f"{OK_CASE},passed,")

    resumed = pytester.runpytest_subprocess(*args[:-2], "--gpu-pairs-resume", timeout=600)
    assert resumed.ret == 0
    resumed.stdout.fnmatch_lines([f"{OK_CASE} * resumed *"])
    assert "Benchmark fixture was not used" not in resumed.stdout.str() + resumed.stderr.str()


def test_every_case_resumed_still_writes_the_benchmark_json_with_their_records(pytester):
    from pytest_gpu_pairs.record.store import load_run

    tmp = pytester.path
    pytester.makepyfile(test_suite=SUITE)
    settings = write_settings(tmp, "quick", [OK_PAIR])
    args = ["--gpu-pairs-settings", str(settings), "--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(tmp / "out"),
            "-p", "no:cacheprovider"]
    assert pytester.runpytest_subprocess(*args, timeout=600).ret == 0
    earlier = json.loads((tmp / "out" / OK_CASE / "result.json").read_text())

    resumed = pytester.runpytest_subprocess(*args, "--gpu-pairs-resume", "--benchmark-json", str(tmp / "b.json"),
                                            timeout=600)
    assert resumed.ret == 0, resumed.stdout.str()
    output = resumed.stdout.str() + resumed.stderr.str()
    assert "Not saving anything" not in output
    resumed.stdout.fnmatch_lines(["gpu-pairs: no case was timed in this session (1 resumed from complete earlier "
                                  "results); *b.json holds their records under gpu_pairs_resumed*"])
    data = json.loads((tmp / "b.json").read_text())
    assert data["benchmarks"] == [] and data["machine_info"]["gpu_pairs"]["device"] == "cpu"
    entry, = data["gpu_pairs_resumed"]
    assert entry["group"] == "g00" and entry["params"]["case_id"] == OK_CASE
    assert entry["extra_info"]["case_id"] == OK_CASE
    assert entry["extra_info"]["fg_duration_s"] == earlier["fg_duration_s"]
    assert list(load_run(tmp / "b.json").records) == [OK_CASE]


def test_with_settings_only_in_the_ini_too_many_workers_are_refused_where_the_suite_is_collected(pytester, monkeypatch):
    pytester.makepyfile(test_suite=SUITE, test_other="def test_other():\n    pass\n")
    _settings(pytester, [pair()], name="from_ini")
    pytester.makeini("[pytest]\ngpu_pairs_settings = from_ini.json\ngpu_pairs_device = cuda\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-only-one")
    assert pytester.runpytest_subprocess("-n", "2", "test_other.py").ret == 0
    assert not (pytester.path / "gpu-pairs-results").exists()
    result = pytester.runpytest_subprocess("-n", "2", "test_suite.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*-n 2 asks for more workers than GPUs (GPU-only-one)*"])
    assert "passed" not in result.stdout.str() and "Traceback" not in result.stdout.str()
    assert "raise pytest" not in result.stdout.str()


def test_a_session_of_timed_and_resumed_cases_writes_both_into_the_benchmark_json(pytester):
    from pytest_gpu_pairs.record.store import load_run

    tmp = pytester.path
    pytester.makepyfile(test_suite=SUITE)
    settings = write_settings(tmp, "quick", [OK_PAIR, command_pair("g01", {"steps": 4, "accuracy": 0.5}, LONG_BG)])
    args = ["--gpu-pairs-settings", str(settings), "--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(tmp / "out"),
            "-p", "no:cacheprovider"]
    assert pytester.runpytest_subprocess(*args, "-k", "g00", timeout=600).ret == 0

    both = pytester.runpytest_subprocess(*args, "--gpu-pairs-resume", "--benchmark-json", str(tmp / "b.json"),
                                         timeout=600)
    assert both.ret == 0, both.stdout.str()
    assert "no case was timed" not in both.stdout.str()
    data = json.loads((tmp / "b.json").read_text())
    assert [b["params"]["case_id"] for b in data["benchmarks"]] == ["g01-trainer+loader-default-concurrent"]
    assert [e["extra_info"]["case_id"] for e in data["gpu_pairs_resumed"]] == [OK_CASE]
    assert sorted(load_run(tmp / "b.json").records) == [OK_CASE, "g01-trainer+loader-default-concurrent"]


def test_plan_under_xdist_points_to_the_planner_for_several_gpus(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair()])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-plan", "-n", "2",
                                           "--gpu-pairs-device", "cpu")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --gpu-pairs-plan * does not combine with -n; for several GPUs run: "
                                 "gpu-pairs plan SETTINGS --gpus 1,2,4"])


def test_benchmark_autosave_then_compare_on_one_machine_judges_without_a_machine_warning_and_fails_in_one_line(pytester):
    """A pytest-benchmark user's habit: save a run, compare the next with it. The saved run holds
    the GPU's part of machine_info, which a fresh session only knows once a case opened the device:
    it must not be a 'machine_info is different' warning (an INTERNALERROR where warnings are errors),
    and a regression ends in one line and exit status 1, not a traceback."""
    tmp = pytester.path
    pytester.makepyfile(test_suite=SUITE)
    settings = write_settings(tmp, "quick", [OK_PAIR])
    args = ["--gpu-pairs-settings", str(settings), "--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(tmp / "out"),
            "-p", "no:cacheprovider", "--benchmark-storage", f"file://{tmp / 'saved'}"]
    assert pytester.runpytest_subprocess(*args, "--benchmark-autosave", timeout=600).ret == 0
    [saved] = (tmp / "saved").rglob("0001_*.json")
    data = json.loads(saved.read_text())
    assert data["machine_info"]["gpu_pairs"]["device"] == "cpu"
    for entry in data["benchmarks"]:
        entry["stats"]["mean"] /= 1000  # the saved run was a thousand times faster: any new run regressed
    saved.write_text(json.dumps(data))

    compared = pytester.runpytest_subprocess(*args, "--benchmark-compare", "--benchmark-compare-fail", "mean:5%",
                                             "--benchmark-json", str(tmp / "b.json"),
                                             "-W", "error::pytest_benchmark.logger.PytestBenchmarkWarning", timeout=600)
    output = compared.stdout.str() + compared.stderr.str()
    assert compared.ret == 1, output
    assert "machine_info is different" not in output and "INTERNALERROR" not in output
    compared.stdout.fnmatch_lines(["--benchmark-compare-fail: Performance has regressed. (the regressions are listed "
                                   "above); exit status 1"])
    assert "Traceback" not in output and "PerformanceRegression" not in output
    assert f"Wrote benchmark data in: {tmp / 'b.json'}" in output and "<_io." not in output
    assert json.loads((tmp / "b.json").read_text())["benchmarks"]


SAVED_STATS = {"min": 0.5, "max": 0.7, "mean": 0.6, "stddev": 0.05, "rounds": 3, "median": 0.6, "iqr": 0.1, "q1": 0.55,
               "q3": 0.65, "iqr_outliers": 0, "stddev_outliers": 0, "outliers": "0;0", "ld15iqr": 0.5, "hd15iqr": 0.7,
               "ops": 1.67, "total": 1.8, "iterations": 1}


def test_pytest_benchmark_s_compare_command_runs_in_the_repository_without_hypothesis(tmp_path):
    """``pytest-benchmark compare`` reads the repository's pytest configuration, conftests included;
    the README's install has no Hypothesis, which only the plugin's own tests use."""
    shadow = tmp_path / "shadow" / "hypothesis"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'hypothesis'\", name='hypothesis')\n")
    saved = tmp_path / "0001_saved.json"
    saved.write_text(json.dumps({"machine_info": {}, "commit_info": {}, "datetime": "2026-01-01T00:00:00", "version": "5",
                                 "benchmarks": [{"group": "g00", "name": "test_pair[g00]", "fullname": "t.py::test_pair[g00]",
                                                 "params": None, "param": None, "extra_info": {}, "options": {},
                                                 "stats": SAVED_STATS}]}))
    path = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", "import sys; from pytest_benchmark.cli import main; sys.exit(main())",
                           "compare", str(saved)], cwd=REPO, env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "test_pair[g00]" in done.stdout and "Traceback" not in done.stderr


def test_more_cpu_workers_than_the_cores_allow_are_named_before_the_first_case(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = write_settings(pytester.path, "crowded", [OK_PAIR])
    one_cpu = ("import os, sys, pytest; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
               "sys.exit(pytest.console_main())")
    result = pytester.run(sys.executable, "-c", one_cpu, "--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                          "--gpu-pairs-out", pytester.path / "out", "-n", "2", "-p", "no:cacheprovider", "-rA", timeout=300)
    out = result.stdout.str()
    said = out.find("gpu-pairs: -n 2 on the CPU, and 1 physical core(s) here")
    assert result.ret == 0 and 0 <= said < out.find(f"PASSED test_suite.py::test_pair[{OK_CASE}]"), out
    assert jobs_started_under(pytester.path / "out") == []
