"""A solo baseline read back from its record is the baseline the measurement gave, so a resumed
session compares its shared runs with exactly what the session that measured the job would have."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.record.build import SoloBaseline, case_record
from pytest_gpu_pairs.record.model import Record
from pytest_gpu_pairs.run.environment import Environment
from unit.record.test_sharing_records import _case, _concurrent, _solo


def _on_disk(record: Record) -> Record:
    return Record.model_validate(json.loads(json.dumps(record.to_dict())))


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.5, 500.0), watts=st.floats(60.0, 700.0), seconds=st.floats(2.0, 40.0),
       idle=st.one_of(st.none(), st.floats(20.0, 59.0)), sampled=st.booleans())
def test_the_recorded_baseline_is_the_measured_one(rate, watts, seconds, idle, sampled):
    env = Environment(device="cuda", scale=1.0, sample_hz=10.0, idle_power_w=idle)
    solo = _solo(rate, watts, seconds)
    if not sampled:
        solo.samples.clear()
    measured = SoloBaseline.measured(solo, env)
    record = case_record(_case("timeslice"), solo, measured, None, env)
    assert SoloBaseline.recorded(_on_disk(record)) == measured
    assert measured.steps_per_s is not None and (measured.cost.j_per_step is not None) == sampled


def test_a_shared_round_compared_with_a_recorded_baseline_is_the_same_record(tmp_path):
    env = Environment(device="cuda", scale=1.0, sample_hz=10.0, idle_power_w=50.0)
    runs = {"fg": _solo(10.0, 250.0), "bg": _solo(5.0, 250.0)}
    measured = {role: SoloBaseline.measured(run, env) for role, run in runs.items()}
    recorded = {role: SoloBaseline.recorded(_on_disk(case_record(_case("timeslice"), run, measured[role], None, env)))
                for role, run in runs.items()}
    shared = _concurrent(tmp_path)
    built = [case_record(_case("timeslice"), shared, solos["fg"], solos["bg"], env).to_dict()
             for solos in (measured, recorded)]
    assert built[0] == built[1]
    assert built[0]["energy_saved_vs_serial"] is not None and built[0]["bg_progress_ratio"] is not None


def test_a_record_without_steps_gives_a_baseline_without_costs():
    older = Record.model_validate({"fg_duration_s": 12.0, "gpu_energy_j": 3000.0})
    assert SoloBaseline.recorded(older) == SoloBaseline(duration_s=12.0)
