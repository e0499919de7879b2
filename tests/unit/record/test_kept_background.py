"""A kept-running background trains its run again in its process: every run it ends is read from
its progress file as a cycle, and the runs that overlapped the foreground's carry the share of them
that was shared, so its accuracy while shared can be told from its accuracy alone."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.protocol import Progress, ProgressReader, ProgressWriter
from pytest_gpu_pairs.record.measurement import BackgroundRun, BackgroundRuns, JobOutcome


def test_a_cycle_event_round_trips_with_its_metrics_and_step_count(tmp_path):
    path = tmp_path / "p.jsonl"
    clock = iter(float(t) for t in range(100))
    writer = ProgressWriter(str(path), clock=lambda: next(clock))
    writer.ready()
    writer.step(10, 1.0, force=True)
    writer.cycle({"acc": 0.5}, 10)
    writer.step(20, 2.0, force=True)
    writer.cycle({"acc": 0.6}, 20)
    for progress in (Progress.read(path), ProgressReader(path).read()):
        assert [(c["steps"], c["metrics"]) for c in progress.cycles] == [(10, {"acc": 0.5}), (20, {"acc": 0.6})]
        assert progress.total_steps == 20 and progress.result is None


def test_a_cycle_event_with_metrics_that_are_not_an_object_is_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"event":"ready","t":1.0}\n{"event":"cycle","t":2.0,"metrics":[1],"steps":3}\n')
    progress = Progress.read(path)
    assert progress.cycles == [] and progress.bad_lines == 1 and "metrics" in progress.first_problem


def _kept(ready_t: float, ends: list[float]) -> BackgroundRuns:
    progress = Progress(ready_t=ready_t, steps=[(ready_t, 1)],
                        cycles=[{"t": t, "steps": i + 1, "metrics": {"acc": float(i)}} for i, t in enumerate(ends)])
    outcome = JobOutcome(role="bg", model="m", argv=[], log_path="", progress_path="", start_t=0.0,
                         end_t=(ends[-1] if ends else ready_t) + 1, returncode=-15, stopped_by_harness=True,
                         progress=progress)
    return BackgroundRuns((BackgroundRun(index=1, outcome=outcome, ready_t=ready_t),))


def test_the_runs_that_overlapped_the_window_carry_the_share_inside_it():
    runs = _kept(0.0, [10.0, 20.0, 30.0, 40.0])
    sharing = runs.cycles_sharing(15.0, 35.0)
    assert [c["metrics"]["acc"] for c in sharing] == [1.0, 2.0, 3.0]
    assert [c["shared"] for c in sharing] == pytest.approx([0.5, 1.0, 0.5])
    assert runs.last_completed_metrics() == {"acc": 3.0}


@given(st.lists(st.floats(0.1, 50.0), min_size=1, max_size=8), st.floats(0.0, 200.0), st.floats(0.0, 200.0))
def test_a_shared_fraction_lies_in_0_1_and_the_shared_time_never_exceeds_the_window(gaps, a, b):
    ends, t = [], 0.0
    for gap in gaps:
        t += gap
        ends.append(t)
    start, end = min(a, b), max(a, b)
    sharing = _kept(0.0, ends).cycles_sharing(start, end)
    assert all(0 < c["shared"] <= 1 + 1e-9 for c in sharing)
    starts = [0.0] + ends[:-1]
    inside = sum(max(0.0, min(end, e) - max(start, s)) for s, e in zip(starts, ends))
    assert sum(c["shared"] * (ends[int(c["metrics"]["acc"])] - starts[int(c["metrics"]["acc"])])
               for c in sharing) == pytest.approx(inside, abs=1e-6)
    assert inside <= (end - start) + 1e-9
