"""The planner's model: efficiency within its physical bounds and symmetric in the pair, fit monotone
in card memory, intervals calibrated on held-out workloads, leave-one-out correct on data of known structure,
and `gpu-pairs plan SETTINGS --gpu-memory-mb 10240` on fixture profiles and records."""
from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_gpu_pairs.cli import main as gpu_pairs
from pytest_gpu_pairs.inputs import SettingsError
from pytest_gpu_pairs.planning import fit as learning
from pytest_gpu_pairs.planning import memory, model
from pytest_gpu_pairs.planning.measured import FitEvidence, Measured, MeasuredPair, read_reference
from pytest_gpu_pairs.planning.predict import ERROR_FLOOR, Planner, efficiency_scale, recommend
from pytest_gpu_pairs.planning.profiles import SoloProfile, parse, read_profiles

fractions = st.floats(0, 1, allow_nan=False)
CARD = model.Card(idle_w=70.0, limit_w=700.0)


def profile(name="a", busy=0.5, power=200.0, need=1000.0, mem_busy=None, sm=None, device="cuda"):
    return SoloProfile(name, device, 32, 0.01, busy, mem_busy, sm, None, None, power, 2.0, need, need, None)


profiles_strategy = st.builds(profile, busy=fractions, power=st.floats(70, 700), mem_busy=st.one_of(st.none(), fractions),
                              sm=st.one_of(st.none(), fractions))


@given(profiles_strategy, profiles_strategy, st.sampled_from(model.MECHANISMS))
def test_efficiency_is_within_its_physical_bounds_and_symmetric(a, b, mechanism):
    ab, ba = model.base(a, b, mechanism, CARD), model.base(b, a, mechanism, CARD)
    assert 0.0 <= ab.efficiency <= 2.0
    assert 0.0 < ab.rate_a <= 1.0 and 0.0 < ab.rate_b <= 1.0
    assert ab.efficiency == pytest.approx(ba.efficiency, abs=1e-9)
    assert (ab.rate_a, ab.rate_b) == pytest.approx((ba.rate_b, ba.rate_a), abs=1e-9)


@given(profiles_strategy, profiles_strategy)
def test_time_slicing_never_does_better_than_mps_where_each_kernel_finds_the_sms_it_needs(a, b):
    assume(model.intensity(a, CARD) + model.intensity(b, CARD) <= 1.0)
    assert model.base(a, b, "timeslice", CARD).efficiency <= model.base(a, b, "mps", CARD).efficiency + 1e-9


def test_a_light_job_beside_a_card_filling_one_can_lose_more_under_mps_than_time_sliced():
    """MPS has no time slices: a light job's kernels wait behind a card-filling job's as long as they
    hold the SMs (dense_aspp beside vulberta_cnn on an H200: 1.575 under MPS, 1.785 time-sliced)."""
    light, filling = profile("light", busy=0.2, sm=0.5), profile("filling", busy=0.95, sm=0.9)
    mps, sliced = model.base(light, filling, "mps", CARD), model.base(light, filling, "timeslice", CARD)
    assert mps.efficiency < sliced.efficiency
    assert mps.rate_a < sliced.rate_a and mps.rate_b > sliced.rate_b


def test_the_extremes_idle_jobs_share_for_free_and_always_busy_ones_not_at_all():
    assert model.base(profile(busy=0.0), profile(busy=0.0), "timeslice", CARD).efficiency == 2.0
    assert model.base(profile(busy=1.0), profile(busy=1.0), "timeslice", CARD).efficiency == pytest.approx(1.0)


@given(st.floats(0, 40_000), st.floats(0, 40_000), st.floats(256, 90_000), st.floats(256, 90_000),
       st.one_of(st.none(), st.floats(256, 90_000)), st.one_of(st.none(), st.floats(256, 90_000)),
       st.one_of(st.none(), st.floats(0, 2_000)))
def test_more_card_memory_never_turns_a_fit_into_a_non_fit(need_a, need_b, small, large, ran, oom, reserved):
    small, large = min(small, large), max(small, large)
    evidence = FitEvidence(ran, oom)
    need, basis = memory.need(profile(need=need_a), profile(need=need_b), None, reserved)
    if memory.verdict(small, need, basis, evidence).fits:
        assert memory.verdict(large, need, basis, evidence).fits


def test_a_cpu_job_needs_no_card_memory_and_a_pair_min_fit_beats_the_sum():
    assert memory.need(profile(need=900), profile(device="cpu", need=None), None) == (900, "sum of min fit")
    assert memory.need(profile(need=900), profile(need=900), 1500.0) == (1500.0, "pair min fit")


def test_the_card_reserve_is_held_once_by_a_pair():
    """Min fits are card sizes, each holding the driver's reserve; an NVML peak is the process alone."""
    min_fits = memory.need(profile(need=1700), profile(need=1600), None, reserved_mb=500)
    assert min_fits == (500 + 1200 + 1100, "card reserve + min fit")
    peak_only = SoloProfile("b", "cuda", 32, 0.01, 0.5, None, None, None, None, 200.0, 2.0, 900.0, None, None)
    assert memory.need(profile(need=1700), peak_only, None, reserved_mb=500) == (500 + 1200 + 900,
                                                                                  "card reserve + NVML peak and min fit")
    assert memory.need(profile(need=1700), profile(need=1600), None) == (3300, "sum of min fit")


@given(st.lists(st.floats(0.0, 10.0), min_size=0, max_size=60), st.floats(0.5, 0.99))
def test_the_conformal_quantile_holds_its_share_of_scores_or_is_not_estimated(scores, confidence):
    quantile = learning.conformal_quantile(scores, confidence)
    if quantile is None:  # too few scores for the rank: the physical range, not an invented width
        assert len(scores) < learning.MIN_PAIRS or math.ceil((len(scores) + 1) * confidence) > len(scores)
        return
    assert quantile in scores
    assert sum(s <= quantile for s in scores) >= confidence * (len(scores) + 1) - 1


@given(st.lists(st.floats(0.0, 10.0), min_size=learning.MIN_PAIRS, max_size=40), st.floats(0.0, 10.0))
def test_a_larger_held_out_error_never_narrows_the_interval(scores, extra):
    before = learning.conformal_quantile(scores)
    after = learning.conformal_quantile([*scores, max(scores) + extra])
    assert before is None or after is None or after >= before or after == max(scores)


def test_intervals_are_calibrated_on_workloads_the_correction_never_saw():
    effects = {"a": 0.3, "b": -0.2, "c": 0.1, "d": 0.0, "e": -0.15, "f": 0.25}
    observations = _synthetic(effects, 0.05, 3)
    held_out = learning.leave_one_workload_out(observations)
    expected = [o.residual - learning.fit([p for p in observations if name not in p.models])(o.models, False, 0.3)
                for name in sorted(effects) for o in observations if name in o.models]
    assert [e for _, e in held_out] == pytest.approx(expected)  # every pair once per workload, by a fit blind to it
    assert len(held_out) == 2 * len(observations)
    learned = learning.learn(observations)
    assert learned.quantiles[False] == learning.conformal_quantile([abs(e) for _, e in held_out])
    assert learned.quantiles[True] is None and learned.half_width(True, 1.5) is None  # no MPS pair: no MPS interval


@given(st.floats(0.0, 2.0))
def test_the_efficiency_scale_is_least_where_a_bound_pins_the_pair(value):
    scale = efficiency_scale(value)
    assert scale >= ERROR_FLOOR
    assert efficiency_scale(2.0) == efficiency_scale(1.0) == ERROR_FLOOR
    assert scale <= efficiency_scale(1.5)


def _synthetic(effects: dict[str, float], noise: float, seed: int) -> list[learning.Observation]:
    rng = random.Random(seed)
    names = sorted(effects)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    return [learning.Observation((a, b), False, 0.3, effects[a] + effects[b] + rng.gauss(0, noise)) for a, b in pairs]


def test_leave_one_out_recovers_workload_effects_of_known_structure():
    effects = {"a": 0.3, "b": -0.2, "c": 0.1, "d": 0.0, "e": -0.15, "f": 0.25}
    observations = _synthetic(effects, 0.0, 1)
    errors = learning.leave_one_out(observations)
    assert len(errors) == len(observations)
    # each held-out pair is predicted from the others: far better than predicting no correction
    assert sum(e * e for e in errors) < 0.5 * sum(o.residual ** 2 for o in observations)


def test_leave_one_out_refits_without_the_held_out_pair():
    observations = _synthetic({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0}, 0.0, 2)
    spike = learning.Observation(("a", "b"), False, 0.3, 1.0)
    errors = learning.leave_one_out([spike, *observations])
    # a pair seen nowhere else keeps its whole residual: nothing it taught leaks into its own prediction
    assert errors[0] == pytest.approx(1.0 - learning.fit(observations)(("a", "b"), False, 0.3))
    assert errors[0] > 0.9


def test_no_measured_pairs_leaves_the_base_model_alone():
    assert learning.fit([])(("a", "b"), True, 0.5) == 0.0


def test_a_measured_pair_is_reported_as_measured_and_others_learn_from_it():
    profiles = parse({"idle_power_w": 70.0, "device": {"power_limit_w": 700.0},
                      "workloads": [{"model": m, "util_avg_pct": u, "power_avg_w": 200.0, "min_fit_mb": 1000.0}
                                    for m, u in (("a", 50), ("b", 60), ("c", 40), ("d", 30))]}, "fixture")
    pairs = {(("a", "b"), "timeslice"): MeasuredPair(("a", "b"), "timeslice", 1.1, (1.0, 1.2), 0.2, 3000.0, 1, ("x",))}
    planner = Planner(profiles, Measured(pairs))
    measured = planner.pair(("b", "a"), 10240, model.MECHANISMS)
    assert measured["rests_on"] == "measured" and measured["mechanisms"]["timeslice"]["efficiency"]["value"] == 1.1
    assert "no measured pair" in measured["note"]
    learned = planner.pair(("a", "c"), 10240, ("timeslice",))
    alone = Planner(profiles).pair(("a", "c"), 10240, ("timeslice",))
    assert learned["mechanisms"]["timeslice"]["efficiency"]["value"] < alone["mechanisms"]["timeslice"]["efficiency"]["value"]
    assert planner.without(("a", "b")).pair(("a", "b"), 10240, ("timeslice",))["rests_on"] == "solo profiles"


def test_the_one_packaged_profile_table_is_the_committed_references_distilled():
    from tools.codegen.workload_profiles import TARGET, render

    assert TARGET.read_text() == render()
    packaged = read_profiles()
    assert packaged.get("resnet20").startup_s is not None and packaged.typical_startup_s > 0
    assert packaged.get("mnist").busy == pytest.approx(0.2203, abs=1e-3)
    assert packaged.get("mnist").min_fit_mb == 1648 and packaged.reserved_mb == 480


@pytest.mark.parametrize("content, where", [
    ({"workloads": [{"model": "a", "util_avg_pct": "high"}]}, "$.workloads[0].util_avg_pct"),
    ({"workloads": [{"model": "a", "util_avg_pct": 140}]}, "$.workloads[0].util_avg_pct"),
    ({"workloads": [{"model": "a"}, {"model": "b", "sm_per_busy": 1.2}]}, "$.workloads[1].sm_per_busy"),
    ({"workloads": [{"model": "a", "dram_per_busy": -0.1}]}, "$.workloads[0].dram_per_busy"),
    ({"workloads": [{"model": "a", "sm_per_busy": "most"}]}, "$.workloads[0].sm_per_busy"),
    ({"workloads": {}}, "$.workloads"),
    ({"workloads": [], "pairs": [{"models": ["a"], "min_fit_mb": 3}]}, "$.pairs[0].models"),
])
def test_a_bad_profile_file_is_one_line_with_its_json_path(tmp_path, content, where):
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(content))
    with pytest.raises(SettingsError) as caught:
        read_profiles(path)
    assert str(caught.value).startswith(f"{path}: {where}: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize("entry, sm_share", [({"gpm_sm_util_pct": 30.0, "sm_per_busy": 0.9}, 0.6),
                                             ({"sm_per_busy": 0.9}, 0.9), ({}, None)])
def test_a_table_reads_a_jobs_sm_share_from_its_own_gpm_window_before_one_measured_elsewhere(tmp_path, entry, sm_share):
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"workloads": [{"model": "a", "util_avg_pct": 50.0, **entry}]}))
    assert read_profiles(path).get("a").sm_share == (pytest.approx(sm_share) if sm_share else None)


SETTINGS = "settings/parallel_feasibility_test.json"


def _fixture_profiles(tmp_path):
    workloads = [{"model": m, "util_avg_pct": u, "power_avg_w": p, "min_fit_mb": need, "peak_vram_nvml_mb": need * 2}
                 for m, u, p, need in (("mnist", 20, 130, 700), ("mnist_ff", 12, 120, 650), ("resnet20", 44, 200, 900),
                                       ("vulberta_mlp", 35, 217, 3000), ("siamese", 26, 148, 900),
                                       ("densenet121", 32, 190, 3200), ("pcb", 92, 478, 9000))]
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"device": {"name": "fixture card", "memory_total_mb": 81559, "power_limit_w": 700},
                                "idle_power_w": 70, "workloads": workloads}))
    return path


def _record(case_id, fg, bg, efficiency, **extra):
    return {"case_id": case_id, "mode": "concurrent", "fg_model": fg, "bg_model": bg, "sharing": "timeslice",
            "method": "interleaved", "device": "NVIDIA H100 80GB HBM3", "concurrency_efficiency": efficiency,
            "concurrency_efficiency_ci": [efficiency - 0.05, efficiency + 0.05], "energy_saved_vs_serial": 0.3,
            "oom": False, **extra}


def _results(tmp_path, records):
    from pytest_gpu_pairs.record.store import save_result

    out = tmp_path / "results"
    for record in records:
        save_result(out / record["case_id"], record)
    return out


def test_plan_predicts_every_pair_on_a_10_gb_card_from_fixture_profiles_and_records(tmp_path, capsys):
    results = _results(tmp_path, [
        _record("g01-mnist_ff+resnet20-default-concurrent", "mnist_ff", "resnet20", 1.9),
        _record("x1-mnist+resnet20-default-concurrent", "mnist", "resnet20", 1.85),
        _record("x2-siamese+resnet20-default-concurrent", "siamese", "resnet20", 1.7),
        _record("x3-vulberta_mlp+mnist-default-concurrent", "vulberta_mlp", "mnist", 1.6, gpu_memory_mb=10240.0,
                oom=True)])
    args = ["plan", SETTINGS, "--gpu-memory-mb", "10240", "--profiles", str(_fixture_profiles(tmp_path)),
            "--results", str(results)]
    assert gpu_pairs([*args, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    pairs = {tuple(p["pair"]): p for p in plan["pairs"]}
    assert plan["card_mb"] == 10240 and len(pairs) == 12 and plan["model"]["measured_pairs"]["timeslice"] == 3
    measured = pairs[("mnist_ff", "resnet20")]
    assert measured["rests_on"] == "measured" and measured["cases"] == ["g01-mnist_ff+resnet20-default-concurrent"]
    assert measured["groups"] == ["g01"] and plan["model"]["reference"] is None  # another card: no H100 reference
    assert measured["mechanisms"]["timeslice"]["efficiency"]["interval"] == [pytest.approx(1.85), pytest.approx(1.95)]
    assert pairs[("mnist_ff", "resnet20")]["fit"]["verdict"] == "fits"
    assert pairs[("mnist_rnn", "pcb")]["rests_on"] == "nothing"  # mnist_rnn has no fixture profile
    assert pairs[("pcb", "siamese")]["fit"]["verdict"] == "tight"  # 9 900 MB: less than 512 MB to spare
    assert pairs[("mnist", "vulberta_mlp")]["fit"]["verdict"] == "no"  # 3 700 MB would fit, but it ran out of memory
    assert pairs[("mnist", "vulberta_mlp")]["fit"]["basis"] == "measured: out of memory on an emulated 10240 MB card"
    assert pairs[("pcb", "vulberta_mlp")]["fit"]["verdict"] == "no"
    assert [p["rank"] for p in plan["pairs"]] == list(range(1, 13))
    fitting = [p for p in plan["pairs"] if p["fit"]["verdict"] in ("fits", "tight")]
    assert plan["pairs"][:len(fitting)] == fitting
    assert gpu_pairs(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gpu-pairs plan: 12 pair(s) on a 10240 MB card; solo profiles of fixture card")
    assert out[1].split()[:3] == ["rank", "groups", "pair"]
    assert any(line.startswith("note: MPS has no measured pair") for line in out)


def test_a_bad_record_stops_the_plan_with_one_line_naming_file_and_path(tmp_path, capsys):
    results = _results(tmp_path, [_record("g01-mnist_ff+resnet20-default-concurrent", "mnist_ff", "resnet20", 1.9)])
    bad = results / "g01-mnist_ff+resnet20-default-concurrent" / "result.json"
    data = json.loads(bad.read_text())
    bad.write_text(json.dumps({**data, "concurrency_efficiency": "1.9"}))
    assert gpu_pairs(["plan", SETTINGS, "--results", str(results)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"error: {bad}: $.concurrency_efficiency: ") and out.count("\n") == 1


def test_a_bad_sharing_word_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        gpu_pairs(["plan", SETTINGS, "--sharing", "timeslice,mig"])
    assert "expected timeslice, mps or timeslice,mps" in capsys.readouterr().err


def _mechanisms(slicing, mps, mps_measured=3, mps_basis=""):
    return {"timeslice": {"efficiency": {"value": slicing[0], "interval": slicing[1], "basis": ""}, "measured_pairs": 1},
            "mps": {"efficiency": {"value": mps[0], "interval": mps[1], "basis": mps_basis},
                    "measured_pairs": mps_measured}}


def test_mps_is_recommended_only_when_clearly_better_than_time_slicing_and_measured():
    assert recommend(_mechanisms((1.96, [1.89, 2.0]), (2.0, [0.0, 2.0])))[0] == "timeslice"
    assert recommend(_mechanisms((1.43, [1.38, 1.48]), (1.73, [0.0, 2.0])))[0] == "mps"
    assert recommend(_mechanisms((1.54, [0.0, 2.0]), (1.58, [0.0, 2.0])))[0] == "timeslice"
    assert recommend(_mechanisms((1.54, [0.0, 2.0]), (1.76, [0.0, 2.0])))[2] == "MPS"
    unmeasured = recommend(_mechanisms((1.5, None), (1.9, None), mps_measured=0))
    assert unmeasured[0] == "timeslice" and unmeasured[2] == "time-slicing (MPS not measured)"
    assert "no measured pair" in unmeasured[1]
    itself = recommend(_mechanisms((1.5, None), (1.9, None), mps_measured=1, mps_basis="measured pair (2 record(s))"))
    assert itself[0] == "mps"


efficiencies = st.floats(0.0, 2.0)


@given(efficiencies, efficiencies, st.integers(0, learning.MIN_PAIRS - 1), st.booleans())
def test_without_measured_mps_pairs_mps_is_never_recommended(slicing, mps, measured, interval):
    figures = _mechanisms((slicing, [max(0.0, slicing - 0.1), min(2.0, slicing + 0.1)] if interval else None),
                          (mps, None), mps_measured=measured, mps_basis="solo profiles only")
    chosen, _, use = recommend(figures)
    assert chosen == "timeslice" and use == "time-slicing (MPS not measured)"


def test_the_packaged_reference_pairs_are_the_committed_validation_records_distilled():
    from tools.codegen.reference_pairs import TARGET, render

    assert TARGET.read_text() == render()
    reference = read_reference()
    assert reference.measured.count("timeslice") == 39 and reference.measured.count("mps") == 12
    assert reference.measured.fit[("pcb", "vulberta_mlp")].oom_mb == 8192


def test_a_fresh_install_plans_from_the_reference_pairs_with_intervals_groups_and_no_unmeasured_mps(capsys):
    assert gpu_pairs(["plan", SETTINGS, "--gpu-memory-mb", "10240", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["model"]["measured_pairs"] == {"timeslice": 39, "mps": 12}
    assert plan["model"]["efficiency_interval"]["confidence"] == learning.CONFIDENCE
    assert all(p["rests_on"] == "measured (H100 reference)" for p in plan["pairs"])  # the 12 groups were measured
    slicing = [p["mechanisms"]["timeslice"]["efficiency"] for p in plan["pairs"]]
    assert all(0.0 <= f["value"] <= 2.0 and 0.0 <= f["interval"][0] <= f["interval"][1] <= 2.0 for f in slicing)
    assert sorted(g for p in plan["pairs"] for g in p["groups"]) == [f"g{i:02d}" for i in range(1, 13)]
    assert gpu_pairs(["plan", SETTINGS, "--gpu-memory-mb", "10240", "--json", "--no-reference"]) == 0
    blind = json.loads(capsys.readouterr().out)
    assert blind["model"]["measured_pairs"] == {"timeslice": 0, "mps": 0}
    assert all(p["recommended"] == "timeslice" and p["use"] == "time-slicing (MPS not measured)" for p in blind["pairs"])


def test_a_bad_reference_file_is_one_line_with_its_json_path(tmp_path):
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"device": "x", "pairs": [{"models": ["a"], "sharing": "timeslice", "records": 1}]}))
    with pytest.raises(SettingsError) as caught:
        read_reference(path)
    assert str(caught.value).startswith(f"{path}: $.pairs[0].models: ") and "\n" not in str(caught.value)


def test_the_planner_judges_a_pairs_fit_by_whole_runs_where_fit_profiles_were_measured_on_the_card():
    table = read_profiles()
    planner = Planner(table)
    pcb_pair = planner.fit(("pcb", "vulberta_mlp"), 10240.0)  # the H100 reference's profiles, measured on 10 GB
    assert pcb_pair.basis.startswith("whole-run fit profiles (H100 reference)")
    assert pcb_pair.need_mb == pytest.approx(table.get("pcb").fit_need_mb + table.get("vulberta_mlp").fit_need_mb)
    assert pcb_pair.verdict == "tight"  # its start-up transient passes the card; its steady need does not
    small = planner.fit(("mnist_ff", "resnet20"), 10240.0)
    assert small.verdict == "fits" and small.basis.startswith("whole-run")
    assert not planner.fit(("mnist_ff", "resnet20"), 8192.0).basis.startswith("whole-run")  # not that card
    here = Planner(table, whole_runs={("mnist_ff", 8192.0): memory.WholeRun(900.0, 800.0, "measured here"),
                                      ("resnet20", 8192.0): memory.WholeRun(8000.0, 7500.0, "measured here")})
    assert here.fit(("mnist_ff", "resnet20"), 8192.0).verdict == "no"


@given(st.floats(100.0, 20000.0), st.floats(0.0, 1.0), st.floats(100.0, 20000.0), st.floats(0.0, 1.0),
       st.floats(1000.0, 40000.0), st.floats(1000.0, 40000.0))
def test_a_larger_card_never_turns_a_whole_run_fit_away(need_a, share_a, need_b, share_b, small, large):
    a = memory.WholeRun(need_a, need_a * share_a, "x")
    b = memory.WholeRun(need_b, need_b * share_b, "x")
    order = {"no": 0, "tight": 1, "fits": 2}
    low, high = sorted((small, large))
    assert order[memory.whole_run_fit(high, a, b).verdict] >= order[memory.whole_run_fit(low, a, b).verdict]


@given(profiles_strategy, profiles_strategy, st.sampled_from(model.MECHANISMS))
def test_a_group_of_two_is_the_pair(a, b, mechanism):
    pair = model.base(a, b, mechanism, CARD)
    assert model.group_rates([a, b], mechanism, CARD) == pytest.approx([pair.rate_a, pair.rate_b])


@given(st.lists(profiles_strategy, min_size=3, max_size=5), st.sampled_from(model.MECHANISMS))
def test_a_group_is_within_its_physical_bounds(profiles, mechanism):
    rates = model.group_rates(profiles, mechanism, CARD)
    assert rates is not None and all(0.0 <= r <= 1.0 + 1e-9 for r in rates)
    occupied = sum(r * p.busy * (1.0 if mechanism == "timeslice" else model.intensity(p, CARD))
                   for r, p in zip(rates, profiles))
    assert occupied <= 1.0 + 1e-9


def test_idle_jobs_share_for_free_and_three_always_busy_ones_do_one_jobs_work():
    idle = [profile(n, busy=0.0) for n in "abc"]
    assert sum(model.group_rates(idle, "timeslice", CARD)) == pytest.approx(3.0)
    busy = [profile(n, busy=1.0) for n in "abc"]
    assert sum(model.group_rates(busy, "timeslice", CARD)) == pytest.approx(1.0)


def _four_workloads():
    return parse({"idle_power_w": 70.0, "device": {"power_limit_w": 700.0},
                  "workloads": [{"model": m, "util_avg_pct": u, "power_avg_w": 200.0, "min_fit_mb": 1000.0}
                                for m, u in (("a", 50), ("b", 60), ("c", 40), ("d", 30))]}, "fixture")


def test_a_group_whose_pair_was_measured_without_an_interval_still_gets_one():
    profiles, names = _four_workloads(), ("a", "b", "c", "d")
    pairs = {((x, y), "timeslice"): MeasuredPair((x, y), "timeslice", 1.8, (1.75, 1.85), 0.2, 3000.0, 1, ("x",))
             for i, x in enumerate(names) for y in names[i + 1:]}
    pairs[(("a", "b"), "timeslice")] = MeasuredPair(("a", "b"), "timeslice", 1.7, None, 0.2, 3000.0, 1, ("x",))
    planner = Planner(profiles, Measured(pairs))
    assert planner.efficiency(("a", "b"), "timeslice").low is None
    group = planner.group_efficiency(("a", "b", "c"), "timeslice")
    assert group.estimated and group.low is not None and group.low < group.value < group.high


def test_a_group_is_predicted_from_its_pairs_and_a_measured_one_is_shown_as_measured():
    profiles, names = _four_workloads(), ("a", "b", "c", "d")
    pairs = {((x, y), "timeslice"): MeasuredPair((x, y), "timeslice", 1.9, (1.85, 1.95), 0.2, 3000.0, 1, ("x",))
             for i, x in enumerate(names) for y in names[i + 1:]}
    group = MeasuredPair(("a", "b", "c"), "timeslice", 3.2, (3.0, 3.4), None, None, 3, ("x",))
    planner = Planner(profiles, Measured(pairs, groups={(("a", "b", "c"), "timeslice"): group}))
    blind = planner.group_efficiency(("a", "b", "c"), "timeslice", measured=False)
    base = sum(model.group_rates([profiles.get(m) for m in "abc"], "timeslice", planner.card))
    assert blind.value > base  # the pairs measured above their base model lift the group too
    assert 0.0 <= blind.low <= blind.value <= blind.high <= 3.0 and "not calibrated on groups" in blind.basis
    shown = planner.group(("c", "a", "b"), 10240, ("timeslice",))
    figure = shown["mechanisms"]["timeslice"]["efficiency"]
    assert figure["value"] == 3.0 and "above the physical bound of 3" in figure["basis"]
    assert shown["pair"] == ["a", "b", "c"] and shown["fit"]["verdict"] == "fits"


def test_a_reference_group_needs_three_models_or_is_one_line(tmp_path):
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"device": "x", "pairs": [], "groups": [{"models": ["a", "b"], "sharing": "timeslice",
                                                                         "records": 1}]}))
    with pytest.raises(SettingsError) as caught:
        read_reference(path)
    assert str(caught.value).startswith(f"{path}: $.groups[0].models: ") and "\n" not in str(caught.value)
    assert read_reference().measured.groups[(("mnist", "resnet20", "resnet32"), "timeslice")].records == 3


def test_a_case_that_failed_part_way_teaches_no_efficiency(tmp_path):
    """Under MPS a server's fatal error once tore both jobs down after one start of three: the record
    keeps that start's 2.00, but the pair's efficiency is not measured by it."""
    from pytest_gpu_pairs.planning.measured import read_measured

    failure = "fg siamese ended during the measurement (exit code 1)"
    crashed = _record("r14-siamese+vulberta_cnn-default-concurrent", "siamese", "vulberta_cnn", 2.0, failure=failure)
    whole = _record("r26-pcb+siamese-default-concurrent", "pcb", "siamese", 1.7)
    measured = read_measured([_results(tmp_path, [crashed, whole])])
    lost = measured.of(("siamese", "vulberta_cnn"), "timeslice")
    assert lost is not None and lost.records == 1 and lost.efficiency is None and lost.efficiency_ci is None
    assert measured.of(("pcb", "siamese"), "timeslice").efficiency == pytest.approx(1.7)
    assert measured.count("timeslice") == 1


def test_a_measurement_read_from_two_folders_counts_once(tmp_path):
    from pytest_gpu_pairs.planning.measured import read_measured

    results = _results(tmp_path, [_record("g01-mnist_ff+resnet20-default-concurrent", "mnist_ff", "resnet20", 1.9),
                                  _record("x1-mnist_ff+resnet20-default-concurrent", "mnist_ff", "resnet20", 1.7)])
    copy = tmp_path / "copied" / "g01-mnist_ff+resnet20-default-concurrent"
    copy.mkdir(parents=True)
    copy.joinpath("result.json").write_bytes((results / copy.name / "result.json").read_bytes())
    pair = read_measured([results, copy.parent, results]).of(("mnist_ff", "resnet20"), "timeslice")
    assert pair is not None and pair.records == 2 and pair.efficiency == pytest.approx(1.8)
    again = _results(tmp_path / "again", [_record("g01-mnist_ff+resnet20-default-concurrent", "mnist_ff", "resnet20", 1.6)])
    assert read_measured([results, again]).of(("mnist_ff", "resnet20"), "timeslice").records == 3
