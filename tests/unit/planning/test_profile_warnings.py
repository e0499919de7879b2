"""When a stored profile's rate deserves doubt: a host busier than its CPUs while it ran, or a step
time far from the one the folder held before (on a CPU the host's load moves it by factors)."""
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.planning.profile_command import MOVED_FACTOR, load_warnings


def profile(step_s, load=0.5, cpus=2, device="cpu"):
    return {"workload": "pcb", "device": device, "step_time_s": step_s, "load_avg": load, "cpu_count": cpus,
            "measured_at": "2026-12-01T10:00:00+0000"}


@given(st.floats(0.001, 100.0), st.floats(0.001, 100.0))
def test_a_step_time_that_moved_past_the_factor_is_said_with_both_figures(before_s, now_s):
    warnings = load_warnings(profile(now_s), profile(before_s))
    moved = not 1 / MOVED_FACTOR <= now_s / before_s <= MOVED_FACTOR
    assert len(warnings) == (1 if moved else 0)
    if moved:
        assert "stored before" in warnings[0] and "load 0.5 then, 0.5 now" in warnings[0]


@given(st.floats(0.0, 16.0), st.integers(1, 8))
def test_a_host_busier_than_its_cpus_is_said_for_a_cpu_profile_only(load, cpus):
    for device in ("cpu", "cuda"):
        warnings = load_warnings(profile(0.1, load, cpus, device), None)
        assert len(warnings) == (1 if device == "cpu" and load > cpus else 0)


def test_a_first_profile_or_a_bad_stored_one_is_no_comparison():
    assert load_warnings(profile(0.1), None) == []
    assert load_warnings(profile(0.1), {"step_time_s": "fast", "load_avg": [1]}) == []
