"""The sharing dimension without a daemon: cases and ids for each mechanism, the MPS limits of the
settings, and what each mechanism needs (integration/test_sharing.py brings MPS up and down)."""
import re

import pytest
from support.helpers import pair

from pytest_gpu_pairs.experiment.cases import MpsLimits, Overrides, expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.run.sharing import SharingManager, SharingUnavailable

ID = re.compile(r"^[A-Za-z0-9_.]+-[a-z0-9_]+\+[a-z0-9_]+-[a-z0-9_.]+-(concurrent|solo)(-mps)?$")


def _experiment(pairs=None, **defaults):
    return parse_experiment({"name": "x", "defaults": defaults, "pairs": pairs or [pair()]}, "s.json")


def _cases():
    """A time-sliced case and the same pair under MPS."""
    return expand_all([_experiment([pair()], sharing=["timeslice", "mps"])])


def test_both_mechanisms_give_side_by_side_cases_and_timeslice_ids_stay_as_they_were():
    cases = expand_all([_experiment([pair("g01"), pair("g02", "mnist", "resnet20")], sharing=["timeslice", "mps"])])
    assert [(c.id, c.sharing) for c in cases] == [
        ("g01-mnist_ff+resnet20-default-concurrent", "timeslice"),
        ("g01-mnist_ff+resnet20-default-concurrent-mps", "mps"),
        ("g02-mnist+resnet20-default-concurrent", "timeslice"),
        ("g02-mnist+resnet20-default-concurrent-mps", "mps")]
    assert all(ID.match(c.id) for c in cases)


def test_command_line_beats_pair_beats_defaults_for_sharing():
    experiment = _experiment([pair("g01", sharing="mps"), pair("g02")], sharing="timeslice")
    assert [c.sharing for c in expand_all([experiment])] == ["mps", "timeslice"]
    both = expand_all([experiment], Overrides(sharing=("timeslice", "mps")))
    assert [c.sharing for c in both] == ["timeslice", "mps", "timeslice", "mps"]


def test_job_mps_limits_come_from_settings_and_bad_ones_are_one_line():
    data = {"name": "x", "pairs": [{"group": "g", "sharing": "mps",
                                    "foreground": {"model": "mnist", "mps": {"active_thread_percentage": 40}},
                                    "background": {"model": "resnet20", "mps": {"pinned_mem_limit_mb": 2048}}}]}
    case = expand_all([parse_experiment(data, "s.json")])[0]
    assert case.fg.mps == MpsLimits(40, None) and case.bg.mps == MpsLimits(None, 2048)
    data["pairs"][0]["foreground"]["mps"] = {"active_thread_percentage": 150}
    with pytest.raises(SettingsError, match=r"s.json: \$.pairs\[0\].foreground.mps.active_thread_percentage: "):
        parse_experiment(data, "s.json")
    data["pairs"][0]["foreground"]["mps"] = {}
    data["pairs"][0]["sharing"] = ["mps", "gang"]
    with pytest.raises(SettingsError, match=r"\$.pairs\[0\].sharing: expected 'timeslice', 'mps' or a non-empty list"):
        parse_experiment(data, "s.json")


def test_timeslice_needs_nothing_and_mps_needs_a_gpu(tmp_path):
    manager = SharingManager(tmp_path)
    timeslice, mps_case = _cases()
    assert manager.prepare(timeslice, "cpu").job_env == {}
    with pytest.raises(SharingUnavailable, match="sharing mps needs an NVIDIA GPU; jobs train on cpu"):
        manager.check(mps_case, "cpu")
    assert manager.daemon is None
