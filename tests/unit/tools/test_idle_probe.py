"""The idle probe reads each window's step rate from the job's own progress file and compares every
condition with the job alone (or, in the second half, with its peer stopped)."""
import json

import pytest

from tools.feasibility_10g.idle_probe import _rates


def _progress(path, rate, start, end):
    """Reports every 0.1 s; ``rate(t)`` the steps per second at time t."""
    lines, steps = [{"event": "ready", "t": start}], 0.0
    for k in range(1, int((end - start) * 10) + 1):
        t = start + k / 10
        steps += rate(t) / 10
        lines.append({"event": "step", "step": int(round(steps)), "epoch": 0.0, "t": t})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def test_each_condition_is_read_against_the_job_alone(tmp_path):
    progress = tmp_path / "target.progress.jsonl"
    _progress(progress, lambda t: 80.0 if 1004 <= t < 1006.05 or 1010 <= t < 1012.05 else 100.0, 1000.0, 1020.0)
    windows = [{"round": 0, "condition": "alone", "start": 1001.0, "end": 1003.0},
               {"round": 0, "condition": "keepalive", "start": 1004.0, "end": 1006.0},
               {"round": 1, "condition": "alone", "start": 1007.0, "end": 1009.0},
               {"round": 1, "condition": "keepalive", "start": 1010.0, "end": 1012.0}]
    rows = _rates(windows, progress)
    assert rows["alone"]["n"] == 2
    assert rows["alone"]["mean_steps_per_s"] == pytest.approx(100.0, rel=0.02)
    assert rows["keepalive"]["vs_alone"] == pytest.approx(0.8, rel=0.03)
    assert all("steps_per_s" in w for w in windows)


def test_without_an_alone_window_the_stopped_peer_is_the_base(tmp_path):
    progress = tmp_path / "target.progress.jsonl"
    _progress(progress, lambda t: 50.0, 1000.0, 1010.0)
    windows = [{"round": 0, "condition": "stopped_peer", "start": 1001.0, "end": 1004.0},
               {"round": 0, "condition": "peer", "start": 1005.0, "end": 1008.0}]
    rows = _rates(windows, progress)
    assert rows["stopped_peer"]["vs_alone"] == pytest.approx(1.0)
    assert rows["peer"]["std"] is None
