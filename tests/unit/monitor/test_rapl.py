"""RAPL package energy on a fake powercap tree: domains, unreadable cases, wrap-around."""
import time

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from support.fake_nvml import FakeClock

from pytest_gpu_pairs.devices.rapl import package_domains
from pytest_gpu_pairs.monitor.cpu import RaplSampler

MAX_RANGE = 262_143_328_850


def zone(root, name, label, energy=0, max_range=MAX_RANGE):
    path = root / name
    path.mkdir(parents=True)
    (path / "name").write_text(label + "\n")
    (path / "energy_uj").write_text(f"{energy}\n")
    (path / "max_energy_range_uj").write_text(f"{max_range}\n")
    return path


def test_only_package_zones_count_not_their_subzones_nor_psys(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0")
    zone(tmp_path, "intel-rapl:0:0", "core")
    zone(tmp_path, "intel-rapl:1", "package-1")
    zone(tmp_path, "intel-rapl:2", "psys")
    domains, reason = package_domains(tmp_path)
    assert [d.name for d in domains] == ["package-0", "package-1"] and reason is None


def test_missing_or_unreadable_rapl_gives_a_reason_and_no_figure(tmp_path):
    sampler = RaplSampler(tmp_path / "nowhere")
    assert sampler.energy_j(0, 1) is None and "does not exist" in sampler.unavailable_reason
    broken = zone(tmp_path, "intel-rapl:0", "package-0")
    (broken / "energy_uj").unlink()
    (broken / "energy_uj").mkdir()
    sampler = RaplSampler(tmp_path)
    assert sampler.method is None and "intel-rapl:0" in sampler.unavailable_reason


@hsettings(max_examples=150, deadline=None)
@given(start=st.integers(0, MAX_RANGE - 1),
       steps=st.lists(st.tuples(st.integers(0, MAX_RANGE - 1), st.integers(0, MAX_RANGE - 1)), min_size=1, max_size=30))
def test_unwrapped_energy_is_the_sum_of_increments_through_any_number_of_wraps(tmp_path_factory, start, steps):
    root = tmp_path_factory.mktemp("powercap")
    files = [zone(root, f"intel-rapl:{i}", f"package-{i}", start) / "energy_uj" for i in range(2)]
    clock = FakeClock(0.0)
    sampler = RaplSampler(root, clock=clock)
    values = [start, start]
    sampler.read()
    for a, b in steps:
        clock.advance(0.5)
        values = [(values[0] + a) % MAX_RANGE, (values[1] + b) % MAX_RANGE]
        for path, value in zip(files, values):
            path.write_text(f"{value}\n")
        sampler.read()
    expected = sum(a + b for a, b in steps) / 1e6
    assert sampler.readings[-1][1] == pytest.approx(expected, rel=1e-12)
    assert sampler.energy_j(0.0, clock.t) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_window_energy_is_interpolated_between_readings(tmp_path):
    path = zone(tmp_path, "intel-rapl:0", "package-0", MAX_RANGE - 50_000_000) / "energy_uj"
    clock = FakeClock(100.0)
    sampler = RaplSampler(tmp_path, clock=clock)
    sampler.read()
    for value in (MAX_RANGE - 10_000_000, 30_000_000, 70_000_000):  # 40 W per 1 s interval, wrapping once
        clock.advance(1.0)
        path.write_text(f"{value}\n")
        sampler.read()
    assert sampler.energy_j(100.5, 102.5) == pytest.approx(80.0)
    assert sampler.energy_j(99.0, 101.0) is None and "do not cover" in sampler.unavailable_reason


def test_the_reading_thread_reads_periodically_and_stops(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 5)
    sampler = RaplSampler(tmp_path, period_s=0.02).start()
    time.sleep(0.2)
    sampler.stop()
    count = len(sampler.readings)
    time.sleep(0.05)
    assert count >= 5 and len(sampler.readings) == count
