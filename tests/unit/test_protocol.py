import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import with_peak_allocation

from pytest_gpu_pairs.protocol import MAX_COUNT, Progress, ProgressWriter


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


MALFORMED = {
    "a JSON list": b'[1, 2]\n',
    "a step that is text": b'{"event": "step", "step": "x", "t": 2.0}\n',
    "a step without its number": b'{"event": "step", "t": 2.0}\n',
    "a time that is text": b'{"event": "step", "step": 3, "t": "later"}\n',
    "a time that is NaN": b'{"event": "step", "step": 3, "t": NaN}\n',
    "bytes that are not UTF-8": b'{"event": "step", "step": 3, "t": 2.0, "x": "\xff\xfe"}\n',
    "metrics that are a list": b'{"event": "result", "metrics": [1], "steps": 3, "t": 3.0}\n',
    "an error without a string message": b'{"event": "error", "oom": true, "message": 5, "t": 3.0}\n',
    "JSON nested too deep": b'[' * 100_000 + b'\n',
    "a step of 400 digits": b'{"event": "step", "step": ' + b"1" * 400 + b', "t": 2.0}\n',
    "a step of 5000 digits": b'{"event": "step", "step": ' + b"1" * 5000 + b', "t": 2.0}\n',
    "a step past 2**53": b'{"event": "step", "step": 9007199254740993, "t": 2.0}\n',
    "a time of 1e400": b'{"event": "step", "step": 3, "t": 1e400}\n',
    "an epoch of 400 digits": b'{"event": "step", "step": 3, "t": 2.0, "epoch": ' + b"9" * 400 + b'}\n',
    "result steps of 400 digits": b'{"event": "result", "metrics": {}, "steps": ' + b"1" * 400 + b', "t": 3.0}\n',
}


@pytest.mark.parametrize("line", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_line_is_counted_and_named_never_raised(tmp_path, line):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"event": "ready", "t": 1.0}\n' + line + b'{"event": "step", "step": 9, "t": 4.0}\n')
    progress = Progress.read(path)
    assert progress.steps == [(1.0, 1), (4.0, 9)]
    assert progress.bad_lines == 1
    assert progress.problem_note.startswith("1 malformed progress line(s) ignored (first: line 2: expected")


def test_an_empty_oom_message_still_names_an_oom(tmp_path):
    from pytest_gpu_pairs.run.joblog import detect_oom

    path = tmp_path / "p.jsonl"
    path.write_text('{"event": "error", "oom": true, "message": "", "t": 3.0}\n')
    assert detect_oom(str(tmp_path / "missing.log"), Progress.read(path)).startswith("out of memory")


def test_a_step_report_going_back_in_time_is_refused(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"event":"ready","t":5.0}\n{"event":"step","step":9,"t":1.0}\n{"event":"step","step":10,"t":6.0}\n')
    progress = Progress.read(path)
    assert progress.steps == [(5.0, 1), (6.0, 10)] and progress.bad_lines == 1


@given(st.lists(st.binary(max_size=80), max_size=20))
def test_any_bytes_read_as_progress_without_raising(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("fuzz") / "p.jsonl"
    data = b"\n".join(lines)
    path.write_bytes(data)
    progress = Progress.read(path)
    assert progress.bad_lines <= data.count(b"\n")
    assert all(isinstance(t, float) and isinstance(s, int) for t, s in progress.steps)
    progress.training_rate()
    progress.steps_between(0.0, 1e9)


def test_step_reports_past_the_cap_are_thinned_keeping_first_and_last(tmp_path, monkeypatch):
    monkeypatch.setattr("pytest_gpu_pairs.protocol.MAX_STEPS", 100)
    path = tmp_path / "p.jsonl"
    path.write_text("".join(f'{{"event":"step","step":{i},"t":{float(i)}}}\n' for i in range(1, 1001)))
    progress = Progress.read(path)
    assert len(progress.steps) <= 101
    assert progress.steps[0] == (1.0, 1) and progress.steps[-1] == (1000.0, 1000)
    assert progress.steps_between(1.0, 1000.0) == pytest.approx(999.0)


def test_a_huge_progress_line_without_a_newline_is_not_read_into_memory(tmp_path):
    path = tmp_path / "p.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"event":"ready","t":1.0}\n')
        for _ in range(32):
            handle.write(b"x" * (1 << 20))  # 32 MiB in one line
        handle.write(b'\n{"event":"step","step":7,"t":2.0}\n')
    progress, peak = with_peak_allocation(lambda: Progress.read(path))
    assert peak < 8 * (1 << 20)
    assert progress.steps == [(1.0, 1), (2.0, 7)] and progress.bad_lines == 1
    assert "longer than" in progress.first_problem


@pytest.mark.parametrize(("steady", "written"), [("1", 20), ("", 4)])
def test_a_job_reports_twenty_times_a_second_under_interleaved_rounds_and_four_otherwise(
        tmp_path, monkeypatch, steady, written):
    """Half-second phases need several reports each; elsewhere four a second keep the file small."""
    monkeypatch.setenv("GPU_PAIRS_PROGRESS", str(tmp_path / "p.jsonl"))
    monkeypatch.setenv("GPU_PAIRS_STEADY_STATE", steady)
    writer = ProgressWriter.from_env()
    now = [0.0]
    writer._clock = lambda: now[0]
    writer.ready()
    for step in range(1, 1001):  # a step a millisecond for one second
        now[0] = step / 1000
        writer.step(step, 0.0)
    writer.close()
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert written - 1 <= sum('"event": "step"' in line for line in lines) <= written


@given(st.lists(st.lists(st.tuples(st.floats(0.001, 10.0), st.integers(0, 1000)), min_size=0, max_size=8),
                min_size=1, max_size=4))
def test_runs_of_one_job_chain_into_one_count_that_only_grows_and_keeps_each_runs_pace(runs):
    """Each run counts from its own start; chained, a run's steps continue from the run before it,
    so the count never falls and every step difference inside a run is that run's own."""
    progresses, t = [], 0.0
    for run in runs:
        p, step = Progress(), 0
        for gap, more in run:
            t, step = t + gap, step + more
            p.steps.append((t, step))
        progresses.append(p)
        t += 5.0
    chained = Progress.chained(progresses)
    assert [t for t, _ in chained.steps] == [t for p in progresses for t, _ in p.steps]
    assert all(b[1] >= a[1] for a, b in zip(chained.steps, chained.steps[1:]))
    position = 0
    for p in progresses:
        inner = chained.steps[position:position + len(p.steps)]
        assert [b[1] - a[1] for a, b in zip(inner, inner[1:])] == [b[1] - a[1] for a, b in zip(p.steps, p.steps[1:])]
        position += len(p.steps)


progress_numbers = (st.integers() | st.integers(min_value=10**15, max_value=10**600) | st.floats()
                    | st.text(alphabet="0123456789.e-", min_size=1, max_size=600))


@given(st.lists(st.tuples(st.sampled_from(["ready", "setup", "step", "result", "error"]),
                          progress_numbers, progress_numbers, progress_numbers), max_size=12))
def test_any_numbers_in_events_are_read_without_raising_and_steps_stay_counts(tmp_path_factory, events):
    path = tmp_path_factory.mktemp("numbers") / "p.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for kind, step, t, epoch in events:
            fields = {"event": kind, "step": step, "t": t, "epoch": epoch, "steps": step,
                      "metrics": {"accuracy": epoch}, "peak_mem_reserved_mb": t}
            handle.write(json.dumps(fields) + "\n")  # Python writes NaN, Infinity and any integer as they are
    progress = Progress.read(path)
    assert all(math.isfinite(t) and 0 <= s <= MAX_COUNT for t, s in progress.steps)
    assert 0 <= progress.total_steps <= MAX_COUNT
    progress.training_rate()
    progress.steps_between(0.0, 1e9)


def test_the_writer_refuses_a_step_the_reader_would_refuse_and_writes_no_nan(tmp_path):
    path = tmp_path / "p.jsonl"
    writer = ProgressWriter(str(path), clock=lambda: 1.0)
    with pytest.raises(ValueError, match="'epoch'"):
        writer.step(3, math.nan, force=True)
    writer.step(3, 0.5, force=True)
    writer.result({"loss": math.nan, "accuracy": 0.5}, 3, math.inf)
    writer.close()
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    progress = Progress.read(path)
    assert progress.bad_lines == 0 and progress.result["metrics"] == {"loss": None, "accuracy": 0.5}


def _events_file(steps: int) -> bytes:
    lines = [json.dumps({"event": "ready", "t": 0.0})]
    lines += [json.dumps({"event": "step", "t": float(i), "step": i}) for i in range(1, steps + 1)]
    lines.append("not json")
    lines.append(json.dumps({"event": "result", "t": float(steps + 1), "steps": steps, "metrics": {"acc": 0.5}}))
    return ("\n".join(lines) + "\n").encode()


def _same(a: Progress, b: Progress) -> bool:
    keys = ("ready_t", "setup_t", "steps", "result", "error", "bad_lines", "first_problem")
    return all(getattr(a, key) == getattr(b, key) for key in keys)


@given(st.integers(0, 30), st.lists(st.integers(0, 2000), max_size=12))
def test_a_file_read_as_it_grows_reads_as_the_whole_file_read_once(tmp_path_factory, steps, cuts):
    """Appended in any pieces, a line cut anywhere: after each piece the reader gives what a one-off
    read of the file so far gives, and at the end what a read of the whole file gives."""
    from pytest_gpu_pairs.protocol import ProgressReader

    path = tmp_path_factory.mktemp("grow") / "p.jsonl"
    data = _events_file(steps)
    path.write_bytes(b"")
    reader = ProgressReader(path)
    for end in sorted({min(cut, len(data)) for cut in cuts} | {len(data)}):
        path.write_bytes(data[:end])
        assert _same(reader.read(), Progress.read(path))
    assert reader.read().total_steps == max(steps, 1) and reader.read().bad_lines == 1  # ready is step 1


def test_a_reader_parses_only_what_was_appended_since_its_last_read(tmp_path, monkeypatch):
    from pytest_gpu_pairs import protocol

    path = tmp_path / "p.jsonl"
    data = _events_file(50)
    path.write_bytes(data)
    reader = protocol.ProgressReader(path)
    reader.read()
    parsed = []
    real = protocol.parse_event
    monkeypatch.setattr(protocol, "parse_event", lambda raw: parsed.append(raw) or real(raw))
    with path.open("ab") as handle:
        handle.write(json.dumps({"event": "step", "t": 99.0, "step": 99}).encode() + b"\n")
    assert reader.read().steps[-1] == (99.0, 99)
    assert len(parsed) == 1


def test_a_file_replaced_or_truncated_is_read_anew(tmp_path):
    from pytest_gpu_pairs.protocol import ProgressReader

    path = tmp_path / "p.jsonl"
    path.write_bytes(_events_file(20))
    reader = ProgressReader(path)
    assert reader.read().total_steps == 20
    path.write_bytes(_events_file(3))
    assert _same(reader.read(), Progress.read(path))
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(_events_file(5))
    replacement.replace(path)
    assert reader.read().total_steps == 5


def test_a_line_longer_than_any_protocol_line_still_being_written_is_said_once(tmp_path):
    from pytest_gpu_pairs.protocol import MAX_LINE_BYTES, ProgressReader

    path = tmp_path / "p.jsonl"
    path.write_bytes(_events_file(2) + b"x" * (MAX_LINE_BYTES + 10))
    reader = ProgressReader(path)
    assert reader.read().bad_lines == 2 and reader.read().bad_lines == 2
    with path.open("ab") as handle:
        handle.write(b"\n" + json.dumps({"event": "step", "t": 9.0, "step": 9}).encode() + b"\n")
    progress = reader.read()
    assert progress.bad_lines == 2 and progress.steps[-1] == (9.0, 9)
    assert _same(progress, Progress.read(path))


def test_a_fit_runs_memory_events_are_read_in_order_and_bad_ones_refused(tmp_path):
    from pytest_gpu_pairs.protocol import MEMORY_PHASES

    path = tmp_path / "p.jsonl"
    writer = ProgressWriter(str(path), clock=lambda: 5.0)
    for phase in MEMORY_PHASES:
        writer.memory(phase, 10.0, 8.0, 9.0)
    with path.open("a") as handle:
        handle.write('{"event": "memory", "phase": "lunch", "t": 6, "peak_reserved_mb": 1, "peak_allocated_mb": 1, '
                     '"reserved_mb": 1}\n')
        handle.write('{"event": "memory", "phase": "eval", "t": 6, "peak_reserved_mb": -1, "peak_allocated_mb": 1, '
                     '"reserved_mb": 1}\n')
    progress = Progress.read(path)
    assert [m["phase"] for m in progress.memory] == list(MEMORY_PHASES)
    assert progress.bad_lines == 2 and "'phase'" in progress.first_problem


@pytest.mark.parametrize("value, expected", [("", (None, False)), ("21", (21, True)), ("21:restart", (21, False)),
                                             ("0", (None, False)), ("x", (None, False)), ("-3", (None, False))])
def test_the_fit_run_variable_names_the_steps_and_whether_the_run_is_whole(monkeypatch, value, expected):
    from pytest_gpu_pairs.protocol import FIT_RUN_VAR, fit_run_steps

    monkeypatch.setenv(FIT_RUN_VAR, value)
    assert fit_run_steps() == expected


@given(st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12))
def test_the_runs_variable_is_a_count_of_at_least_one_whatever_it_holds(value):
    from unittest import mock

    from pytest_gpu_pairs.protocol import MAX_RUNS, RUNS_VAR, runs_wanted

    with mock.patch.dict("os.environ", {RUNS_VAR: value}):
        wanted = runs_wanted()
    is_count = value.isascii() and value.isdigit() and int(value) >= 1
    assert 1 <= wanted <= MAX_RUNS and wanted == (min(int(value), MAX_RUNS) if is_count else 1)


def test_the_warm_pace_reads_the_runs_after_the_first_and_none_before_two_have_ended():
    cold_first_run = [(0.0, 0), (1.0, 20), (10.0, 200)]  # 20 steps/s, slower in its first second
    warm = [(10.5, 200), (20.0, 400), (20.5, 400), (30.0, 600)]  # 200 steps in each 10 s, evaluation included
    progress = Progress(ready_t=0.0, steps=cold_first_run + warm,
                        cycles=[{"t": 10.0, "steps": 200, "metrics": {}}, {"t": 20.0, "steps": 400, "metrics": {}}])
    assert progress.warm_rate() == pytest.approx(20.0)
    progress.cycles.append({"t": 30.5, "steps": 600, "metrics": {}})
    assert progress.warm_rate() == pytest.approx(400 / 20.5)
    assert Progress(ready_t=0.0, steps=cold_first_run, cycles=progress.cycles[:1]).warm_rate() is None
