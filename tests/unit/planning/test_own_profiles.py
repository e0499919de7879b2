"""Profiles measured here (``gpu-pairs profile``'s files): read as untrusted input in one line, matched
to a job by workload, device and (for a command workload) command, and used by the estimator and the
planner before the package's table, each saying so."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.catalog import BUILTINS
from pytest_gpu_pairs.experiment.cases import expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning.estimate import DEFAULT, DEFAULT_JOB_S, estimate_cases, job_cost
from pytest_gpu_pairs.planning.measured import read_measured
from pytest_gpu_pairs.planning.own_profiles import (
    BASIS,
    KIND,
    GpmPerBusy,
    OwnProfiles,
    gpm_per_busy,
    measured_here,
    parse_profile,
    read_own_profiles,
    with_own,
)
from pytest_gpu_pairs.planning.predict import Planner, plan_pairs
from pytest_gpu_pairs.planning.profiles import packaged
from pytest_gpu_pairs.record.store import StoreError, profile_path, save_profile
from pytest_gpu_pairs.run.options import GpuPairsOptions

COMMAND = ["python", "train.py", "--epochs", "3"]


def stored(workload="mine", device="cpu", **figures) -> dict:
    builtin = workload in BUILTINS
    return {"kind": KIND, "version": 1, "workload": workload, "builtin": builtin,
            "command": None if builtin else COMMAND, "device": device, "startup_s": 2.0, "step_time_s": 0.05,
            **figures}


def _job(model: str) -> dict:
    return {"model": model, "hyperparameters": {} if model == "mine" else {"epochs": 1}}


def own_cases(fg="mine", bg="mnist_ff", **defaults):
    workloads = {"mine": {"command": COMMAND}}
    experiment = {"name": "t", "defaults": {"method": "epoch", **defaults}, "workloads": workloads,
                  "pairs": [{"group": "g01", "foreground": _job(fg), "background": _job(bg)}]}
    return expand_all([parse_experiment(experiment, "t.json")])


def options(tmp_path: Path) -> GpuPairsOptions:
    return GpuPairsOptions(settings=(), device="cpu", scale=1.0, vram_budget_mb=None, min_efficiency=None,
                           sample_hz=10.0, out_dir=tmp_path)


def test_a_stored_profile_is_found_by_the_next_session_and_matched_by_command(tmp_path):
    save_profile(tmp_path, "mine", "cpu", stored())
    own = read_own_profiles(tmp_path)
    job = own_cases()[0].fg
    assert own.for_job(job, "cpu") is not None and own.for_job(job, "cuda") is None
    save_profile(tmp_path, "mine", "cpu", {**stored(), "command": ["python", "other.py"]})
    assert read_own_profiles(tmp_path).for_job(job, "cpu") is None  # another command under the same name


def test_a_command_workload_whose_run_length_is_unknown_is_counted_from_its_step_rate_where_that_is_enough(tmp_path):
    save_profile(tmp_path, "mine", "cpu", stored())
    own = read_own_profiles(tmp_path)
    cost = job_cost(own_cases()[0].fg, "cpu", 1.0, own)
    assert cost.basis == BASIS and cost.step_s == 0.05 and not cost.run_known and cost.train_s == DEFAULT_JOB_S
    interleaved = estimate_cases(own_cases(bg="mine", method="interleaved"), options(tmp_path), "cpu", own=own)[0]
    assert interleaved.basis == BASIS  # its phases need the step rates, not the run's length
    epoch = estimate_cases(own_cases(bg="mine"), options(tmp_path), "cpu", own=own)[0]
    assert epoch.basis == DEFAULT and "gpu-pairs profile" in epoch.detail  # a whole run is still unknown


def test_a_run_seen_to_end_in_the_profile_is_counted_whole(tmp_path):
    save_profile(tmp_path, "mine", "cpu", stored(run_s=32.0, run_steps=600))
    cost = job_cost(own_cases()[0].fg, "cpu", 1.0, read_own_profiles(tmp_path))
    assert cost.run_known and cost.startup_s + cost.train_s == 32.0


def test_a_builtin_profiled_on_the_cpu_is_its_epochs_times_the_measured_step_rate(tmp_path):
    save_profile(tmp_path, "mnist_ff", "cpu", stored("mnist_ff", batch_size=32))
    job = own_cases("mnist_ff", "resnet20")[0].fg
    steps = math.ceil(BUILTINS["mnist_ff"].steps_per_epoch(32))
    cost = job_cost(job, "cpu", 1.0, read_own_profiles(tmp_path))
    assert cost.basis == BASIS and cost.train_s == pytest.approx(steps * 0.05) and cost.startup_s == 2.0


@pytest.mark.parametrize("key, value, where", [
    ("kind", "something else", "$.kind"), ("step_time_s", "fast", "$.step_time_s"),
    ("step_time_s", -1.0, "$.step_time_s"), ("device", "tpu", "$.device"), ("command", None, "$.command"),
    ("util_avg_pct", 140.0, "$.util_avg_pct"), ("workload", "", "$.workload"),
    ("gpm_sm_util_pct", 101.0, "$.gpm_sm_util_pct"), ("gpm_dram_bw_pct", "half", "$.gpm_dram_bw_pct"),
])
def test_a_bad_profile_file_is_one_line_naming_the_file_and_the_place(key, value, where):
    with pytest.raises(SettingsError) as caught:
        parse_profile({**stored(), key: value}, "out/_profiles/mine.cpu.json")
    assert str(caught.value).startswith("out/_profiles/mine.cpu.json") and where in str(caught.value)
    assert "\n" not in str(caught.value)


@given(st.dictionaries(st.sampled_from(["startup_s", "step_time_s", "run_s", "peak_memory_mb", "util_avg_pct",
                                        "batch_size", "workload", "builtin", "version"]),
                       st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                                 st.text(max_size=5), st.lists(st.integers(), max_size=2))))
def test_any_file_is_a_profile_or_one_settings_error(changes):
    try:
        profile = parse_profile({**stored(), **changes}, "p.json")
    except SettingsError as exc:
        assert str(exc).startswith("p.json")
    else:
        assert profile.step_time_s is None or profile.step_time_s > 0


def test_the_name_of_a_stored_profile_is_safe_whatever_the_workload_is_called(tmp_path):
    path = profile_path(tmp_path, "../../etc/passwd x", "cuda")
    assert path.parent == tmp_path / "_profiles" and path.name.endswith(".cuda.json") and "/" not in path.name


def test_the_planner_takes_a_workload_the_table_lacks_from_a_gpu_profile_measured_here(tmp_path):
    save_profile(tmp_path, "mine", "cuda", stored(device="cuda", util_avg_pct=40.0, peak_memory_mb=2000.0))
    save_profile(tmp_path, "mnist_ff", "cuda", stored("mnist_ff", device="cuda", util_avg_pct=99.0))
    profiles, here = with_own(packaged(), read_own_profiles(tmp_path), "cuda")
    assert here == {"mine"} and profiles.get("mnist_ff") == packaged().get("mnist_ff")  # the table's own stays
    row = plan_pairs(Planner(profiles, profiled_here=here), [("mine", "mnist_ff")], 80_000.0)[0]
    assert row["rests_on"] == "solo profiles (a profile measured here)"
    assert row["fit"]["verdict"] in ("fits", "tight") and row["mechanisms"]["timeslice"]["efficiency"]["value"]
    nothing = plan_pairs(Planner(packaged()), [("mine", "mnist_ff")], 80_000.0)[0]
    assert nothing["rests_on"] == "nothing"


def test_no_folder_no_profiles(tmp_path):
    assert read_own_profiles(tmp_path / "absent") == OwnProfiles() and read_own_profiles(None) == OwnProfiles()
    (tmp_path / "_profiles").mkdir()
    (tmp_path / "_profiles" / "mine.cpu.json").write_text(json.dumps([1]))
    with pytest.raises(SettingsError):
        read_own_profiles(tmp_path)


@pytest.mark.parametrize("gpm, sm_share, dram_share", [({"gpm_sm_util_pct": 45.0, "gpm_dram_bw_pct": 15.0}, 0.75, 0.25),
                                                       ({}, None, None)])
def test_a_gpu_profiles_gpm_shares_are_read_per_busy_time_as_the_packaged_tables_are(gpm, sm_share, dram_share):
    """The MPS model reads how much of the SMs a job's kernels occupy while they run; without GPM it
    falls back on the job's power above idle."""
    profile = parse_profile(stored("mine", "cuda", util_avg_pct=60.0, **gpm), "out/_profiles/mine.cuda.json")
    [solo] = measured_here(OwnProfiles((profile,))).workloads.values()
    assert solo.sm_share == (pytest.approx(sm_share) if sm_share else None)
    assert solo.dram_share == (pytest.approx(dram_share) if dram_share else None)


def _gpu(workload="mine", source="a/_profiles/mine.cuda.json", device_name="NVIDIA H200", **figures):
    return parse_profile(stored(workload, "cuda", device_name=device_name, **{"util_avg_pct": 50.0, **figures}), source)


@pytest.mark.parametrize("other, borrowed", [
    (_gpu(source="b/_profiles/mine.cuda.json", gpm_sm_util_pct=40.0, gpm_dram_bw_pct=10.0), (0.8, 0.2)),
    (_gpu(source="b/_profiles/mine.cuda.json", device_name="NVIDIA H100", gpm_sm_util_pct=40.0), (None, None)),
    (_gpu("mnist", source="b/_profiles/mnist.cuda.json", gpm_sm_util_pct=40.0), (None, None)),
])
def test_a_profile_without_gpm_takes_the_shares_per_busy_time_of_the_same_job_on_the_same_gpu_model(other, borrowed):
    """A kernel's share of the card while it runs is its own, not the host's: the study's profiles,
    taken before GPM was read, keep their busy fractions and borrow the shares of a later window of
    the same workload on the same GPU model, never another card's or another workload's."""
    mine = _gpu(util_avg_pct=80.0)
    table = measured_here(OwnProfiles((other, mine)))
    assert table.get("mine").busy == pytest.approx(0.8)
    assert (table.get("mine").sm_share, table.get("mine").dram_share) == \
        tuple(pytest.approx(b) if b is not None else None for b in borrowed)


def test_the_borrowed_shares_are_the_mean_of_the_windows_and_a_profiles_own_come_first():
    windows = [_gpu(source=f"{n}/_profiles/mine.cuda.json", util_avg_pct=busy, gpm_sm_util_pct=sm)
               for n, busy, sm in (("a", 50.0, 30.0), ("b", 80.0, 64.0))]
    assert gpm_per_busy(windows) == GpmPerBusy(pytest.approx(0.7), None, 2)
    without = _gpu(source="c/_profiles/mine.cuda.json", util_avg_pct=40.0)
    assert measured_here(OwnProfiles((*windows, without))).get("mine").sm_share == pytest.approx(0.7)
    assert measured_here(OwnProfiles((without, *windows))).get("mine").sm_share == pytest.approx(0.8)


def test_a_folder_of_profiles_alone_holds_no_pair_and_a_folder_of_nothing_is_still_refused(tmp_path):
    profiles_only, empty = tmp_path / "profiled", tmp_path / "empty"
    save_profile(profiles_only, "mine", "cuda", stored("mine", "cuda", util_avg_pct=50.0))
    empty.mkdir()
    assert read_measured([profiles_only]).pairs == {}
    with pytest.raises(StoreError, match="expected a gpu-pairs run directory"):
        read_measured([empty])
