"""Busy fractions the measured pairs read in their solo phases: re-read from each case's own
readings (the readings settled after each switch), taken halfway with the profile's, and learnt by a
validation fold only from the pairs it keeps."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning import fit as learning
from pytest_gpu_pairs.planning.measured import Measured, MeasuredPair, read_measured, read_reference
from pytest_gpu_pairs.planning.predict import Planner, settled_busy
from pytest_gpu_pairs.planning.profiles import parse
from pytest_gpu_pairs.record.store import StoreError, load_utilisation, save_result

PROFILE_BUSY = {"a": 0.6, "b": 0.2, "c": 0.4, "d": 0.3}


def _profiles():
    return parse({"idle_power_w": 70.0, "device": {"power_limit_w": 700.0},
                  "workloads": [{"model": m, "util_avg_pct": busy * 100, "power_avg_w": 200.0, "min_fit_mb": 1000.0}
                                for m, busy in PROFILE_BUSY.items()]}, "fixture")


def _pair(models, efficiency, busy):
    return MeasuredPair(models, "timeslice", efficiency, (efficiency - 0.05, efficiency + 0.05), 0.2, 3000.0, 1, ("x",),
                        solo_busy=tuple(sorted(busy.items())))


def _measured():
    pairs = [_pair(("a", "b"), 1.7, {"a": 0.4, "b": 0.2}), _pair(("a", "c"), 1.6, {"a": 0.5, "c": 0.4}),
             _pair(("b", "c"), 1.9, {"b": 0.2, "c": 0.3}), _pair(("c", "d"), 1.8, {"c": 0.5, "d": 0.3}),
             _pair(("b", "d"), 1.95, {"b": 0.1, "d": 0.3})]
    return Measured({(p.models, p.sharing): p for p in pairs})


def test_a_workloads_busy_fraction_is_halfway_between_its_profile_and_its_pairs_solo_phases():
    solo = settled_busy(_profiles(), _measured())
    assert solo.get("a").busy == pytest.approx((0.6 + (0.4 + 0.5) / 2) / 2)
    assert solo.get("d").busy == pytest.approx((0.3 + 0.3) / 2)


def test_without_pairs_that_read_their_solo_phases_the_profiles_stand():
    profiles = _profiles()
    bare = Measured({k: MeasuredPair(p.models, p.sharing, p.efficiency, p.efficiency_ci, p.energy_saved, p.peak_vram_mb,
                                     p.records, p.sources) for k, p in _measured().pairs.items()})
    assert settled_busy(profiles, bare) is profiles
    assert Planner(profiles, bare).solo is profiles


def test_a_fold_never_learns_a_held_out_workloads_busy_fraction_from_its_own_pairs():
    planner = Planner(_profiles(), _measured())
    assert planner.solo.get("a").busy != pytest.approx(0.6)
    blind = planner.without_workload("a")
    assert blind.solo.get("a").busy == pytest.approx(0.6)
    assert blind.solo.get("b").busy == pytest.approx((0.2 + (0.2 + 0.1) / 2) / 2)
    assert planner.without(("a", "b")).solo.get("a").busy == pytest.approx((0.6 + 0.5) / 2)


def _observations(shift: float) -> list[learning.Observation]:
    names = "abcde"
    return [learning.Observation((x, y), False, 0.1 * i, 0.05 * ((i % 3) - 1) + shift, 1.5)
            for i, (x, y) in enumerate((x, y) for j, x in enumerate(names) for y in names[j + 1:])]


def test_the_interval_is_calibrated_on_the_observations_a_fold_would_see():
    """The same observations in every fold calibrate as before; observations a fold sees further off
    widen the interval."""
    same = learning.learn(_observations(0.0), folds=lambda name: _observations(0.0))
    assert same.quantiles == learning.learn(_observations(0.0)).quantiles
    wider = learning.learn(_observations(0.0), folds=lambda name: [
        o if name not in o.models else learning.Observation(o.models, o.mps, o.contention, o.residual + 0.3, o.base)
        for o in _observations(0.0)])
    assert wider.quantiles[False] > same.quantiles[False]


def _interleaved_record(case_id):
    phases = [{"name": "fg", "switched_t": 0.0, "start": 0.1, "end": 0.6},
              {"name": "bg", "switched_t": 0.6, "start": 0.7, "end": 1.2},
              {"name": "pair", "switched_t": 1.2, "start": 1.3, "end": 1.8}]
    return {"case_id": case_id, "mode": "concurrent", "fg_model": "a", "bg_model": "b", "sharing": "timeslice",
            "method": "interleaved", "device": "NVIDIA H200", "concurrency_efficiency": 1.8,
            "concurrency_efficiency_ci": [1.7, 1.9], "energy_saved_vs_serial": 0.3, "oom": False,
            "rounds": [{"round": 1, "phases": phases}]}


def _samples_csv(busy_at, lag_s=0.3):
    """Readings every 0.1 s from -1 s to 2 s, each the card's mean busy over the lag_s before it."""
    rows = ["t,util_pct"]
    for i in range(-10, 21):
        t = i / 10
        span = [busy_at(t - lag_s * k / 20) for k in range(1, 21)]
        rows.append(f"{t + 1000.0:.3f},{100 * sum(span) / len(span):.3f}")
    return "\n".join(rows) + "\n"


def _saved_with_readings(folder, record):
    """``record`` saved with its case's readings: a busy 0.1 in fg's solo phase, 0.3 in bg's, 0.9 paired."""
    for p in record["rounds"][0]["phases"]:
        p.update({k: p[k] + 1000.0 for k in ("switched_t", "start", "end")})
    save_result(folder / "p1", record)
    (folder / "p1" / "gpu_samples.csv").write_text(_samples_csv(
        lambda t: 0.9 if t < 0 or t >= 1.2 else 0.1 if t < 0.6 else 0.3))
    return folder


def test_a_results_folder_teaches_each_jobs_settled_solo_busy_from_its_cases_readings(tmp_path):
    [pair] = read_measured([_saved_with_readings(tmp_path, _interleaved_record("p1"))]).pairs.values()
    assert dict(pair.solo_busy) == pytest.approx({"a": 0.1, "b": 0.3})


def _limits(threads):
    return {role: {"active_thread_percentage": threads, "pinned_mem_limit_mb": None} for role in ("fg", "bg")}


@pytest.mark.parametrize("mps, teaches", [
    (None, False),  # an MPS record made before the default method kept its limits
    ({"limits": _limits(52), "server_pids": [7]}, False),
    ({"limits": _limits(None), "server_pids": [7]}, True),
    ({"limits": _limits(100), "server_pids": [7]}, True),
])
def test_only_solo_phases_on_the_whole_card_teach_a_busy_fraction(tmp_path, mps, teaches):
    """A job alone as an MPS client under a thread limit runs its kernels on part of the SMs: it
    reads busier than alone on the card, and the planner's busy fractions mean the card."""
    record = {**_interleaved_record("p1"), "sharing": "mps", "mps": mps}
    [pair] = read_measured([_saved_with_readings(tmp_path, record)]).pairs.values()
    assert pair.efficiency == pytest.approx(1.8)
    assert dict(pair.solo_busy) == (pytest.approx({"a": 0.1, "b": 0.3}) if teaches else {})


def test_a_case_without_readings_teaches_no_busy_fraction(tmp_path):
    save_result(tmp_path / "p1", _interleaved_record("p1"))
    [pair] = read_measured([tmp_path]).pairs.values()
    assert pair.solo_busy == ()


@pytest.mark.parametrize("content, where", [
    ("t,util_pct\n1.0,50\n2.0,abc\n", "row 3, column util_pct: expected a number from 0 to 100, got 'abc'"),
    ("t,util_pct\n1.0,150\n", "row 2, column util_pct: expected a number from 0 to 100, got '150'"),
    ("t,util_pct\nnan,50\n", "row 2, column t: expected a number from 0 to inf, got 'nan'"),
    ("time,busy\n1.0,50\n", "row 1: expected a header naming the columns t and util_pct"),
])
def test_unusable_readings_are_one_line_naming_the_file_row_and_column(tmp_path, content, where):
    (tmp_path / "gpu_samples.csv").write_text(content)
    with pytest.raises(StoreError) as caught:
        load_utilisation(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'gpu_samples.csv'}: {where}"


def test_readings_not_in_utf_8_are_one_line(tmp_path):
    (tmp_path / "gpu_samples.csv").write_bytes(b"t,util_pct\n1.0,\xff\n")
    with pytest.raises(StoreError, match="expected gpu_samples.csv in UTF-8$"):
        load_utilisation(tmp_path)


@given(st.lists(st.tuples(st.floats(0, 1e9), st.one_of(st.none(), st.floats(0, 100))), max_size=30))
def test_readings_come_back_in_time_order_with_empty_ones_unmeasured(readings):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        text = "t,util_pct\n" + "".join(f"{t!r},{'' if u is None else repr(u)}\n" for t, u in readings)
        (Path(folder) / "gpu_samples.csv").write_text(text)
        samples = load_utilisation(folder)
    assert [s.t for s in samples] == sorted(t for t, _ in readings)
    assert sorted((s.t, s.util_pct is None) for s in samples) == sorted((t, u is None) for t, u in readings)


def test_a_reference_pairs_busy_fraction_outside_0_to_1_or_of_another_workload_is_one_line(tmp_path):
    path = tmp_path / "reference.json"
    for busy, name in ((1.5, "a"), (0.5, "z")):
        path.write_text(json.dumps({"device": "x", "pairs": [
            {"models": ["a", "b"], "sharing": "timeslice", "records": 1, "solo_gpu_busy": {name: busy}}]}))
        with pytest.raises(SettingsError) as caught:
            read_reference(path)
        assert str(caught.value).startswith(f"{path}: $.pairs[0].solo_gpu_busy.{name}: expected a fraction from 0 to 1")
        assert "\n" not in str(caught.value)


json_values = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                           max_leaves=12)


@given(st.lists(json_values | st.fixed_dictionaries({"phases": json_values}), max_size=4))
def test_rounds_a_record_describes_badly_are_passed_over_never_raised_on(rounds):
    from pytest_gpu_pairs.monitor.samples import GpuSample
    from pytest_gpu_pairs.record.phases import recorded_solo_busy

    samples = tuple(GpuSample(t=i / 10, util_pct=50.0) for i in range(30))
    found = recorded_solo_busy(rounds, samples)
    assert all(0.0 <= busy <= 1.0 for busy in found.values())


def test_unusable_readings_beside_a_record_stop_the_plan_with_one_line(tmp_path, capsys):
    from pytest_gpu_pairs.cli import main as gpu_pairs

    record = {**_interleaved_record("g01-mnist_ff+resnet20-default-concurrent"), "fg_model": "mnist_ff",
              "bg_model": "resnet20"}
    save_result(tmp_path / record["case_id"], record)
    readings = tmp_path / record["case_id"] / "gpu_samples.csv"
    readings.write_text("t,util_pct\n1000.0,inf\n")
    assert gpu_pairs(["plan", "settings/parallel_feasibility_test.json", "--results", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert out == f"error: {readings}: row 2, column util_pct: expected a number from 0 to 100, got 'inf'\n"


def _mps_record(case_id, efficiency, threads):
    return {**_interleaved_record(case_id), "sharing": "mps", "concurrency_efficiency": efficiency,
            "mps": {"limits": _limits(threads), "server_pids": [7]}}


@pytest.mark.parametrize("threads, efficiency, under_limits", [(None, 1.5, False), (100, 1.5, False), (52, 1.7, True)])
def test_an_mps_pair_averages_only_records_of_one_baseline_and_the_whole_card_wins(tmp_path, threads, efficiency,
                                                                                  under_limits):
    """A job alone under a thread limit steps slower than alone on the card, so an efficiency against it
    reads higher: two such bases never average into one figure."""
    save_result(tmp_path / "limited", _mps_record("limited", 1.9, 52))
    save_result(tmp_path / "other", _mps_record("other", 1.5, threads))
    [pair] = read_measured([tmp_path]).pairs.values()
    assert pair.solo_under_mps_limits is under_limits
    assert pair.efficiency == pytest.approx(efficiency)
    assert Measured({(pair.models, pair.sharing): pair}).under_mps_limits() == int(under_limits)


def _mps_pair(efficiency, under_limits):
    return replace(_pair(("a", "b"), efficiency, {}), sharing="mps", solo_under_mps_limits=under_limits)


@pytest.mark.parametrize("mine_limited, reference_limited, kept", [(True, False, 1.5), (False, True, 1.9),
                                                                   (True, True, 1.9), (False, False, 1.9)])
def test_a_pair_measured_here_replaces_the_references_unless_only_under_limits_over_the_whole_card(
        mine_limited, reference_limited, kept):
    key = (("a", "b"), "mps")
    mine = Measured({key: _mps_pair(1.9, mine_limited)})
    reference = Measured({key: _mps_pair(1.5, reference_limited)})
    assert mine.over(reference).pairs[key].efficiency == pytest.approx(kept)


def test_a_reference_pairs_basis_must_be_true_or_false(tmp_path):
    row = {"models": ["a", "b"], "sharing": "mps", "efficiency": 1.8, "records": 1}
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"device": "d", "pairs": [{**row, "solo_under_mps_limits": True}]}))
    [pair] = read_reference(path).measured.pairs.values()
    assert pair.solo_under_mps_limits is True
    path.write_text(json.dumps({"device": "d", "pairs": [{**row, "solo_under_mps_limits": "yes"}]}))
    with pytest.raises(SettingsError, match=r"\$\.pairs\[0\]\.solo_under_mps_limits"):
        read_reference(path)
