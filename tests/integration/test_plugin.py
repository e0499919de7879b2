"""The plugin as pytest users meet it, run in real pytest subprocesses (pytester)."""
import json

from support.helpers import SUITE, pair


def _settings(pytester, pairs, name="exp"):
    path = pytester.path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "pairs": pairs}))
    return path


def test_cases_are_collected_with_stable_ids(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair("g01", "mnist_ff", "resnet20"), pair("g02", "mnist", "densenet121")])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_suite.py::test_pair[[]g01-mnist_ff+resnet20-default-concurrent[]]",
                                 "test_suite.py::test_pair[[]g02-mnist+densenet121-default-concurrent[]]",
                                 "2 tests collected*"])


def test_k_selects_exactly_the_cases_of_a_model(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair("g01", "mnist_ff", "resnet20"), pair("g02", "mnist", "densenet121"),
                                    pair("g03", "densenet121", "resnet20")])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--collect-only", "-q", "-k", "densenet")
    result.stdout.fnmatch_lines(["*g02-mnist+densenet121*", "*g03-densenet121+resnet20*", "2/3 tests collected*"])


def test_collection_never_imports_torch(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest("import sys\n"
                          "def pytest_collection_finish(session):\n"
                          "    print('TORCH-LOADED', 'torch' in sys.modules)\n")
    settings = _settings(pytester, [pair()])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--collect-only", "-q", "-s")
    result.stdout.fnmatch_lines(["TORCH-LOADED False"])


def test_settings_given_twice_are_merged(pytester):
    pytester.makepyfile(test_suite=SUITE)
    first = _settings(pytester, [pair("a1")], name="one")
    second = _settings(pytester, [pair("b1", "mnist", "mnist_rnn")], name="two")
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", first, "--gpu-pairs-settings", second,
                                           "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*a1-mnist_ff+resnet20*", "*b1-mnist+mnist_rnn*", "2 tests collected*"])


def test_ini_names_the_default_settings(pytester):
    pytester.makepyfile(test_suite=SUITE)
    _settings(pytester, [pair("ini1")], name="from_ini")
    pytester.makeini("[pytest]\ngpu_pairs_settings = from_ini.json\n")
    result = pytester.runpytest_subprocess("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*ini1-mnist_ff+resnet20*"])


def test_bad_settings_are_one_error_line_and_exit_code_4(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair(fg="nosuchnet")])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: {settings}: $.pairs[[]0[]].foreground.model: expected a built-in workload*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_missing_settings_file_is_a_usage_error(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", "missing.json")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: missing.json: $: expected a readable JSON file*"])


def test_duplicate_case_ids_are_a_usage_error(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair("g01"), pair("g01")])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: *case id 'g01-mnist_ff+resnet20-default-concurrent' appears twice*"])


def test_unimplemented_workloads_are_skipped_with_the_reason(pytester):
    from pytest_gpu_pairs.catalog import BUILTINS

    missing = [name for name, w in BUILTINS.items() if not w.implemented]
    if not missing:
        return
    pytester.makepyfile(test_suite=SUITE)
    settings = _settings(pytester, [pair("g01", "mnist", missing[0])])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "-rs", "--gpu-pairs-device", "cpu")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*built-in workload '{missing[0]}' is not implemented*"])


def test_options_are_documented_in_help(pytester):
    result = pytester.runpytest_subprocess("--help")
    for option in ("--gpu-pairs-settings", "--gpu-pairs-device", "--gpu-pairs-scale", "--gpu-pairs-vram-budget-mb",
                   "--gpu-pairs-min-efficiency", "--gpu-pairs-sample-hz", "--gpu-pairs-out", "--gpu-pairs-resume"):
        result.stdout.fnmatch_lines([f"*{option}*"])


def test_invalid_option_values_are_refused(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--gpu-pairs-scale", "0", "--collect-only")
    assert result.ret == 4
    result = pytester.runpytest_subprocess("--gpu-pairs-device", "tpu", "--collect-only")
    assert result.ret == 4
