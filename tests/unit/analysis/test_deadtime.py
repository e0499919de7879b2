"""Dead-time accounting from the timelines in result.json (``gpu-pairs dead-time``)."""
import json

from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.analysis.deadtime import case_time, load_case_times, summarise
from pytest_gpu_pairs.cli import main


def record(case_id, start, solo=(), rounds=(), end=None, **extra):
    return {"case_id": case_id, "complete": True, "failure": None, "oom": False, **extra,
            "timeline": {"case_start_t": start, "case_end_t": end, "cool_down_s": 0.0,
                         "solo": [{"start_t": a - 2, "end_t": b + 1, "train_start_t": a, "train_end_t": b}
                                  for a, b in solo],
                         "rounds": [{"bg_start_t": bg, "fg_start_t": fg, "fg_train_start_t": ts, "fg_train_end_t": te}
                                    for bg, fg, ts, te in rounds]}}


def write(out, rec):
    (out / rec["case_id"]).mkdir(parents=True)
    (out / rec["case_id"] / "result.json").write_text(json.dumps(rec))


def test_a_case_splits_into_training_and_dead_time():
    # solo baseline trains 10..20, background starts at 25, foreground starts 27, trains 29..39, case ends 42
    times = case_time(record("c1", 0.0, solo=[(10.0, 20.0)], rounds=[(25.0, 27.0, 29.0, 39.0)], end=42.0))
    assert (times.wall_s, times.fg_training_s, times.solo_training_s, times.bg_wait_s) == (42.0, 10.0, 10.0, 2.0)
    assert times.dead_s == 22.0 and times.status == "ok"
    assert (times.solo_overhead_s, times.fg_startup_s) == (3.0, 2.0)
    assert times.other_s == 22.0 - 2.0 - 2.0 - 3.0


def test_a_gated_foreground_waits_from_its_gate_not_its_process_start():
    gated = record("c1", 0.0, rounds=[(0.0, 0.5, 6.0, 16.0)], end=17.0)
    gated["timeline"]["rounds"][0]["fg_go_t"] = 5.0  # the background was ready at 5 s
    times = case_time(gated)
    assert (times.bg_wait_s, times.fg_startup_s, times.fg_training_s) == (5.0, 1.0, 10.0)


def test_run_totals_count_the_gaps_between_cases_and_compare_with_the_seed(tmp_path):
    write(tmp_path, record("b", 50.0, rounds=[(50.0, 51.0, 52.0, 60.0)], end=61.0, failure="OOM"))
    write(tmp_path, record("a", 0.0, rounds=[(0.0, 1.0, 2.0, 40.0)], end=45.0))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "result.json").write_text(json.dumps({"case_id": "old", "complete": True}))
    times, skipped = load_case_times(tmp_path)
    assert [t.case_id for t in times] == ["a", "b"] and [t.status for t in times] == ["ok", "failed"]
    assert len(skipped) == 1 and "no timeline" in skipped[0]
    totals = summarise(times)
    assert totals["wall_s"] == 61.0 and totals["fg_training_s"] == 46.0 and totals["dead_s"] == 15.0
    assert totals["gaps_s"] == 5.0 and totals["waiting_s"] == 2.0 + 5.0
    assert totals["seed_fixed_sleeps_s"] == 2 * 90.0


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100), st.floats(0, 100), st.floats(0, 100)),
                min_size=1, max_size=5))
def test_dead_time_plus_training_is_the_wall_time(spans):
    start, t, rounds = 0.0, 0.0, []
    for gap, wait, startup, train in spans:
        bg = t + gap
        rounds.append((bg, bg + wait, bg + wait + startup, bg + wait + startup + train))
        t = rounds[-1][3]
    times = case_time(record("c", start, rounds=rounds, end=t + 1.0))
    assert abs(times.dead_s + times.fg_training_s - times.wall_s) < 1e-6
    assert times.dead_s >= -1e-6


def test_the_command_prints_a_table_and_json(tmp_path, capsys):
    write(tmp_path, record("a", 0.0, rounds=[(0.0, 1.0, 2.0, 40.0)], end=45.0))
    assert main(["dead-time", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "a     ok" in out and "the predecessor's fixed sleeps for 1 group(s): 90 s" in out
    assert main(["dead-time", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["dead_s"] == 7.0
    assert main(["dead-time", str(tmp_path / "missing")]) == 2
