"""The options module: the defaults its help names are the run layer's, and old spellings are named."""
from pytest_gpu_pairs.plugin import options
from pytest_gpu_pairs.run import options as run_options


def test_the_help_names_the_run_layers_interleaved_limits():
    assert run_options.MAX_ROUNDS is None  # the help says the time cap is the only limit
    assert options.MAX_CASE_S_HELP == run_options.MAX_CASE_S
    assert options.MAX_CASE_S_CPU_HELP == run_options.MAX_CASE_S_CPU
    assert options.PRECISION_HELP == run_options.DEFAULT_PRECISION


def test_each_old_spelling_on_the_command_line_gets_one_line_naming_the_new_one():
    lines = options.renamed_spellings(["--vram-budget-mb=5000", "--gpu-pairs-scale", "0.1", "--sample-hz", "5"])
    assert lines == ["--vram-budget-mb is now --gpu-pairs-vram-budget-mb; the old spelling goes away in the next release",
                     "--sample-hz is now --gpu-pairs-sample-hz; the old spelling goes away in the next release"]
    assert options.renamed_spellings(["--gpu-pairs-vram-budget-mb", "5000"]) == []


def test_the_cpu_gets_its_own_case_cap_and_an_option_wins_on_every_device():
    """A CPU step takes tenths of a second to seconds: a case there may run longer than a GPU case,
    unless --gpu-pairs-max-case-s says how long."""
    assert run_options.stopping_rule(None, None, None, "cpu", 3).max_seconds == run_options.MAX_CASE_S_CPU
    assert run_options.stopping_rule(None, None, None, "cuda", 3).max_seconds == run_options.MAX_CASE_S
    assert run_options.stopping_rule(None, None, 45.0, "cpu", 3).max_seconds == \
        run_options.stopping_rule(None, None, 45.0, "cuda", 3).max_seconds == 45.0
