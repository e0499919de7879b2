"""Every read of a job's output is bounded per call and in total, whatever the job does to its
files: a sparse file of terabytes, a line that never ends, a file read while it grows."""
from __future__ import annotations

import io
import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpu_pairs.protocol import MAX_BACKLOG_BYTES, MAX_LINE_BYTES, Progress, ProgressReader, bounded_lines
from pytest_gpu_pairs.run.joblog import has_output, parse_log_metrics

TERABYTES = 8 << 40


def step(n: int, t: float) -> bytes:
    return (json.dumps({"event": "step", "step": n, "t": t}) + "\n").encode()


def test_a_progress_file_made_sparse_and_terabytes_long_is_read_from_its_newest_part(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"event": "ready", "t": 1.0}\n' + step(2, 2.0))
    os.truncate(path, TERABYTES)
    with open(path, "ab") as handle:
        handle.write(b"\n" + step(3, 3.0) + step(4, 4.0))
    progress = Progress.read(path)
    assert progress.steps[-2:] == [(3.0, 3), (4.0, 4)]
    assert progress.skipped_bytes >= TERABYTES - MAX_BACKLOG_BYTES and progress.ready_t is not None
    assert "bytes of progress file skipped unread" in progress.problem_note


def test_a_reader_that_saw_the_ready_event_keeps_it_across_a_skip(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"event": "ready", "t": 1.0}\n' + step(2, 2.0))
    reader = ProgressReader(path)
    assert reader.read().ready_t == 1.0
    os.truncate(path, TERABYTES)
    with open(path, "ab") as handle:
        handle.write(b"\n" + step(9, 9.0))
    progress = reader.read()
    assert progress.ready_t == 1.0 and progress.steps[-1] == (9.0, 9) and progress.bad_lines <= 1


def test_a_line_that_never_ends_is_refused_once_however_often_it_is_read(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(step(1, 1.0))
    reader = ProgressReader(path)
    for _ in range(5):  # it grows between reads, past any protocol line
        with open(path, "ab") as handle:
            handle.write(b"x" * (MAX_LINE_BYTES + 1))
        assert reader.read().bad_lines == 1
    with open(path, "ab") as handle:
        handle.write(b"\n" + step(2, 2.0))
    progress = reader.read()
    assert progress.bad_lines == 1 and progress.steps == [(1.0, 1), (2.0, 2)]


def test_a_log_made_sparse_still_gives_its_metrics_and_output(tmp_path):
    log = tmp_path / "fg.log"
    log.write_text("# gpu-pairs: start\nepoch 1\n")
    os.truncate(log, TERABYTES)
    with open(log, "ab") as handle:
        handle.write(b"\nAccuracy: 0.75\n")
    assert parse_log_metrics(str(log), {"accuracy": r"Accuracy: ([0-9.]+)"}) == {"accuracy": 0.75}
    assert has_output(str(log)) is True


@given(data=st.binary(max_size=2000), max_bytes=st.integers(1, 64), budget=st.integers(0, 3000))
def test_bounded_lines_reads_no_more_than_its_budget(data, max_bytes, budget):
    handle = io.BytesIO(data)
    lines = list(bounded_lines(handle, max_bytes, budget))
    assert handle.tell() <= budget
    assert all(len(line) <= max_bytes + 1 for line, _ in lines)
    if budget >= len(data):
        assert b"".join(line for line, cut in lines if not cut) == b"".join(
            line for line, cut in bounded_lines(io.BytesIO(data), max_bytes) if not cut)


@settings(max_examples=50)
@given(steps=st.lists(st.integers(0, 10**6), min_size=1, max_size=30), cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_a_file_read_while_it_grows_reads_as_the_whole_file_read_once(tmp_path_factory, steps, cuts):
    content = b'{"event": "ready", "t": 0.5}\n' + b"".join(step(n, float(i + 1)) for i, n in enumerate(sorted(steps)))
    path = tmp_path_factory.mktemp("grow") / "p.jsonl"
    path.write_bytes(b"")
    reader = ProgressReader(path)
    written = 0
    for cut in sorted(set(min(c, len(content)) for c in cuts)) + [len(content)]:
        with open(path, "ab") as handle:
            handle.write(content[written:cut])
        written = cut
        reader.read()
    assert reader.read() == Progress.read(path)
