"""A group of more than two jobs: the efficiency sums every job's progress and is bounded by the
number of jobs, the energy split adds up over all jobs, the memory verdict adds every job's need,
and a reading above the bound is flagged as a pair's above 2 is."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.record import metrics
from pytest_gpu_pairs.record.fit import fit_record, group_fit, pair_fit
from pytest_gpu_pairs.record.measurement import InterleavedMeasurement, Phase, PhaseRound
from pytest_gpu_pairs.record.phases import case_figures, round_figures, shapley_group_split, shapley_split
from pytest_gpu_pairs.record.plausible import flagged, impossible, impossible_notes
from unit.record.test_fit import profile
from unit.record.test_phases import IDLE_W, counter, progress

ratios = st.floats(0.0, 1.0, allow_nan=False)


@given(st.floats(0.05, 1.0), st.lists(ratios, min_size=1, max_size=7))
def test_the_efficiency_of_jobs_each_at_most_their_solo_pace_is_at_most_their_number(fg_progress, bg_ratios):
    efficiency = metrics.group_efficiency(1.0 / fg_progress, bg_ratios)
    assert efficiency == pytest.approx(fg_progress + sum(bg_ratios))
    assert efficiency <= 1 + len(bg_ratios) + 1e-9


@given(st.floats(0.05, 20.0), ratios)
def test_a_pairs_efficiency_is_the_same_figure_as_before(slowdown, progress_ratio):
    assert metrics.group_efficiency(slowdown, [progress_ratio]) == metrics.concurrency_efficiency(slowdown, progress_ratio)


def test_an_unmeasured_job_leaves_the_efficiency_unmeasured():
    assert metrics.group_efficiency(2.0, [0.5, None]) is None and metrics.group_efficiency(None, [0.5, 0.5]) is None


@given(st.floats(-1e6, 1e6), st.lists(st.floats(0, 1e6), min_size=2, max_size=8))
def test_the_energy_shares_add_up_to_the_total_and_each_job_gets_its_own_cost_and_an_equal_part(total, alone):
    shares = shapley_group_split(total, alone)
    assert sum(shares) == pytest.approx(total, abs=1e-6 * max(1.0, abs(total), sum(alone)))
    surplus = (total - sum(alone)) / len(alone)
    assert shares == pytest.approx([a + surplus for a in alone], abs=1e-6 * max(1.0, abs(total), sum(alone)))
    if len(alone) == 2:
        assert tuple(shares) == shapley_split(total, *alone)  # a pair's split, bit for bit


def test_a_share_is_unmeasured_where_one_jobs_cost_alone_is():
    assert shapley_group_split(100.0, [10.0, None, 20.0]) == [None, None, None]


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_the_cards_time_bounds_a_group_between_one_jobs_work_and_the_number_of_jobs(busy):
    bound = metrics.group_efficiency_bound(busy)
    assert min(1.0, len(busy)) - 1e-9 <= bound <= len(busy)
    if sum(busy) <= 1:
        assert bound == len(busy)


def test_a_group_of_three_measured_alone_and_together():
    """Three jobs at 10, 20 and 40 steps/s alone; together at 5, 10 and 20: each at half its pace."""
    fg_alone, bg_alone, bg2_alone = Phase("fg", 0.0, 1.0, 5.0), Phase("bg", 5.0, 6.0, 10.0), Phase("bg2", 10.0, 11.0, 15.0)
    pair = Phase("pair", 15.0, 16.0, 20.0)

    def watts(t):
        return IDLE_W + (100 if t < 5 else 200 if t < 10 else 400 if t < 15 else 500)

    m = InterleavedMeasurement(progress([(1.0, 5.0, 10.0), (16.0, 20.0, 5.0)]),
                               progress([(6.0, 10.0, 20.0), (16.0, 20.0, 10.0)]),
                               (PhaseRound(1, (fg_alone, bg_alone, bg2_alone, pair)),), counter(watts), (0.0, 0.0),
                               more_bgs=(progress([(11.0, 15.0, 40.0), (16.0, 20.0, 20.0)]),))
    r = round_figures(m.rounds[0], m, IDLE_W)
    assert [j["role"] for j in r["jobs"]] == ["fg", "bg", "bg2"]
    assert [j["progress_ratio"] for j in r["jobs"]] == pytest.approx([0.5, 0.5, 0.5], rel=0.02)
    assert r["concurrency_efficiency"] == pytest.approx(1.5, rel=0.02)
    assert r["fg_slowdown"] == pytest.approx(2.0, rel=0.02) and r["bg_progress_ratio"] == pytest.approx(0.5, rel=0.02)
    shares = [j["gpu_energy_j"] for j in r["jobs"]]
    assert sum(shares) == pytest.approx(r["gpu_energy_above_idle_j"])
    assert (r["fg_gpu_energy_j"], r["bg_gpu_energy_j"]) == (shares[0], shares[1])
    # serial: 20 + 40 + 80 steps at 15, 12.5 and 11.25 J each (idle included) against 550 W x 4 s together
    assert r["serial_energy_j"] == pytest.approx(20 * 15 + 40 * 12.5 + 80 * 11.25, rel=0.03)
    case = case_figures(m, IDLE_W)
    assert [j["role"] for j in case["jobs"]] == ["fg", "bg", "bg2"]
    assert sum(j["gpu_energy_j"] for j in case["jobs"]) == pytest.approx(case["gpu_energy_above_idle_j"])


def test_an_efficiency_above_the_number_of_jobs_is_flagged_and_one_below_it_is_not():
    three = {"n_jobs": 3, "concurrency_efficiency": 2.6, "concurrency_efficiency_ci": [2.4, 2.8]}
    assert not flagged(three, "concurrency_efficiency") and flagged({**three, "n_jobs": 2}, "concurrency_efficiency")
    assert flagged({**three, "concurrency_efficiency": 3.2}, "concurrency_efficiency")
    assert "above 3" in impossible_notes({**three, "concurrency_efficiency": 3.2})["concurrency_efficiency"]
    round_past = {**three, "rounds": [{"round": 1, "complete": True, "concurrency_efficiency": 4.9}]}
    assert flagged(round_past, "concurrency_efficiency")  # one round far past 3 (1.6 times past it)
    assert not impossible("concurrency_efficiency", 2.5, n_jobs=3) and impossible("concurrency_efficiency", 2.5)


def test_the_groups_memory_need_adds_every_jobs_and_a_pairs_is_as_before():
    a, b, c = profile(), profile("mnist_rnn"), profile("resnet20")
    group = group_fit({"fg": a, "bg": b, "bg2": c}, 0.0, 7500.0)
    assert group["vram_fit_mb"] == pytest.approx(a.need_mb + b.need_mb + c.need_mb)
    assert group["vram_steady_mb"] == pytest.approx(a.steady_mb + b.steady_mb + c.steady_mb)
    assert group["fg_vram_need_mb"] == a.need_mb and "bg2_vram_need_mb" not in group
    assert group_fit({"fg": a, "bg": b}, 0.0, 7500.0) == pair_fit(a, b, 0.0, 7500.0)
    figures, notes = fit_record({"fg": a, "bg": b, "bg2": None}, 0.0, 7500.0, None, 0.0)
    assert figures["vram_fit_mb"] is None and "bg2: no fit profile" in notes["vram_fit_mb"]


@pytest.mark.parametrize("change, where, expected", [
    (lambda r: r["jobs"][1].update(progress_ratio="x"), "$.jobs[1].progress_ratio",
     "an entry of jobs: progress_ratio must be a number or null, got 'x'"),
    (lambda r: r["jobs"][0].update(role=None), "$.jobs[0].role", "an entry of jobs: role must be a string, got None"),
    (lambda r: r["jobs"][0].update(colour="red"), "$.jobs[0].colour", "an entry of jobs: extra inputs are not permitted"),
    (lambda r: r["rounds"][0]["jobs"][2].update(role=3), "$.rounds[0].jobs[2].role",
     "an entry of a round's jobs: role must be a string, got 3"),
])
def test_a_stored_groups_job_that_does_not_fit_is_named_in_one_line(change, where, expected):
    from pytest_gpu_pairs.record.store import StoreError, typed

    record = {"case_id": "g3-a+b+c-default-concurrent", "n_jobs": 3,
              "jobs": [{"role": role, "model": m, "progress_ratio": 0.5} for role, m in (("fg", "a"), ("bg", "b"), ("bg2", "c"))],
              "rounds": [{"round": 1, "jobs": [{"role": role} for role in ("fg", "bg", "bg2")]}]}
    assert typed(record, "result.json").jobs[2].model == "c"
    change(record)
    with pytest.raises(StoreError) as caught:
        typed(record, "result.json")
    assert str(caught.value).startswith(f"result.json: {where}: expected a gpu-pairs result record (")
    assert expected in str(caught.value)


def test_a_further_background_faster_beside_the_others_than_alone_is_noted_on_jobs():
    from pytest_gpu_pairs.record.plausible import with_impossible_notes

    jobs = [{"role": "fg", "progress_ratio": 0.5}, {"role": "bg", "progress_ratio": 0.5},
            {"role": "bg2", "progress_ratio": 1.2}]
    noted = with_impossible_notes({"n_jobs": 3, "jobs": jobs, "notes": {"jobs": "bg2: 2 lines ignored"}})
    assert noted["notes"]["jobs"].startswith("bg2: 2 lines ignored; suspect: progress above 1 (bg2 1.200)")
    assert with_impossible_notes(noted)["notes"]["jobs"] == noted["notes"]["jobs"]  # noted once, however often
    assert "jobs" not in with_impossible_notes({"n_jobs": 3, "jobs": jobs[:2] + [{"role": "bg2", "progress_ratio": 0.9}],
                                                "notes": {}})["notes"]
