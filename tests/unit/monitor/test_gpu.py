"""The NVML sampler and the record's GPU figures, on a fake NVML with a scripted timeline."""
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.fake_nvml import FakeClock, FakeNvml, FakeProcess

from pytest_gpu_pairs.devices.nvml import Gpu
from pytest_gpu_pairs.monitor.gpu import PidRoles, Sampler
from pytest_gpu_pairs.record import build as results
from pytest_gpu_pairs.record.measurement import JobOutcome, Measurement
from pytest_gpu_pairs.record.store import save_samples
from pytest_gpu_pairs.run.environment import Environment

FG, BG, OTHER, BALLAST = 101, 102, 900, 950
IDLE_W = 70.0


def roles_for(mapping=None) -> PidRoles:
    """Roles by a scripted process-group table (fake pids have no real process group)."""
    groups = {FG: FG, BG: BG, OTHER: OTHER, BALLAST: BALLAST} if mapping is None else mapping

    def getpgid(pid):
        if pid not in groups:
            raise ProcessLookupError(pid)
        return groups[pid]

    roles = PidRoles(getpgid)
    roles.register(FG, "fg")
    roles.register(BG, "bg")
    roles.register(BALLAST, "ballast")
    return roles


def sample_timeline(fake: FakeNvml, clock: FakeClock, seconds: float, hz: float = 10.0, roles=None):
    """Samples at 0.05 s + k/hz of the script (off the driver's 0.1 s ticks), as the thread would."""
    gpu = Gpu(nvml=fake, clock=clock, sleep=clock.sleep)
    sampler = Sampler(gpu, hz, roles or roles_for())
    for k in range(int(seconds * hz) + 1):
        clock.t = fake.t0 + 0.05 + k / hz
        sampler.take()
    return gpu, sampler.samples


def measurement(fake, samples, rel_window, mode="concurrent", bg_intervals=()):
    start, end = (fake.t0 + rel_window[0], fake.t0 + rel_window[1])
    fg = JobOutcome("fg", "mnist", [], "fg.log", "fg.jsonl", start, end, 0)
    background = None if mode == "solo" else SimpleNamespace(
        training_intervals=lambda: [(fake.t0 + a, fake.t0 + b) for a, b in bg_intervals])
    return Measurement(mode, fg, (start, end), samples, background, None, "no RAPL here", Path("."))


def figures(fake, gpu, samples, rel_window, idle_w=IDLE_W, **kw):
    notes = results.Notes()
    env = Environment(device="cuda", scale=1.0, sample_hz=10.0, gpu=gpu, idle_power_w=idle_w)
    work = results.Work("timeslice", None, None, results.SoloCost(), results.SoloCost())
    figures = results._gpu_figures(measurement(fake, samples, rel_window, **kw), env, notes, work)
    return results.merged(*figures), notes


def steady_pair(clock, **kw):
    return FakeNvml(clock, power=[(0.0, IDLE_W), (1.0, 300.0), (13.0, IDLE_W)],
                    processes=[FakeProcess(FG, 1.0, 13.0, 874.0, 60.0), FakeProcess(BG, 0.5, 14.0, 1200.0, 30.0),
                               FakeProcess(OTHER, 0.0, 20.0, 20000.0, 0.0),
                               FakeProcess(BALLAST, 0.0, 20.0, 70000.0, 0.0)], **kw)


def test_sampler_records_every_field_and_each_process_with_its_role():
    clock = FakeClock()
    fake = steady_pair(clock)
    _, samples = sample_timeline(fake, clock, 3.0)
    s = samples[20]  # 2.05 s into the script: both jobs computing at 300 W
    assert (s.power_w, s.power_instant_w, s.power_avg_w) == (300.0, 300.0, 300.0)
    assert s.energy_mj is not None and s.util_pct == 90 and s.temp_c == 40 and s.sm_clock_mhz == 1980
    assert s.mem_used_mb == pytest.approx(500 + 874 + 1200 + 20000 + 70000)
    assert s.proc_mem_mb == {FG: 874.0, BG: 1200.0, OTHER: 20000.0, BALLAST: 70000.0}
    assert s.proc_sm_pct == {FG: 60.0, BG: 30.0}
    assert s.roles == {FG: "fg", BG: "bg", OTHER: "other", BALLAST: "ballast"}
    assert sum(1 for x in samples if x.has_sm_data) >= 25  # one driver sample per 0.1 s, none lost or repeated
    assert (s.pstate, s.pcie_gen) == (0, 5)


def test_an_idle_card_reads_its_slower_state_and_link_and_an_unknown_state_is_none():
    clock = FakeClock()
    _, idle = sample_timeline(FakeNvml(clock), clock, 1.0)
    assert {(s.pstate, s.pcie_gen) for s in idle} == {(8, 1)}
    clock = FakeClock()
    _, unknown = sample_timeline(FakeNvml(clock, pstate_unknown=True), clock, 1.0)
    assert {s.pstate for s in unknown} == {None}


def test_samples_are_saved_per_case_with_roles(tmp_path):
    clock = FakeClock()
    _, samples = sample_timeline(steady_pair(clock), clock, 1.0)
    device, process = save_samples(samples, tmp_path)
    header = device.read_text().splitlines()[0]
    assert header == ("t,energy_mj,power_w,power_instant_w,power_avg_w,util_pct,mem_used_mb,temp_c,sm_clock_mhz,"
                      "mem_clock_mhz,power_limit_w,clock_event_reasons,pstate,pcie_gen")
    rows = process.read_text().splitlines()
    assert rows[0] == "t,pid,role,mem_mb,sm_pct" and any(f",{BALLAST},ballast," in r for r in rows)


def test_counter_energy_of_the_window_is_the_true_energy():
    clock = FakeClock()
    fake = steady_pair(clock, counter_period_s=0.02)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, _ = figures(fake, gpu, samples, (2.0, 12.0))
    assert got["gpu_energy_j"] == pytest.approx(fake.true_energy_j(2.0, 12.0), rel=2e-3)
    assert got["gpu_energy_above_idle_j"] == pytest.approx(got["gpu_energy_j"] - IDLE_W * 10.0, rel=1e-12)
    assert got["gpu_power_avg_w"] == pytest.approx(300.0, rel=2e-3)


def test_steady_pair_is_split_by_sm_share_and_sums_exactly():
    clock = FakeClock()
    fake = steady_pair(clock)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, notes = figures(fake, gpu, samples, (2.0, 12.0))
    above = got["gpu_energy_above_idle_j"]
    assert got["energy_split_method"] == "sm_util"
    assert got["fg_gpu_energy_j"] + got["bg_gpu_energy_j"] == above
    assert got["fg_gpu_energy_j"] == pytest.approx(above * 2 / 3, rel=1e-6)
    assert "energy_split_method" not in notes


def test_a_stretch_where_only_the_foreground_computes_is_the_foregrounds():
    clock = FakeClock()
    fake = FakeNvml(clock, power=[(0.0, 300.0), (7.0, 100.0)],
                    processes=[FakeProcess(FG, 0.0, 7.0, 800.0, 60.0), FakeProcess(FG, 7.0, 20.0, 800.0, 20.0),
                               FakeProcess(BG, 0.0, 7.0, 900.0, 30.0)])
    gpu, samples = sample_timeline(fake, clock, 13.0)
    got, _ = figures(fake, gpu, samples, (2.0, 12.0))
    shared, alone = (300.0 - IDLE_W) * 5.0, (100.0 - IDLE_W) * 5.0
    assert got["fg_gpu_energy_j"] == pytest.approx(shared * 2 / 3 + alone, rel=0.02)
    assert got["bg_gpu_energy_j"] == pytest.approx(shared / 3, rel=0.02)
    assert got["fg_gpu_energy_j"] + got["bg_gpu_energy_j"] == got["gpu_energy_above_idle_j"]


def test_per_process_samples_are_found_whatever_time_base_the_driver_stamps_them_in():
    clock = FakeClock()
    fake = steady_pair(clock, stamp_base=1234.5)  # seconds since boot, say, not since the epoch
    gpu, samples = sample_timeline(fake, clock, 14.0)
    assert sum(1 for s in samples if s.has_sm_data) >= 120
    got, _ = figures(fake, gpu, samples, (2.0, 12.0))
    assert got["energy_split_method"] == "sm_util"


def test_without_process_utilisation_the_split_falls_back_to_time_share_and_says_so():
    clock = FakeClock()
    fake = steady_pair(clock, process_util_supported=False)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, notes = figures(fake, gpu, samples, (2.0, 12.0), bg_intervals=[(0.0, 7.0)])
    above = got["gpu_energy_above_idle_j"]
    assert got["energy_split_method"] == "time_share" and "no per-process SM utilisation" in notes["energy_split_method"]
    assert got["fg_gpu_energy_j"] == pytest.approx(above * 10 / 15, rel=1e-9)
    assert got["fg_gpu_energy_j"] + got["bg_gpu_energy_j"] == above


def test_peak_vram_counts_the_jobs_only_never_another_users_process_or_the_ballast():
    clock = FakeClock()
    fake = steady_pair(clock)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, notes = figures(fake, gpu, samples, (2.0, 12.0))
    assert got["peak_vram_mb"] == pytest.approx(874.0 + 1200.0)
    assert (got["fg_peak_vram_mb"], got["bg_peak_vram_mb"]) == (874.0, 1200.0)
    assert got["other_peak_vram_mb"] == 20000.0 and "not in peak_vram_mb" in notes["other_peak_vram_mb"]


def test_another_users_computing_process_is_named_in_the_notes_of_the_split():
    clock = FakeClock()
    fake = steady_pair(clock)
    fake.processes[2].sm_pct = 10.0
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, notes = figures(fake, gpu, samples, (2.0, 12.0))
    assert f"pids [{OTHER}]" in notes["energy_split_method"]
    assert got["fg_gpu_energy_j"] == pytest.approx(got["gpu_energy_above_idle_j"] * 2 / 3, rel=1e-6)


def test_nvml_pids_that_match_no_job_leave_the_peaks_unmeasured_not_zero():
    clock = FakeClock()
    fake = steady_pair(clock)
    gpu, samples = sample_timeline(fake, clock, 14.0, roles=roles_for({}))
    got, notes = figures(fake, gpu, samples, (2.0, 12.0))
    assert got["peak_vram_mb"] is None and "do not match" in notes["peak_vram_mb"]


def test_solo_energy_is_all_the_foregrounds():
    clock = FakeClock()
    fake = steady_pair(clock)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, notes = figures(fake, gpu, samples, (2.0, 12.0), mode="solo")
    assert got["energy_split_method"] == "solo" and got["bg_gpu_energy_j"] == 0.0
    assert got["fg_gpu_energy_j"] == got["gpu_energy_above_idle_j"] and got["bg_peak_vram_mb"] is None


def test_power_fields_the_driver_refuses_are_none_and_energy_is_still_measured():
    clock = FakeClock()
    fake = steady_pair(clock, fields_supported=False)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    assert all(s.power_instant_w is None and s.power_avg_w is None for s in samples)
    got, _ = figures(fake, gpu, samples, (2.0, 12.0))
    assert got["gpu_energy_j"] == pytest.approx(3000.0, rel=1e-3)


def test_without_idle_power_nothing_above_idle_is_invented():
    clock = FakeClock()
    fake = steady_pair(clock)
    gpu, samples = sample_timeline(fake, clock, 14.0)
    got, _ = figures(fake, gpu, samples, (2.0, 12.0), idle_w=None)
    assert got["gpu_energy_j"] is not None
    assert (got["gpu_energy_above_idle_j"], got["fg_gpu_energy_j"], got["energy_split_method"]) == (None, None, None)


@hsettings(max_examples=40, deadline=None)
@given(powers=st.lists(st.floats(60, 700), min_size=1, max_size=5), idle=st.floats(20, 120),
       fg_sm=st.integers(0, 100), bg_sm=st.integers(0, 100), start=st.floats(0.5, 3.0), length=st.floats(0.5, 6.0))
def test_idle_is_subtracted_over_the_window_and_the_split_always_sums_to_it(powers, idle, fg_sm, bg_sm, start, length):
    clock = FakeClock()
    fake = FakeNvml(clock, power=[(i * 2.0, p) for i, p in enumerate(powers)],
                    processes=[FakeProcess(FG, 0.0, 30.0, 500.0, fg_sm), FakeProcess(BG, 0.0, 30.0, 600.0, bg_sm)])
    gpu, samples = sample_timeline(fake, clock, start + length + 0.5)
    got, _ = figures(fake, gpu, samples, (start, start + length), idle_w=idle, bg_intervals=[(0.0, 30.0)])
    window_s = (fake.t0 + (start + length)) - (fake.t0 + start)  # as the Measurement computes it
    assert got["gpu_energy_above_idle_j"] == got["gpu_energy_j"] - idle * window_s
    assert got["fg_gpu_energy_j"] + got["bg_gpu_energy_j"] == got["gpu_energy_above_idle_j"]
    assert got["energy_split_method"] == ("sm_util" if fg_sm + bg_sm > 0 else "time_share")


@hsettings(max_examples=30, deadline=None)
@given(offset=st.floats(0.0, 0.1), watts=st.floats(30, 120))
def test_idle_power_sits_on_counter_updates_so_a_stepping_counter_adds_no_error(offset, watts):
    clock = FakeClock()
    fake = FakeNvml(clock, power=[(0.0, watts)], counter_period_s=0.1)
    clock.advance(offset)
    gpu = Gpu(nvml=fake, clock=clock, sleep=clock.sleep)
    assert gpu.idle_power_w(3.0) == pytest.approx(watts, rel=2e-3)


def test_the_sampler_thread_samples_at_its_rate_and_stops():
    clock = FakeClock()
    fake = steady_pair(clock)
    sampler = Sampler(Gpu(nvml=fake), 100.0, roles_for()).start()
    time.sleep(0.3)
    samples = sampler.stop()
    assert 15 <= len(samples) <= 40
    assert sampler.stop() is samples and not sampler._thread.is_alive()


def test_clock_event_reasons_are_named_and_unknown_bits_kept():
    from pytest_gpu_pairs.monitor.samples import clock_event_names

    assert clock_event_names(None) is None and clock_event_names(0) == []
    assert clock_event_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert clock_event_names(0x1000) == ["other_0x1000"]
