"""The hyperparameter study's analysis: seed as the unit of replication, the slope's change when
shared, whether the best value moves, A beside B, energy-best against accuracy-best, and runs the
background did not cover refused."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.studies.collates.hp_study import (
    _with_mean,
    a_accuracy,
    a_beside_b,
    best_value,
    collate,
    combined_work_s,
    draw_pair,
    energy_accuracy_agreement,
    exclusion,
    factor_rows,
    host_drift,
    interaction,
    level_and_block,
    markdown,
    relative,
    stats_rows,
)

LR = {"default": 0.01, "lr_min": 0.002, "lr_max": 0.05}


def _row(variant, mode, seed, **values):
    base = {"pair": "hp02", "case_id": f"hp02-{variant}_s{seed}-{mode}", "variant": variant, "block": "",
            "seed": seed, "mode": mode, "model": "mrt_oast", "a_model": "mnist", "hparams": {"learning_rate": LR[variant], "epochs": 10},
            "metric": "auc", "accuracy": None, "energy": None, "card_energy": None, "combined_energy": None,
            "cpu_energy": None, "duration_s": 60.0, "coverage": 1.0 if mode == "concurrent" else None,
            "min_coverage": 0.95, "a_pace": None, "a_drift": None, "a_energy_per_step": None, "a_accuracy": None, "a_full_runs": 0, "vs_serial": None, "gpu_util": None, "slowdown": None,
            "failure": None, "complete": True, "cpu_note": "no RAPL"}
    return {**base, **values}


def _rows(outcome, value, seeds=(1, 2, 3)):
    """Every level alone and shared per seed; ``value(x, shared, seed)`` gives the outcome."""
    rows = []
    for seed in seeds:
        for variant, lr in LR.items():
            x = math.log10(lr / LR["default"])
            for mode in ("solo", "concurrent"):
                rows.append(_row(variant, mode, seed, **{outcome: value(x, mode == "concurrent", seed)}))
    return rows


def _data(rows, outcome):
    return relative(factor_rows(rows, "hp02", "learning_rate"), outcome)


def test_a_steeper_slope_when_shared_is_found_with_its_interval_despite_large_seed_offsets():
    rows = _rows("energy", lambda x, shared, seed: 100 * (1 + (0.3 if shared else 0.1) * x) + 20 * seed
                 + 0.3 * math.sin(7 * seed + 3 * x))
    answer = interaction(_data(rows, "energy"))
    assert answer["ci95"][0] < answer["estimate"] < answer["ci95"][1]
    assert answer["estimate"] == pytest.approx(0.2 * 100 / answer_base(rows), rel=0.05)
    assert answer["p"] < 0.001 and answer["n_runs"] == 18 and answer["n_seeds"] == 3
    assert answer["spread_share"]["seed"] > 0.5  # the seeds' offsets dominate, and the model takes them out


def answer_base(rows):
    base = [r["energy"] for r in rows if r["variant"] == "default" and r["mode"] == "solo"]
    return sum(base) / len(base)


@settings(max_examples=25, deadline=None)
@given(slope=st.floats(-1, 1), offsets=st.lists(st.floats(-5, 5), min_size=3, max_size=3))
def test_the_same_slope_in_both_modes_never_reads_as_an_interaction(slope, offsets):
    rows = _rows("accuracy", lambda x, shared, seed: 0.6 + slope * x * 0.1 + offsets[seed - 1] * 0.01
                 + 0.001 * math.cos(5 * seed + 11 * x + shared))
    answer = interaction(_data(rows, "accuracy"))
    assert answer["ci95"][0] <= 0 <= answer["ci95"][1] or abs(answer["estimate"]) < 1e-3


def test_sharing_that_lowers_only_the_middle_level_is_found_level_by_level_where_the_slope_sees_nothing():
    def accuracy(x, shared, seed):  # a learning rate's accuracy peaks at the default; sharing costs only there
        return 0.8 - 0.5 * x * x - (0.2 if shared and x == 0 else 0.0) + 0.01 * seed + 0.002 * math.sin(9 * seed + 5 * x)
    answer = interaction(_data(_rows("accuracy", accuracy), "accuracy"))
    assert answer["ci95"][0] <= 0 <= answer["ci95"][1]  # the levels are symmetric: no slope changes
    level = answer["by_level"]
    assert level["p"] < 0.001 and level["df"] == [2, 18 - 8] and level["n_runs"] == 18


@settings(max_examples=25, deadline=None)
@given(means=st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3),
       offsets=st.lists(st.floats(-5, 5), min_size=3, max_size=3), sharing=st.floats(-0.1, 0.1))
def test_the_same_level_shape_in_both_modes_never_reads_as_sharing_acting_by_level(means, offsets, sharing):
    """Any shape over the levels, the seeds' offsets and one shift for sharing at every level: the
    shares of the spread add up to 1 and the level-by-level test finds nothing."""
    shape = dict(zip(sorted(math.log10(lr / LR["default"]) for lr in LR.values()), means))
    rows = _rows("accuracy", lambda x, shared, seed: shape[x] + offsets[seed - 1] * 0.01 + (sharing if shared else 0.0)
                 + 0.001 * math.cos(5 * seed + 11 * x + shared))
    answer = interaction(_data(rows, "accuracy"))
    share = answer["spread_share"]
    assert share["model"] == "levels"
    assert sum(share[k] for k in ("seed", "level", "sharing", "residual")) == pytest.approx(1.0)
    level = answer["by_level"]
    assert level["p"] > 1e-3 or level["f"] < 50


def test_one_seed_leaves_the_level_by_level_test_out_with_the_reason():
    answer = interaction(_data(_rows("accuracy", lambda x, shared, seed: 0.5 + 0.1 * x + 0.01 * shared, seeds=(1,)),
                               "accuracy"))
    assert "f" not in answer["by_level"] and "too few runs (6) to test sharing level by level" in answer["by_level"]["reason"]
    assert answer["spread_share"]["model"] == "straight line"


def test_runs_the_levels_fit_exactly_leave_the_level_by_level_test_out_rather_than_dividing_by_nothing():
    answer = interaction(_data(_rows("accuracy", lambda x, shared, seed: 0.5 + 0.1 * x * x + (0.05 if shared else 0.0)),
                               "accuracy"))
    assert "f" not in answer["by_level"] and "fit every run exactly" in answer["by_level"]["reason"]


def test_a_best_value_that_moves_is_said_with_the_gain_of_the_new_best():
    def acc(x, shared, seed):
        peak = 0.7 if shared else 0.0  # alone x=0 is best, shared the largest learning rate
        return 0.8 - (x - peak) ** 2 * 0.2 + 0.001 * seed
    answer = best_value(_data(_rows("accuracy", acc), "accuracy"), higher=True)
    assert answer["moved"] and answer["best_solo_x"] == 0 and answer["best_shared_x"] == pytest.approx(0.69897)
    assert answer["gain"]["estimate"] > 0 and answer["gain"]["n_seeds"] == 3


def test_a_best_value_that_stays_has_no_gain():
    answer = best_value(_data(_rows("accuracy", lambda x, s, seed: 0.8 - x * x), "accuracy"), higher=True)
    assert not answer["moved"] and answer["gain"] is None


def test_energy_best_and_accuracy_best_agree_when_one_level_wins_both():
    rows = []
    for seed in (1, 2, 3):
        for variant, lr in LR.items():
            x = math.log10(lr / LR["default"])
            for mode in ("solo", "concurrent"):
                rows.append(_row(variant, mode, seed, energy=100 + 10 * x + seed, accuracy=0.7 - 0.1 * x))
    data = factor_rows(rows, "hp02", "learning_rate")
    answer = energy_accuracy_agreement(relative(data, "energy"), relative(data, "accuracy"))
    assert answer["estimate"] == 1.0 and answer["n_seeds_x_modes"] == 6 and answer["ci95"][1] == 1.0
    assert answer["p"] < 0.01


def _blocked_rows(lr_slope_shared, host):
    """A pair split by factor: each seed's learning-rate and epochs blocks ran on machines whose
    pace ``host(seed, block)`` scales every energy of the block."""
    rows = []
    for seed in (1, 2, 3):
        for variant, lr in LR.items():
            x = math.log10(lr / LR["default"])
            for mode in ("solo", "concurrent"):
                slope = lr_slope_shared if mode == "concurrent" else 0.1
                energy = 100 * (1 + slope * x) * host(seed, "lr")
                name, block = ("default", "lr") if variant == "default" else (variant, "")
                rows.append(_row(variant, mode, seed, energy=energy, block=block,
                                 case_id=f"hp02-{name}{'_lr' if block else ''}_s{seed}-{mode}"))
        for epochs, variant in ((5, "epochs_min"), (10, "default"), (15, "epochs_max")):
            for mode in ("solo", "concurrent"):
                block = "epochs" if variant == "default" else ""
                rows.append({**_row("default", mode, seed, block=block, energy=10 * epochs * host(seed, "epochs"),
                                    hparams={"learning_rate": LR["default"], "epochs": epochs}), "variant": variant})
    return rows


@pytest.mark.parametrize("variant, expected", [
    ("default_lr", ("default", "lr")), ("bg_default_epochs", ("bg_default", "epochs")), ("default", ("default", "")),
    ("lr_min", ("lr_min", "")), ("epochs_max", ("epochs_max", "")), ("bg_default", ("bg_default", "")),
])
def test_a_blocks_default_run_is_the_default_level_of_its_block(variant, expected):
    assert level_and_block(variant) == expected


@given(st.lists(st.floats(0.5, 2.0), min_size=6, max_size=6))
@settings(max_examples=30, deadline=None)
def test_a_pair_split_by_factor_reads_each_factor_from_its_own_block_whatever_machine_ran_it(paces):
    pace = dict(zip([(seed, block) for seed in (1, 2, 3) for block in ("lr", "epochs")], paces))
    rows = _blocked_rows(0.3, lambda seed, block: pace[(seed, block)])
    lr = factor_rows(rows, "hp02", "learning_rate")
    assert sorted({(r["variant"], r["block"]) for r in lr}) == [("default", "lr"), ("lr_max", ""), ("lr_min", "")]
    assert len(lr) == 18 and len(factor_rows(rows, "hp02", "epochs")) == 18
    answer = interaction(relative(lr, "energy"))
    assert answer["n_runs"] == 18 and answer["estimate"] == pytest.approx(0.2, rel=1e-6)
    flat = interaction(relative(factor_rows(rows, "hp02", "epochs"), "energy"))
    assert abs(flat["estimate"]) < 1e-9


def test_a_beside_b_reads_the_slope_of_a_s_pace_over_b_s_learning_rate():
    rows = _rows("a_pace", lambda x, shared, seed: (0.8 - 0.1 * x + 0.01 * seed) if shared else None)
    answer = a_beside_b(factor_rows(rows, "hp02", "learning_rate"), "a_pace")
    assert answer["estimate"] == pytest.approx(-0.1, abs=1e-9) and answer["n_runs"] == 9


def test_a_run_the_background_did_not_cover_is_refused_with_the_reason():
    row = _row("default", "concurrent", 1, coverage=0.5)
    assert "covered 0.5" in exclusion(row)
    assert exclusion(_row("default", "concurrent", 1)) is None
    assert "failed" in exclusion(_row("default", "solo", 1, failure="oom"))


def test_combined_work_credits_a_s_progress_at_its_pace_alone():
    record = {"mode": "concurrent", "fg_solo_duration_s": 60.0, "bg_steps_in_window": 300.0, "bg_solo_steps_per_s": 10.0}
    assert combined_work_s(record) == 90.0
    assert combined_work_s({"mode": "solo", "fg_duration_s": 61.0}) == 61.0
    assert combined_work_s({**record, "bg_solo_steps_per_s": None}) is None
    assert combined_work_s({**record, "bg_alone_steps_per_s": 20.0}) == 75.0  # its pace alone around B's run wins


def test_a_s_accuracy_counts_only_its_runs_b_covered_whole():
    record = {"bg_model": "mnist", "bg_cycle_perf": [{"metrics": {"test_accuracy": 0.5}, "shared": 0.3},
                                                     {"metrics": {"test_accuracy": 0.9}, "shared": 1.0},
                                                     {"metrics": {"test_accuracy": 0.7}, "shared": 0.97}]}
    assert a_accuracy(record) == (pytest.approx(0.8), 2)
    assert a_accuracy({**record, "bg_model": "not_a_builtin"}) == (None, 0)


def test_the_summary_table_and_stats_come_from_one_analysis():
    rows = _rows("energy", lambda x, shared, seed: 100 * (1 + (0.3 if shared else 0.1) * x) + seed)
    summary = {"n_runs": 18, "n_recorded": 18, "seeds": [1, 2, 3], "excluded": [], "coverage_min": 1.0,
               "pairs": {}, "host_drift": host_drift(rows)}
    from pytest_gpu_pairs.studies.collates.hp_study import pair_summary

    summary["pairs"]["hp02"] = pair_summary(rows, "hp02")
    found = summary["pairs"]["hp02"]["factors"]["learning_rate"]["interaction"]["energy"]["estimate"]
    lines = stats_rows(summary)
    assert any(r[1] == "interaction" and r[3] == "energy" and r[5] == f"{found:.6g}" for r in lines)
    assert f"{found:+.3f}" in markdown(summary)


def test_an_empty_results_folder_collates_to_nothing_measured(tmp_path):
    summary = collate([])
    assert summary["n_runs"] == 0 and summary["pairs"] == {}


def test_pair_type_is_the_predecessors_utilisation_rule():
    from pytest_gpu_pairs.studies.collates.hp_study import pair_type

    assert pair_type(99.0) == "complementary" and pair_type(100.0) == "complementary"
    assert pair_type(116.5) == "competing" and pair_type(None) is None


def test_by_pair_type_reads_overhead_interference_and_energy_over_serial_from_the_shared_runs():
    from pytest_gpu_pairs.studies.collates.hp_study import by_pair_type

    rows = []
    for seed in (1, 2, 3):
        rows.append(_row("default", "solo", seed, accuracy=0.80))
        rows.append(_row("default", "concurrent", seed, accuracy=0.80 * (1 + 0.01 * seed), slowdown=1.2 + 0.1 * seed,
                         vs_serial=0.8))
    answer = by_pair_type(rows, {"hp02": "complementary"})["complementary"]
    assert answer["pairs"] == ["hp02"]
    assert answer["concurrent_overhead"]["estimate"] == pytest.approx(0.4) and answer["concurrent_overhead"]["n_runs"] == 3
    assert answer["interference"]["estimate"] == pytest.approx(0.02)
    assert answer["vs_serial"]["estimate"] == pytest.approx(0.8) and answer["vs_serial"]["p"] < 1e-6  # tested against 1, not 0


def test_the_hosts_drift_is_read_from_the_shared_runs_windows_alone_and_stated_in_the_table():
    rows = [_row("default", "concurrent", seed, a_drift=drift) for seed, drift in ((1, 0.02), (2, -0.08), (3, None))]
    rows.append(_row("default", "solo", 1, a_drift=0.5))  # a solo run has no windows: never counted
    drift = host_drift(rows)
    assert drift == {"n": 2, "max_abs": pytest.approx(0.08), "median_abs": pytest.approx(0.05)}
    summary = {"n_runs": 4, "n_recorded": 4, "seeds": [1, 2, 3], "excluded": [], "coverage_min": 1.0, "pairs": {},
               "host_drift": drift}
    assert "moved over a shared run by a median of 5.0 % and at most 8.0 % (2 runs" in markdown(summary)
    assert "moved over a shared run" not in markdown({**summary, "host_drift": host_drift([])})


def test_runs_in_which_a_job_ran_faster_beside_the_other_are_listed_and_said_in_the_table():
    from pytest_gpu_pairs.studies.collates.hp_study import summarize_rows

    rows = [_row("default", "solo", 1, slowdown=1.0),
            _row("default", "concurrent", 1, slowdown=0.86, a_pace=1.12),
            _row("default", "concurrent", 2, slowdown=1.13, a_pace=1.03),
            _row("default", "concurrent", 3, slowdown=1.2, a_pace=0.9)]
    summary = summarize_rows(rows)
    assert summary["b_slowdown_below_1"] == ["hp02-default_s1-concurrent"]
    assert summary["a_pace_above_1"] == ["hp02-default_s1-concurrent", "hp02-default_s2-concurrent"]
    assert "In 1 shared run(s) B ran faster beside A than in its solo run" in markdown(summary)
    assert "and in 2 A ran faster" in markdown(summary)
    calm = summarize_rows([rows[0], rows[3]])
    assert calm["b_slowdown_below_1"] == [] and "ran faster" not in markdown(calm)


def test_a_pair_whose_runs_read_b_faster_beside_a_as_a_whole_is_left_out_of_its_types_overhead():
    from pytest_gpu_pairs.studies.collates.hp_study import by_pair_type

    rows = [_row("default", "concurrent", seed, slowdown=s) for seed, s in ((1, 0.86), (2, 0.88), (3, 0.9))]
    rows += [{**_row("default", "concurrent", seed, slowdown=1.3), "pair": "hp03", "case_id": f"hp03-{seed}"}
             for seed in (1, 2, 3)]
    both = by_pair_type(rows, {"hp02": "complementary", "hp03": "complementary"})["complementary"]
    assert both["concurrent_overhead"]["estimate"] == pytest.approx(0.3)  # hp03's runs alone, hp02 not in part
    assert "hp02" in both["concurrent_overhead"]["left_out"]
    alone = by_pair_type(rows[:3], {"hp02": "complementary"})["complementary"]
    assert alone["concurrent_overhead"]["estimate"] is None and "hp02" in alone["concurrent_overhead"]["reason"]


def test_a_pair_whose_single_run_crosses_1_around_a_mean_that_holds_it_counts_every_run():
    from pytest_gpu_pairs.studies.collates.hp_study import by_pair_type

    rows = [_row("default", "concurrent", seed, slowdown=s) for seed, s in ((1, 0.86), (2, 1.13), (3, 1.2))]
    answer = by_pair_type(rows, {"hp02": "complementary"})["complementary"]["concurrent_overhead"]
    assert answer["estimate"] == pytest.approx(0.063, abs=1e-3) and answer["n_runs"] == 3
    assert answer["ci95"][0] < 0 < answer["ci95"][1] and "left_out" not in answer


@given(st.lists(st.floats(0.5, 1.5), min_size=2, max_size=12), st.floats(0.0, 0.5))
def test_runs_past_the_bound_lie_on_one_side_of_it_and_stay_past_when_moved_further(values, shift):
    from pytest_gpu_pairs.studies.collates.hp_study import past_the_bound

    above, below = past_the_bound(values, 1.0, True), past_the_bound(values, 1.0, False)
    assert above is None or below is None
    if above is not None:
        assert above["estimate"] > 1.0 and past_the_bound([v + shift for v in values], 1.0, True) is not None
    if below is not None:
        assert below["estimate"] < 1.0 and past_the_bound([v - shift for v in values], 1.0, False) is not None
    if len(set(values)) == 1 and abs(values[0] - 1.0) > 1e-9:
        assert (above is not None) == (values[0] > 1.0) and (below is not None) == (values[0] < 1.0)


def test_a_s_pace_above_1_as_a_whole_is_not_read_as_a_slope_and_scattered_across_1_it_is():
    wholly = [{"shared": True, "x": x, "seed": 1, "a_pace": pace} for x, pace in ((-0.7, 1.05), (0.0, 1.08), (0.7, 1.1))]
    answer = a_beside_b(wholly, "a_pace")
    assert answer["estimate"] is None and "over these 3 run(s)" in answer["reason"] and "1.077 [" in answer["reason"]
    scattered = [{"shared": True, "x": x, "seed": 1, "a_pace": pace} for x, pace in ((-0.7, 0.9), (0.0, 1.05), (0.7, 0.8))]
    answer = a_beside_b(scattered, "a_pace")
    assert answer["estimate"] == pytest.approx(-0.0714, abs=1e-3) and answer["runs_above_1"] == 1
    assert "1 run(s) above 1, the runs' mean holds 1" in _with_mean(answer)


def test_a_factor_with_no_counted_run_says_so_in_its_panels_and_a_measured_one_draws_its_runs():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    learning_rate_block = [r for r in _blocked_rows(0.3, lambda seed, block: 1.0) if r["block"] != "epochs"
                           and not r["variant"].startswith("epochs")]
    fig = draw_pair(learning_rate_block, "hp02")
    try:
        lr_column, epochs_column = fig.axes[0::2], fig.axes[1::2]
        assert all("no counted run yet" in [t.get_text() for t in ax.texts] for ax in epochs_column)
        assert lr_column[1].collections and not lr_column[1].texts  # the energy panel: every run a point
    finally:
        plt.close(fig)
