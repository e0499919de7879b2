"""A command workload's progress_pattern and progress_preset in settings: accepted as the named
groups' rules allow, refused in one line with the file, the JSON path and what was expected."""
import json

import pytest
from support.helpers import pair

from pytest_gpu_pairs.experiment.load import load_experiment
from pytest_gpu_pairs.experiment.logformats import GROUPS, PRESETS
from pytest_gpu_pairs.inputs import SettingsError


def settings(tmp_path, **workload):
    path = tmp_path / "s.json"
    mine = {**pair(), "foreground": {"model": "mine"}}
    path.write_text(json.dumps({"name": "x", "pairs": [mine],
                                "workloads": {"mine": {"command": ["python", "train.py"], **workload}}}))
    return path


def error(tmp_path, **workload) -> str:
    with pytest.raises(SettingsError) as info:
        load_experiment(settings(tmp_path, **workload))
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "s.json") + ": $.workloads.mine")
    return message


@pytest.mark.parametrize("pattern, expected", [
    (r"step (\d+)", "expected a named group step, batch (with batches) or epoch"),
    (r"(?P<iteration>\d+)", "unknown: iteration"),
    (r"\[(?P<batch>\d+)\]", "expected batch and batches together"),
    (r"(?P<step>\d+)/(?P<batches>\d+)", "expected batch and batches together"),
    (r"(?P<step>\d+) (?P<batch>\d+)/(?P<batches>\d+)", "either step or batch"),
    (r"epoch (?P<epoch>\d+) of (?P<total>\d+)", "total only beside step"),
    (r"(?P<step>\d+)(?=/)", "expected a regular expression in RE2 syntax"),
])
def test_a_progress_pattern_that_breaks_the_rules_is_one_clear_line(tmp_path, pattern, expected):
    message = error(tmp_path, progress_pattern=pattern)
    assert ": $.workloads.mine.progress_pattern: " in message and expected in message


def test_an_unknown_preset_names_the_known_ones(tmp_path):
    message = error(tmp_path, progress_preset="keras")
    assert ": $.workloads.mine.progress_preset: " in message and "pytorch_word_language_model" in message


def test_a_pattern_and_a_preset_together_are_refused(tmp_path):
    assert "not both" in error(tmp_path, progress_pattern=r"step (?P<step>\d+)", progress_preset="lightning")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_is_a_valid_pattern_and_the_workload_reads_it(tmp_path, preset):
    workload = load_experiment(settings(tmp_path, progress_preset=preset)).workloads["mine"]
    assert workload.progress_regex == PRESETS[preset].pattern


def test_a_workload_without_either_reads_no_progress_from_its_log(tmp_path):
    assert load_experiment(settings(tmp_path)).workloads["mine"].progress_regex is None


def test_the_groups_are_the_documented_ones():
    assert list(GROUPS) == ["step", "total", "epoch", "batch", "batches"]
