"""The live status line: what it shows, that it fits, that it is erased (integration/test_live.py: with
real rounds, without a tty and in a real terminal)."""
import io
import json
import time
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.monitor.samples import GpuSample
from pytest_gpu_pairs.plugin.live import (
    ERASE_TO_END,
    RESTORE_CURSOR,
    SAVE_CURSOR,
    CaseContext,
    LiveLine,
    Pace,
    Snapshot,
    job_eta_s,
    last_progress,
    render,
    session_eta_s,
)


def fake_round(tmp_path, events, samples=()):
    (tmp_path / "fg.progress.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + '{"event": "st')
    return SimpleNamespace(fg_job=SimpleNamespace(model="mnist"), bg_job=SimpleNamespace(model="resnet20"),
                           out_dir=tmp_path, sampler=SimpleNamespace(samples=list(samples)))


def test_the_line_shows_elapsed_epoch_step_power_and_vram(tmp_path):
    sample = GpuSample(t=0.0, power_w=212.4, mem_used_mb=9000.0, proc_mem_mb={11: 800.0, 12: 1300.0},
                       roles={11: "fg", 12: "bg"})
    round_ = fake_round(tmp_path, [{"event": "ready", "t": 1}, {"event": "step", "step": 420, "epoch": 0.37, "t": 2}],
                        [sample])
    stream, clock = io.StringIO(), iter([100.0, 175.0]).__next__
    line = LiveLine(stream, room=lambda: 120, clock=clock)
    line.round_started(round_)
    line.draw()
    out = stream.getvalue()
    assert out.startswith(SAVE_CURSOR) and out.endswith(ERASE_TO_END + RESTORE_CURSOR)
    assert "[mnist+resnet20 pair 1:15] | fg epoch 0.37 step 420 | 212 W | 2100 MB" in out
    line.round_ended(round_)
    assert stream.getvalue().endswith(RESTORE_CURSOR + ERASE_TO_END)


def test_before_the_foreground_starts_it_says_so_and_without_a_gpu_it_omits_power(tmp_path):
    (tmp_path / "fg.progress.jsonl").write_text("")
    round_ = SimpleNamespace(fg_job=SimpleNamespace(model="mnist"), bg_job=None, out_dir=tmp_path, sampler=None)
    stream = io.StringIO()
    line = LiveLine(stream, room=lambda: 100, clock=iter([0.0, 3.0]).__next__)
    line.round_started(round_)
    line.draw()
    assert "[mnist solo 0:03] | fg foreground starting" in stream.getvalue()
    assert " W" not in stream.getvalue()


def test_render_degrades_to_fit_and_never_overflows():
    shot = Snapshot("densenet121+vulberta_mlp", 3725.0, epoch=12.5, step=123456, power_w=301.0, vram_mb=7400.0)
    full = render(shot, 200)
    assert full.startswith("[densenet121+vulberta_mlp 1:02:05]")
    for room in range(0, 120):
        assert len(render(shot, room)) <= room
    assert render(shot, 53) == "[1:02:05] | epoch 12.50 step 123456 | 301 W | 7400 MB"
    assert render(shot, 52) == "[1:02:05] | epoch 12.50 step 123456"
    assert render(shot, 34) == render(shot, 9) == "[1:02:05]" and render(shot, 8) == ""


def test_last_progress_reads_the_tail_and_skips_a_half_written_line(tmp_path):
    path = tmp_path / "p.jsonl"
    lines = [json.dumps({"event": "step", "step": i, "epoch": i / 1000, "t": i}) for i in range(2000)]
    path.write_text("\n".join(lines) + '\n{"event": "step", "st')
    assert last_progress(path)["step"] == 1999
    assert last_progress(tmp_path / "missing.jsonl") is None


def test_last_progress_passes_over_malformed_lines(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"event": "step", "step": 4, "epoch": 0.1, "t": 1}\n'
                    '{"event": "step", "step": "x", "epoch": "many", "t": "later"}\n[1, 2]\n')
    assert last_progress(path)["step"] == 4


def test_the_thread_redraws_until_the_round_ends_and_stops_on_close(tmp_path):
    round_ = fake_round(tmp_path, [{"event": "step", "step": 5, "epoch": 0.1, "t": 1}])
    stream = io.StringIO()
    line = LiveLine(stream, room=lambda: 100, interval_s=0.01).start()
    line.round_started(round_)
    deadline = time.monotonic() + 5
    while stream.getvalue().count(SAVE_CURSOR) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    line.round_ended(round_)
    drawn = stream.getvalue().count(SAVE_CURSOR)
    assert drawn >= 3
    time.sleep(0.05)
    assert stream.getvalue().count(SAVE_CURSOR) == drawn
    line.close()
    assert not line._thread.is_alive()


def test_the_line_names_case_i_of_n_the_background_starting_and_the_etas(tmp_path):
    (tmp_path / "fg.progress.jsonl").write_text("")
    round_ = SimpleNamespace(fg_job=SimpleNamespace(model="mnist", hyperparameters={"epochs": 2}),
                             bg_job=SimpleNamespace(model="resnet20"), out_dir=tmp_path, sampler=None)
    stream = io.StringIO()
    line = LiveLine(stream, room=lambda: 200, clock=iter([0.0, 0.0, 10.0, 20.0]).__next__)
    line.case_started(2, 12, remaining_estimate_s=600.0)
    line.round_started(round_)
    line.draw()
    assert "[case 2/12 mnist+resnet20 pair: resnet20 starting 0:10] | fg foreground starting | ETA session ~10:00" \
        in stream.getvalue()
    (tmp_path / "fg.progress.jsonl").write_text(json.dumps({"event": "step", "step": 50, "epoch": 0.5, "t": 15.0}) + "\n")
    line.draw()
    assert "fg epoch 0.50 step 50 | ETA job ~1:00, session ~10:00" in stream.getvalue()


def test_job_eta_extrapolates_its_own_progress_and_the_session_eta_learns_from_finished_cases():
    assert job_eta_s(0.25, 1, 30.0) == 90.0
    assert job_eta_s(None, 1, 30.0) is None and job_eta_s(1.0, 1, 30.0) is None and job_eta_s(0.5, None, 3) is None
    case = CaseContext(2, 3, remaining_estimate_s=100.0, started=0.0, estimate_s=50.0)
    assert session_eta_s(case, 20.0, Pace()) == 130.0
    pace = 80 / 50  # a finished case took twice its estimate; the running one's 20 s so far count as estimated
    assert session_eta_s(case, 20.0, Pace(actual_s=60.0, estimate_s=30.0)) == pytest.approx(50 * pace - 20 + 100 * pace)
    damped = 110 / 80  # one typical case of belief in the estimates damps the pace
    assert session_eta_s(case, 20.0, Pace(60.0, 30.0, prior_s=30.0)) == pytest.approx(50 * damped - 20 + 100 * damped)
    assert session_eta_s(case, 70.0, Pace()) == pytest.approx(100 * 70 / 50)  # its own overrun slows the rest


def play(estimates, factors, tick_s=1.0):
    """A session at a fake clock: each case takes its estimate times its factor; the ETA at every tick."""
    now = [0.0]
    line = LiveLine(io.StringIO(), room=lambda: 200, clock=lambda: now[0])
    seen = []
    for index, (estimate, factor) in enumerate(zip(estimates, factors), 1):
        line.case_started(index, len(estimates), sum(estimates[index:]), estimate)
        end = now[0] + estimate * factor
        while now[0] < end:
            seen.append((now[0], line.session_eta(now[0])))
            now[0] = min(end, now[0] + tick_s)
        line.case_ended(estimate)
    return seen


@given(st.lists(st.floats(5.0, 500.0), min_size=1, max_size=8), st.data())
def test_the_session_eta_never_jumps_up_and_is_exact_when_the_estimates_are(estimates, data):
    factors = data.draw(st.lists(st.floats(0.25, 4.0), min_size=len(estimates), max_size=len(estimates)))
    seen = play(estimates, factors)
    for (t0, a), (t1, b) in zip(seen, seen[1:]):
        assert b <= a + (t1 - t0) * len(estimates) + 1e-6  # an overrun raises it second by second, never at once
    exact = play(estimates, [1.0] * len(estimates))
    total = sum(estimates)
    assert all(eta == pytest.approx(total - t, abs=1e-6) for t, eta in exact)
