"""Records of MPS and time-sliced rounds from synthetic measurements (no GPU): the energy split
each mechanism uses, the serial-energy comparison, the MPS server's memory, and the check that
the jobs really ran under MPS."""
import pytest
from support.helpers import pair

from pytest_gpu_pairs.experiment.cases import expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.record.build import SoloBaseline, round_record
from pytest_gpu_pairs.record.measurement import BackgroundRun, JobOutcome, Measurement
from pytest_gpu_pairs.run.background import BackgroundLoop
from pytest_gpu_pairs.run.environment import Environment
from pytest_gpu_pairs.run.jobs import JobSpec

IDLE_W = 50.0
FG_PID, BG_PID, SERVER_PID = 101, 202, 303


def _progress(start, end, rate):
    """A job training from ``start`` to ``end`` at ``rate`` steps/s, reporting every 0.5 s."""
    points, t = [], start
    while t <= end + 1e-9:
        points.append((t, 1 + round((t - start) * rate)))
        t += 0.5
    return Progress(ready_t=start, steps=points)


def _outcome(role, progress, start, end):
    return JobOutcome(role, "m", [], "log", "progress", start - 1, end + 0.1, 0, progress=progress)


def _samples(start, end, watts, memory=None, sm=None):
    """Samples every 0.1 s of a card drawing ``watts`` from a counter that starts at 0."""
    samples, t = [], start - 0.5
    while t <= end + 0.5:
        samples.append(GpuSample(t=t, energy_mj=(t - start + 0.5) * watts * 1000, power_w=watts,
                                 proc_mem_mb=dict(memory or {}), proc_sm_pct=dict(sm or {}),
                                 roles={FG_PID: "fg", BG_PID: "bg"}))
        t += 0.1
    return samples


def _solo(rate, watts, seconds=10.0):
    progress = _progress(0.0, seconds, rate)
    fg = _outcome("fg", progress, 0.0, seconds)
    return Measurement("solo", fg, fg.training_window, _samples(0.0, seconds, watts), None, None, "n/a", ".")


def _concurrent(tmp_path, watts=300.0, probe=None, sm=None, memory=None):
    fg_progress = _progress(100.0, 120.0, 5.0)      # 100 steps in 20 s (solo: 10 steps/s, so slowdown 2)
    bg_progress = _progress(99.0, 121.0, 2.5)       # 50 steps in the window (solo: 5 steps/s, ratio 0.5)
    loop = BackgroundLoop(JobSpec("bg", "m", [], {}, None, 60), tmp_path, 0)
    loop.runs.append(BackgroundRun(1, _outcome("bg", bg_progress, 99.0, 121.0), 99.0))
    fg = _outcome("fg", fg_progress, 100.0, 120.0)
    return Measurement("concurrent", fg, fg.training_window, _samples(100.0, 120.0, watts, memory, sm), loop.snapshot(), None,
                       "n/a", tmp_path, probe or {})


def _case(sharing):
    experiment = parse_experiment({"name": "x", "defaults": {"sharing": sharing}, "pairs": [pair()]}, "s.json")
    return expand_all([experiment])[0]


ENV = Environment(device="cuda", scale=1.0, sample_hz=10.0, idle_power_w=IDLE_W, host="fixture-host")
# Alone: fg 10 steps/s at 250 W (25 J/step, 20 J above idle), bg 5 steps/s at 250 W (50 J/step, 40 above idle).
SOLO_FG_RUN, SOLO_BG_RUN = _solo(10.0, 250.0), _solo(5.0, 250.0)
SOLO_FG, SOLO_BG = SoloBaseline.measured(SOLO_FG_RUN, ENV), SoloBaseline.measured(SOLO_BG_RUN, ENV)
MPS_PROBE = {"limits": {"fg": {"active_thread_percentage": None, "pinned_mem_limit_mb": None}},
             "control_pid": 9, "server_pids": [SERVER_PID], "client_pids": [BG_PID]}


def test_mps_round_splits_energy_by_progress_times_solo_energy_per_step(tmp_path):
    record = round_record(_case("mps"), _concurrent(tmp_path, probe=MPS_PROBE), SOLO_FG, SOLO_BG, ENV)
    assert record["sharing"] == "mps" and record["case_id"].endswith("-mps")
    assert record["energy_split_method"] == "progress_x_solo_energy"
    above_idle = record["gpu_energy_above_idle_j"]
    assert above_idle == pytest.approx((300 - IDLE_W) * 20, rel=1e-6)
    assert record["fg_gpu_energy_j"] + record["bg_gpu_energy_j"] == above_idle
    # fg: 100 steps x 20 J, bg: 50 steps x 40 J: equal weights, half of the measured total each.
    fg_weight, bg_weight = 100 * 20.0, 50 * 40.0
    assert record["fg_gpu_energy_j"] == pytest.approx(above_idle * fg_weight / (fg_weight + bg_weight), rel=1e-3)
    assert record["mps"]["server_pids"] == [SERVER_PID] and record["failure"] is None


def test_serial_energy_uses_whole_card_energy_per_step_alone(tmp_path):
    record = round_record(_case("mps"), _concurrent(tmp_path, probe=MPS_PROBE), SOLO_FG, SOLO_BG, ENV)
    serial = 100 * 25.0 + 50 * 50.0
    assert record["serial_energy_j"] == pytest.approx(serial, rel=1e-3)
    assert record["gpu_energy_j"] == pytest.approx(300 * 20, rel=1e-6)
    assert record["energy_saved_vs_serial"] == pytest.approx(1 - 6000 / serial, rel=1e-3)
    assert record["concurrency_efficiency"] == pytest.approx(1 / 2.0 + 0.5, rel=0.02)


def test_timeslice_round_keeps_the_sm_utilisation_split(tmp_path):
    measurement = _concurrent(tmp_path, sm={FG_PID: 30.0, BG_PID: 10.0})
    record = round_record(_case("timeslice"), measurement, SOLO_FG, SOLO_BG, ENV)
    assert record["energy_split_method"] == "sm_util" and record["mps"] is None
    assert record["fg_gpu_energy_j"] == pytest.approx(0.75 * record["gpu_energy_above_idle_j"])


def test_mps_without_solo_energy_falls_back_to_time_share_and_says_why(tmp_path):
    no_energy = SoloBaseline.measured(Measurement("solo", SOLO_BG_RUN.fg, SOLO_BG_RUN.window, [], None, None, "n/a", "."), ENV)
    record = round_record(_case("mps"), _concurrent(tmp_path, probe=MPS_PROBE), SOLO_FG, no_energy, ENV)
    assert record["energy_split_method"] == "time_share"
    assert "MPS server instead of its clients" in record["notes"]["energy_split_method"]
    assert record["fg_gpu_energy_j"] + record["bg_gpu_energy_j"] == record["gpu_energy_above_idle_j"]
    assert record["serial_energy_j"] is None and "serial_energy_j" in record["notes"]


def test_peak_vram_under_mps_includes_the_server(tmp_path):
    memory = {FG_PID: 1000.0, BG_PID: 2000.0, SERVER_PID: 300.0}
    record = round_record(_case("mps"), _concurrent(tmp_path, probe=MPS_PROBE, memory=memory), SOLO_FG, SOLO_BG, ENV)
    assert record["peak_vram_mb"] == 3300.0 and record["mps_server_vram_mb"] == 300.0
    assert record["fg_peak_vram_mb"] == 1000.0 and "MPS server" in record["notes"]["peak_vram_mb"]


def test_mps_round_without_a_server_fails_as_not_really_mps(tmp_path):
    probe = {**MPS_PROBE, "server_pids": [], "client_pids": []}
    record = round_record(_case("mps"), _concurrent(tmp_path, probe=probe), SOLO_FG, SOLO_BG, ENV)
    assert "did not become MPS clients" in record["failure"]


def test_a_round_records_the_cards_clocks_over_its_window_only(tmp_path):
    """Clocks outside the foreground's window (the card idling before and after) are left out, so a
    solo and a shared run can be compared at the clocks they ran at."""
    measurement = _concurrent(tmp_path)
    start, end = measurement.window
    for s in measurement.samples:
        inside = start <= s.t <= end
        s.sm_clock_mhz, s.mem_clock_mhz = (1980.0, 3201.0) if inside else (345.0, 3201.0)
        s.power_limit_w, s.clock_event_reasons = 700.0, (0x1 if inside else 0)
    record = round_record(_case("timeslice"), measurement, SOLO_FG, SOLO_BG, ENV)
    assert record["sm_clock_mhz"] == pytest.approx(1980.0) and record["mem_clock_mhz"] == pytest.approx(3201.0)
    assert record["power_limit_w"] == pytest.approx(700.0) and record["clock_event_reasons"]


def test_a_round_without_samples_says_why_it_has_no_clocks(tmp_path):
    measurement = _concurrent(tmp_path)
    measurement.samples = []
    record = round_record(_case("timeslice"), measurement, SOLO_FG, SOLO_BG, ENV)
    assert record["sm_clock_mhz"] is None and "sm_clock_mhz" in record["notes"]


def _interleaved(probe, memory=None):
    """The made-up interleaved case of the phase tests, its jobs and an MPS server holding memory."""
    from dataclasses import replace

    from unit.record import test_phases as phases

    m = phases.measurement()
    samples = tuple(replace(s, proc_mem_mb=dict(memory or {}), roles={FG_PID: "fg", BG_PID: "bg"}) for s in m.samples)
    return replace(m, samples=samples, sharing_probe=probe)


LIMITED = {**MPS_PROBE, "limits": {role: {"active_thread_percentage": 52, "pinned_mem_limit_mb": None}
                                   for role in ("fg", "bg")}}


def test_an_interleaved_mps_case_records_its_server_and_limits_and_does_not_call_the_server_foreign():
    from pytest_gpu_pairs.record.build import interleaved_record

    memory = {FG_PID: 1000.0, BG_PID: 2000.0, SERVER_PID: 66.0}
    record = interleaved_record(_case("mps"), _interleaved(LIMITED, memory), ENV).to_dict()
    assert record["mps"]["server_pids"] == [SERVER_PID] and record["mps"]["limits"] == LIMITED["limits"]
    assert record["failure"] is None and record["other_peak_vram_mb"] is None
    assert record["peak_vram_mb"] == 3066.0 and record["mps_server_vram_mb"] == 66.0
    assert "suspect" not in record["notes"].get("concurrency_efficiency", "")


def test_an_interleaved_mps_case_says_its_solo_phases_ran_under_the_jobs_limits():
    from pytest_gpu_pairs.record.build import interleaved_record

    notes = interleaved_record(_case("mps"), _interleaved(LIMITED), ENV).to_dict()["notes"]
    for key in ("fg_solo_steps_per_s", "bg_solo_steps_per_s", "concurrency_efficiency"):
        assert "MPS client under its limits (active threads: fg 52 %, bg 52 %)" in notes[key]
    unlimited = interleaved_record(_case("mps"), _interleaved(MPS_PROBE), ENV).to_dict()["notes"]
    assert "fg_solo_steps_per_s" not in unlimited


def test_an_interleaved_mps_case_whose_jobs_found_no_server_fails_as_not_really_mps():
    from pytest_gpu_pairs.record.build import interleaved_record

    probe = {**LIMITED, "server_pids": [], "client_pids": []}
    record = interleaved_record(_case("mps"), _interleaved(probe), ENV).to_dict()
    assert "did not become MPS clients" in record["failure"]
    unprobed = interleaved_record(_case("mps"), _interleaved({}), ENV).to_dict()
    assert unprobed["failure"] is None and unprobed["mps"] == {"limits": None, "control_pid": None,
                                                               "server_pids": None, "client_pids": None}
