"""The shipped hp_study settings collected by a real pytest session: its cases and -k selection."""
from support.helpers import REPO, SUITE


def test_collecting_the_shipped_study_lists_its_cases_and_selects_variants(pytester):
    pytester.makepyfile(test_suite=SUITE)
    study = REPO / "settings" / "concurrent_hp_study.json"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", study, "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_pair[[]hp01-mnist+none-default-solo[]]", "132 tests collected*"])
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", study, "--collect-only", "-q",
                                           "-k", "densenet121 and lr_max and hp01")
    result.stdout.fnmatch_lines(["*hp01-densenet121+none-lr_max-solo*", "*hp01-densenet121+mnist-lr_max-concurrent*",
                                 "2/132 tests collected*"])
