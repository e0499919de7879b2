"""GPM's shares over a window, from a sample at each end: what the profile stores and the planner's
MPS model reads as how much of the card a job's kernels occupy."""
from __future__ import annotations

import pytest
from support.fake_nvml import FakeClock, FakeNvml, FakeProcess

from pytest_gpu_pairs.devices.nvml import Gpu
from pytest_gpu_pairs.monitor.gpm import GpmWindow


def _gpu(**script):
    clock = FakeClock()
    nvml = FakeNvml(clock, processes=[FakeProcess(101, 0.0, 4.0, 1000.0, 60.0)], **script)
    return Gpu(0, nvml=nvml, clock=clock, sleep=clock.sleep), nvml, clock


def test_the_shares_are_the_load_between_the_windows_two_samples_and_both_are_freed():
    gpu, nvml, clock = _gpu(gpm_supported=True)
    window = GpmWindow(gpu)
    clock.advance(1.0)
    window.open()
    clock.advance(4.0)  # the job computes at 60 % of the SMs for 3 s of these 4, then ends
    shares = window.close()
    assert shares.gpm_sm_util_pct == pytest.approx(45.0, abs=0.1)
    assert shares.gpm_dram_bw_pct == pytest.approx(22.5, abs=0.1)
    assert shares.gpm_sm_occupancy_pct == pytest.approx(22.5, abs=0.1)
    assert shares.gpm_fp32_util_pct == pytest.approx(11.25, abs=0.1)
    assert shares.gpm_tensor_util_pct == 0.0 and shares.gpm_fp16_util_pct == 0.0
    assert shares.unmeasured == {}
    assert len(nvml.gpm_samples) == 2 and all(s.freed for s in nvml.gpm_samples)


@pytest.mark.parametrize("script, says", [({"gpm_supported": False}, "does not serve GPM"),
                                          ({"gpm_supported": True, "gpm_sample_fails": True}, "NVML took no GPM sample")])
def test_a_card_without_gpm_leaves_both_shares_unmeasured_with_the_reason(script, says):
    gpu, nvml, clock = _gpu(**script)
    window = GpmWindow(gpu)
    window.open()
    clock.advance(2.0)
    shares = window.close()
    assert shares.gpm_sm_util_pct is None and shares.gpm_dram_bw_pct is None and shares.gpm_sm_occupancy_pct is None
    assert set(shares.unmeasured) == {"gpm_sm_util_pct", "gpm_sm_occupancy_pct", "gpm_tensor_util_pct",
                                      "gpm_fp32_util_pct", "gpm_fp16_util_pct", "gpm_dram_bw_pct"}
    assert all(says in why for why in shares.unmeasured.values())
    assert all(s.freed for s in nvml.gpm_samples)


def test_a_window_never_closed_frees_its_sample():
    gpu, nvml, _ = _gpu(gpm_supported=True)
    window = GpmWindow(gpu)
    window.open()
    window.discard()
    assert [s.freed for s in nvml.gpm_samples] == [True]
