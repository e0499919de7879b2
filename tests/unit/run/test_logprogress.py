"""Progress read from a job's own log: the formats of tests/data/logformats, line arrival times, and
the rules of the named groups. The follower is driven by hand here (``poll`` with a given time), so
nothing depends on timing."""
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import DATA

from pytest_gpu_pairs.experiment.logformats import PRESETS, preset_pattern
from pytest_gpu_pairs.protocol import MAX_COUNT, STEADY_STEP_INTERVAL_S
from pytest_gpu_pairs.run import logprogress
from pytest_gpu_pairs.run.joblog import HARNESS_LINE
from pytest_gpu_pairs.run.logprogress import MAX_LINE_BYTES, LogFollower, LogProgress

FORMATS = sorted((DATA / "logformats").glob("*.json"))


def fmt(path):
    return json.loads(path.read_text(encoding="utf-8"))


def follow(tmp_path, pattern, ready_pattern=None):
    log = tmp_path / "job.log"
    log.write_bytes(b"")
    return log, LogFollower(log, LogProgress(pattern, ready_pattern))


def append(log, text):
    with open(log, "ab") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)


@pytest.mark.parametrize("path", FORMATS, ids=lambda p: p.stem)
def test_each_formats_real_lines_give_its_steps(tmp_path, path):
    data = fmt(path)
    log, follower = follow(tmp_path, preset_pattern(data["preset"]))
    pieces = [piece + end for line in data["sample"] for piece, end in
              zip(line.split("\r"), ["\r"] * line.count("\r") + ["\n"])]
    for t, piece in enumerate(pieces):  # one line (or redrawn bar) per poll, a second apart: none merged
        append(log, piece)
        follower.poll(t=float(t))
    assert [step for _, step in follower.progress().steps] == data["sample_steps"]


def test_every_preset_has_a_log_format_in_the_test_data():
    assert {fmt(p)["preset"] for p in FORMATS} == set(PRESETS)


def test_a_line_is_stamped_when_it_arrives_whole(tmp_path):
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    append(log, f"{HARNESS_LINE} start argv=['train.py', 'step 99']\nstep 1\n")
    follower.poll(t=10.0)
    append(log, "step 2")  # not yet a whole line
    follower.poll(t=11.0)
    append(log, "\nstep 3\n")
    follower.poll(t=12.0)
    progress = follower.progress()
    assert progress.steps == [(10.0, 1), (12.0, 3)]  # step 2 and 3 arrived together: the newer one stands
    assert progress.ready_t == 10.0 and progress.source == "log"


def test_progress_bars_redrawn_with_carriage_returns_are_lines(tmp_path):
    log, follower = follow(tmp_path, preset_pattern("huggingface_trainer"))
    for t, step in enumerate(range(1, 6)):
        append(log, f"\r{step * 20:3d}%|██        | {step}/5 [00:01<00:02, 10.00it/s]")
        follower.poll(t=float(t))
    append(log, "\n")
    follower.poll(t=9.0)
    assert [s for _, s in follower.progress().steps] == [1, 2, 3, 4, 5]


def test_points_closer_than_the_protocols_interval_keep_only_the_newest(tmp_path):
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    for i in range(1, 41):
        append(log, f"step {i}\n")
        follower.poll(t=i * STEADY_STEP_INTERVAL_S / 4)
    steps = follower.progress().steps
    assert steps[0] == (STEADY_STEP_INTERVAL_S / 4, 1) and steps[-1][1] == 40
    gaps = [b[0] - a[0] for a, b in zip(steps[:-1], steps[1:-1])]
    assert all(gap >= STEADY_STEP_INTERVAL_S for gap in gaps)


def test_steps_only_grow_and_another_bar_is_not_counted():
    parser = LogProgress(preset_pattern("huggingface_trainer"))
    for t, line in enumerate(["| 3/100 [", "| 7/8 [", "| 2/100 [", "| 9/100 ["]):
        parser.feed(line, float(t))
    assert parser.progress().steps == [(0.0, 3), (3.0, 9)]


def test_a_position_without_an_epoch_group_rolls_over_to_the_next_epoch():
    parser = LogProgress(r"batch (?P<batch>\d+) of (?P<batches>\d+)")
    for t, batch in enumerate([10, 20, 5, 15]):
        parser.feed(f"batch {batch} of 30", float(t))
    assert [s for _, s in parser.progress().steps] == [10, 20, 35, 45]


def test_epochs_alone_count_in_epochs_with_fractions():
    parser = LogProgress(r"'epoch': (?P<epoch>[0-9.]+)")
    for t, epoch in enumerate(["0.25", "0.5", "1.0", "1.75"]):
        parser.feed(f"{{'loss': 0.69, 'epoch': {epoch}}}", float(t))
    assert [s for _, s in parser.progress().steps] == [0.25, 0.5, 1, 1.75]


def test_with_a_ready_pattern_readiness_is_its_first_match():
    parser = LogProgress(r"step (?P<step>\d+)", ready_pattern=r"warm-up done")
    parser.feed("step 1", 1.0)
    assert parser.progress().ready_t is None
    parser.feed("warm-up done", 2.0)
    parser.feed("step 2", 3.0)
    assert parser.progress().ready_t == 2.0


def test_a_line_longer_than_the_cap_is_matched_on_its_start_and_memory_stays_bounded(tmp_path):
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    append(log, "step 1 " + "x" * (3 * MAX_LINE_BYTES))
    follower.poll(t=1.0)
    assert len(follower._partial) <= MAX_LINE_BYTES
    append(log, "step 999 is the same line\nstep 2\n")
    follower.poll(t=2.0)
    assert [s for _, s in follower.progress().steps] == [1, 2]


def test_stop_stamps_the_last_lines_no_later_than_the_jobs_exit(tmp_path):
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    follower.clock = lambda: 100.0
    append(log, "step 1\nstep 2\n")
    follower.stop(until=50.0)
    assert follower.progress().steps == [(50.0, 2)]


def test_what_was_read_is_saved_and_read_back_exactly(tmp_path):
    parser = LogProgress(r"step (?P<step>\d+)")
    for t in range(5):
        parser.feed(f"step {t * 3}", float(t))
    logprogress.save(parser.progress(), tmp_path / "fg.log-progress.jsonl")
    back = logprogress.load(tmp_path / "fg.log-progress.jsonl")
    assert back == parser.progress()


LINES = [f"| epoch {e:3d} | {b:5d}/  100 batches | lr 20.00\n" for e in (1, 2) for b in range(10, 101, 10)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len("".join(LINES)) - 1), max_size=12, unique=True))
def test_how_the_log_is_cut_into_reads_does_not_change_the_steps(cuts):
    text = "".join(LINES).encode()
    pieces = [text[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)])]
    whole, cut = LogProgress(preset_pattern("pytorch_word_language_model")), \
        LogProgress(preset_pattern("pytorch_word_language_model"))
    for t, line in enumerate(LINES):
        whole.feed(line.rstrip("\n"), float(t))
    follower = LogFollower("unused", cut)
    for t, piece in enumerate(pieces):
        follower._feed(piece, float(t))
    full = [s for _, s in whole.progress().steps]
    got = [s for _, s in cut.progress().steps]
    assert got[-1] == full[-1] == 200
    assert all(s in full for s in got) and got == sorted(got)


def test_a_log_far_ahead_of_the_reader_is_skipped_to_its_newest_lines(tmp_path):
    """A job printing faster than the log is read: a poll reads a bounded amount, jumps over the
    backlog to the newest chunk, and says how much it skipped."""
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    lines = b"".join(f"step {i}\n".encode() for i in range(1, 400_001))  # 3.5 MiB
    append(log, lines)
    follower.poll(t=1.0)
    assert follower._offset == len(lines)  # the newest chunk only, then the end
    steps = follower.progress().steps
    assert steps[-1][1] == 400_000 and steps[0][1] > 390_000  # only the newest lines were read
    skipped = follower.progress().skipped_bytes
    assert skipped > len(lines) - logprogress.MAX_BACKLOG_BYTES - logprogress.READ_CHUNK
    assert "bytes of log skipped unread" in follower.progress().problem_note


class RecordingLock:
    """The follower's lock, recording when it is taken and given back."""

    def __init__(self, events):
        self.events = events

    def __enter__(self):
        self.events.append("take")

    def __exit__(self, *exc):
        self.events.append("give back")


def test_a_poll_reads_a_bounded_amount_and_gives_the_lock_back_after_each_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(logprogress, "READ_CHUNK", 4096)
    monkeypatch.setattr(logprogress, "MAX_BACKLOG_BYTES", 64 * 4096)
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    append(log, b"".join(f"step {i}\n".encode() for i in range(1, 15_001)))  # 123 KiB: behind, not skipped
    events = []
    feed = follower._feed
    follower._lock = RecordingLock(events)
    follower._feed = lambda chunk, t: (events.append("feed"), feed(chunk, t))
    follower.poll(t=1.0)
    assert events == ["take", "feed", "give back"] * logprogress.CHUNKS_PER_POLL
    assert follower._offset < log.stat().st_size and follower.progress().skipped_bytes == 0
    follower.stop(until=2.0)  # the last read reaches the end
    assert follower.progress().steps[-1][1] == 15_000


def test_stop_reads_no_further_than_the_log_was_long_when_it_stopped(tmp_path):
    log, follower = follow(tmp_path, r"step (?P<step>\d+)")
    append(log, "step 1\n")
    sizes = iter([log.stat().st_size])
    follower._size = lambda: next(sizes)
    append(log, "step 2\n")  # written after the size was taken: a leftover still printing
    follower.stop(until=5.0)
    assert [s for _, s in follower.progress().steps] in ([1], [2])


@given(st.lists(st.text(alphabet="0123456789.,e-", min_size=1, max_size=500), min_size=1, max_size=10))
def test_numbers_of_any_length_in_captured_groups_give_finite_counts(numbers):
    for pattern in (r"step (?P<step>\S+)", r"step (?P<step>\S+) of (?P<total>\S+)",
                    r"batch (?P<batch>\S+)/(?P<batches>\S+) epoch (?P<epoch>\S+)", r"epoch (?P<epoch>\S+)"):
        parser = LogProgress(pattern)
        for t, text in enumerate(numbers):
            parser.feed(f"step {text} of {text}", float(t))
            parser.feed(f"batch {text}/{text} epoch {text}", float(t))
            parser.feed(f"epoch {text}", float(t))
        progress = parser.progress()
        assert all(math.isfinite(s) and 0 <= s <= MAX_COUNT for _, s in progress.steps)
        logprogress.save(progress, "/dev/null")
        json.dumps([s for _, s in progress.steps], allow_nan=False)


def test_a_pattern_that_reads_no_step_from_a_log_with_lines_says_so_and_quotes_a_line():
    parser = LogProgress(r"^Iteration (?P<step>\d+)")
    lines = [f"{HARNESS_LINE} start", "log job 1 of 2", "", "Train Epoch: 1 [640/60000]\tLoss: 1.36",
             "Train Epoch: 1 [1280/60000]\tLoss: 1.02"]
    for t, line in enumerate(lines):
        parser.feed(line, float(t))
    said = parser.progress().no_match
    assert said == ("its progress_pattern '^Iteration (?P<step>\\\\d+)' matched no step in the 3 line(s) of its log; "
                    "one of them: 'Train Epoch: 1 [640/60000]\\tLoss: 1.36'")  # the repeated kind, not the banner
    parser.feed("Iteration 3", 9.0)
    assert parser.progress().no_match is None and parser.progress().steps == [(9.0, 3)]


def test_a_log_without_lines_of_its_own_is_no_pattern_problem():
    parser = LogProgress(r"^Iteration (?P<step>\d+)")
    parser.feed(f"{HARNESS_LINE} start", 0.0)
    parser.feed("   ", 1.0)
    assert parser.progress().no_match is None
