"""The kernel probe's figures from a profiler's kernel events: counts per step, durations, how much
of the card a launch's grid covers, all weighted by kernel time where the name says so."""
import pytest

from tools.planner_validation.kernel_sizes import summarise


def _kernel(us, grid, occupancy=None):
    args = {"grid": grid, "block": [128, 1, 1]}
    if occupancy is not None:
        args["est. achieved occupancy %"] = occupancy
    return {"cat": "kernel", "dur": us, "args": args}


def test_a_long_kernel_over_the_whole_card_outweighs_many_small_ones():
    kernels = [_kernel(900, [264, 1, 1], 50), *[_kernel(10, [4, 1, 1], 10) for _ in range(10)]]
    figures = summarise(kernels, steps=2, host_s=0.004, sms=132)
    assert figures["kernels_per_step"] == 5.5
    assert figures["kernel_s_per_step"] == pytest.approx(0.0005)
    assert figures["kernel_busy"] == pytest.approx(0.25)
    assert figures["kernel_us_median"] == 10
    assert figures["kernel_us_time_weighted"] == pytest.approx((900 * 900 + 10 * 10 * 10) / 1000)
    assert figures["sm_cover_time_weighted"] == pytest.approx((900 * 1.0 + 100 * 4 / 132) / 1000)
    assert figures["time_in_small_grids"] == pytest.approx(0.1)
    assert figures["achieved_occupancy_time_weighted"] == pytest.approx((900 * 0.5 + 100 * 0.1) / 1000)


def test_a_grid_in_three_dimensions_counts_every_block_and_a_missing_estimate_is_left_out():
    kernels = [_kernel(100, [11, 2, 3]), _kernel(100, [1, 1, 1], 40)]
    figures = summarise(kernels, steps=1, host_s=0.001, sms=132)
    assert figures["sm_cover_time_weighted"] == pytest.approx((66 / 132 + 1 / 132) / 2)
    assert figures["achieved_occupancy_time_weighted"] == pytest.approx(0.4)


def test_no_kernel_is_no_figure_rather_than_a_zero():
    figures = summarise([], steps=5, host_s=1.0, sms=132)
    assert figures["kernels_per_step"] == 0
    for key in ("kernel_us_median", "kernel_us_time_weighted", "sm_cover_time_weighted", "time_in_small_grids",
                "achieved_occupancy_time_weighted"):
        assert figures[key] is None, key
