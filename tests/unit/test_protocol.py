import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.protocol import Progress, ProgressWriter


def test_writer_and_reader_round_trip(tmp_path):
    path = tmp_path / "p.jsonl"
    clock = iter([0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0])
    writer = ProgressWriter(str(path), clock=lambda: next(clock))
    writer.ready()
    writer.step(10, 0.1)
    writer.step(20, 0.2)
    writer.result({"acc": 1.0}, 20, None)
    progress = Progress.read(path)
    assert progress.ready_t == 0.0
    assert progress.total_steps == 20
    assert progress.result["metrics"] == {"acc": 1.0}


def test_half_written_last_line_is_ignored(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"event":"ready","t":1.0}\n{"event":"step","step":5,"t":2.0}\n{"event":"st')
    progress = Progress.read(path)
    assert progress.steps == [(1.0, 1), (2.0, 5)]


def test_steps_between_interpolates():
    progress = Progress(ready_t=0.0, steps=[(0.0, 1), (10.0, 101)])
    assert progress.steps_between(2.0, 4.0) == pytest.approx(20.0)
    assert progress.steps_between(-5.0, 20.0) == pytest.approx(101.0)
    assert progress.training_rate() == pytest.approx(10.0)


def test_a_one_step_run_has_no_pace_rather_than_a_zero_one():
    progress = Progress(ready_t=0.0, steps=[(0.0, 1), (1.4, 1)])
    assert progress.training_rate() is None


@given(st.lists(st.tuples(st.floats(0.01, 5), st.integers(0, 50)), min_size=2, max_size=30),
       st.floats(0, 200), st.floats(0, 200))
def test_steps_between_is_monotone_and_bounded(increments, a, b):
    t, s, points = 0.0, 1, []
    for dt, ds in increments:
        t, s = t + dt, s + ds
        points.append((t, s))
    progress = Progress(ready_t=points[0][0], steps=points)
    lo, hi = min(a, b), max(a, b)
    between = progress.steps_between(lo, hi)
    assert 0 <= between <= points[-1][1] + 1e-6
