"""Hostile input and faults around a session (pytester subprocesses, command workloads of
tests/support/fake_job.py): a resumed session over recorded failures, a job changed between a run
and its resume, a workload's env naming the harness's variables, a disk that fills as the session
ends, and terminal escape sequences a job prints before its out-of-memory message."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from support.helpers import jobs_started_under

from integration.test_hostile import BG, CASE, command, record, run

FG = ["--protocol", "--steps", "5", "--step-s", "0.05"]
CRASHED = "g02-fg+crasher-default-concurrent"


def two_pairs(tmp: Path, fg=FG, **defaults) -> Path:
    """g01 passes; g02's background crashes at every start after its solo baseline (a crash loop:
    the case fails, and records why)."""
    path = tmp / "two.json"
    path.write_text(json.dumps({
        "name": "two", "defaults": {"method": "epoch", "restart_delay_s": 0, "timeout_s": 300, **defaults},
        "workloads": {"fg": command(*fg), "bg": command(*BG), "crasher": command("--fault", "crash", "--fault-runs", "2-", "--state", str(tmp / "crasher"))},
        "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}},
                  {"group": "g02", "foreground": {"model": "fg"}, "background": {"model": "crasher"}}]}))
    return path


def files_of(out: Path) -> dict[str, int]:
    """Every file of the cases' folders with its modification time."""
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for case in (CASE, CRASHED) for p in (out / case).rglob("*")}


def test_a_resumed_session_fails_over_a_recorded_failure_without_measuring_it_again(pytester):
    settings = two_pairs(pytester.path)
    first = run(pytester, settings)
    first.assert_outcomes(passed=1, failed=1)
    before = files_of(pytester.path / "out")
    again = run(pytester, settings, "--gpu-pairs-resume")
    again.assert_outcomes(skipped=1, failed=1)
    assert again.ret == 1
    again.stdout.fnmatch_lines([f"*{CRASHED}: recorded failure (resumed from {CRASHED}'s result.json, not measured "
                                "again; delete its folder to measure it again): background crasher crash-looped*"])
    again.stdout.fnmatch_lines([f"{CRASHED}*resumed*", f"  {CRASHED}: recorded failure: background crasher*"])
    assert files_of(pytester.path / "out") == before  # neither case was measured again
    assert jobs_started_under(pytester.path / "out") == []


def test_a_resumed_case_below_this_sessions_minimum_efficiency_fails_the_session(pytester):
    settings = two_pairs(pytester.path)
    run(pytester, settings, "-k", "g01", "--gpu-pairs-min-efficiency", "0").assert_outcomes(passed=1)
    again = run(pytester, settings, "-k", "g01", "--gpu-pairs-resume", "--gpu-pairs-min-efficiency", "50")
    again.assert_outcomes(failed=1)
    assert again.ret == 1
    again.stdout.fnmatch_lines([f"*{CASE}: recorded failure (resumed*concurrency efficiency * is below the "
                                "minimum 50.000*"])


def test_a_test_that_never_checks_its_case_still_ends_the_session_with_its_recorded_failure(pytester):
    pytester.makepyfile(test_suite="def test_pair(gpu_pair_case, pair_run):\n    pair_run()\n")
    settings = two_pairs(pytester.path)
    args = ["--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(pytester.path / "out"), "--gpu-pairs-settings",
            str(settings), "-p", "no:cacheprovider"]
    first = pytester.runpytest_subprocess(*args, timeout=600)
    first.assert_outcomes(passed=2)
    assert first.ret == 1  # the summary reports g02 failed: so does the exit status
    first.stdout.fnmatch_lines([f"{CRASHED}  failed*"])
    again = pytester.runpytest_subprocess(*args, "--gpu-pairs-resume", timeout=600)
    again.assert_outcomes(passed=1, skipped=1)
    assert again.ret == 1


def test_a_job_changed_since_its_record_is_measured_again_on_resume(pytester):
    settings = two_pairs(pytester.path)
    run(pytester, settings, "-k", "g01").assert_outcomes(passed=1)
    run(pytester, settings, "-k", "g01", "--gpu-pairs-resume").assert_outcomes(skipped=1)
    changed = two_pairs(pytester.path, fg=[*FG, "--note", "another argument"])
    again = run(pytester, changed, "-k", "g01", "--gpu-pairs-resume")
    again.assert_outcomes(passed=1)
    assert "note: another argument" in (pytester.path / "out" / CASE / "fg.log").read_text()
    digest = record(pytester.path)["settings_digest"]
    assert sorted(digest) == ["bg", "fg", "measurement"]
    longer = run(pytester, two_pairs(pytester.path, fg=[*FG, "--note", "another argument"], timeout_s=301),
                 "-k", "g01", "--gpu-pairs-resume")
    longer.assert_outcomes(passed=1)  # a measurement setting changed: measured again
    assert record(pytester.path)["settings_digest"]["fg"] == digest["fg"]
    assert record(pytester.path)["settings_digest"]["measurement"] != digest["measurement"]


HARNESS_NAMES = ("CUDA_VISIBLE_DEVICES", "GPU_PAIRS_STEADY_STATE", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
                 "GPU_PAIRS_START_GATE", "GPU_PAIRS_PROGRESS")


def env_settings(tmp: Path, method: str) -> Path:
    printed = [arg for name in (*HARNESS_NAMES, "OWN_SETTING") for arg in ("--print-env", name)]
    env = {name: "/settings/value" for name in HARNESS_NAMES[2:]}
    env.update(CUDA_VISIBLE_DEVICES="0", GPU_PAIRS_STEADY_STATE="0" if method == "interleaved" else "1",
               OWN_SETTING="kept")
    path = tmp / "env.json"
    path.write_text(json.dumps({
        "name": "env", "defaults": {"method": method, "restart_delay_s": 0.1, "timeout_s": 300, "phase_s": 0.5,
                                    "settle_s": 0.1, "warmup_s": 0.3},
        "workloads": {"fg": {**command("--protocol", "--steps", "100000" if method == "interleaved" else "20",
                                       "--step-s", "0.01", *printed), "env": env},
                      "bg": command(*BG) if method == "epoch" else command("--protocol", "--steps", "100000",
                                                                            "--step-s", "0.02")},
        "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]}))
    return path


def test_a_workloads_env_cannot_replace_the_harnesss_variables(pytester):
    for method, steady in (("interleaved", "env GPU_PAIRS_STEADY_STATE=1"), ("epoch", "env GPU_PAIRS_STEADY_STATE unset")):
        result = run(pytester, env_settings(pytester.path, method), "--gpu-pairs-min-efficiency", "0")
        log = (pytester.path / "out" / CASE / "fg.log").read_text()
        assert "env CUDA_VISIBLE_DEVICES=\n" in log and f"{steady}\n" in log and "env OWN_SETTING=kept\n" in log, log
        assert "/settings/value" not in log.replace(log.split("\n")[0], "")
        assert f"env GPU_PAIRS_PROGRESS={pytester.path / 'out' / CASE / 'fg.progress.jsonl'}\n" in log
        assert ("# gpu-pairs: the workload's env sets CUDA_MPS_LOG_DIRECTORY, CUDA_MPS_PIPE_DIRECTORY, "
                "CUDA_VISIBLE_DEVICES, GPU_PAIRS_PROGRESS, GPU_PAIRS_START_GATE, GPU_PAIRS_STEADY_STATE, which the "
                "harness sets for the job: the harness's values were used") in log
        result.assert_outcomes(passed=1)


FULL_DISK_AT_THE_END = """
import errno, os

_fsync = os.fsync
_ended = []

def pytest_sessionfinish():
    _ended.append(True)

def _full_at_the_end(fd):
    if _ended:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _fsync(fd)

os.fsync = _full_at_the_end
"""


def test_a_disk_that_fills_as_the_session_ends_leaves_the_table_and_every_record(pytester):
    pytester.makeconftest(FULL_DISK_AT_THE_END)
    result = run(pytester, two_pairs(pytester.path), "-k", "g01")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.stdout.fnmatch_lines(["*gpu-pairs results*", "case *status*", f"{CASE}  passed*",
                                 f"not written as the session ended: could not write {pytester.path / 'out'}/"
                                 "summary.csv: No space left on device; the earlier file, if any, is unchanged"])
    assert record(pytester.path)["complete"] is True and not (pytester.path / "out" / "summary.csv").exists()
    assert [p.name for p in (pytester.path / "out").iterdir() if p.name.startswith(".summary")] == []


ESCAPES = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[3J\u202e"
OOM_AFTER_ESCAPES = f"import sys\nprint({ESCAPES!r} + 'torch.OutOfMemoryError: CUDA out of memory.')\nsys.exit(1)\n"


def test_escape_sequences_before_an_out_of_memory_message_are_shown_escaped_everywhere(pytester, capfd):
    path = pytester.path / "oom.json"
    path.write_text(json.dumps({
        "name": "oom", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 300},
        "workloads": {"fg": {"command": [sys.executable, "-c", OOM_AFTER_ESCAPES]}, "bg": command(*BG)},
        "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]}))
    result = run(pytester, path)
    result.assert_outcomes(failed=1)
    escaped = r"\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[3J\u202etorch.OutOfMemoryError: CUDA out of memory."
    shown = result.stdout.str() + result.stderr.str()
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert escaped in shown
    saved = record(pytester.path)
    assert saved["oom"] is True and escaped in saved["failure"] and "\x1b" not in json.dumps(saved, ensure_ascii=False)
    from pytest_gpu_pairs import cli

    capfd.readouterr()
    assert cli.main(["compare", str(pytester.path / "out"), str(pytester.path / "out"), "--fail",
                     "concurrency_efficiency:5%"]) == 1
    compared = capfd.readouterr().out
    assert f"{CASE} failed in {pytester.path / 'out'}: " in compared and escaped in compared, compared
    assert "\x1b" not in compared


def test_a_recorded_failure_read_back_is_shown_escaped_on_resume(pytester):
    settings = two_pairs(pytester.path)
    run(pytester, settings, "-k", "g02").assert_outcomes(failed=1)
    path = pytester.path / "out" / CRASHED / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "failure": f"{ESCAPES}tampered"}))
    again = run(pytester, settings, "-k", "g02", "--gpu-pairs-resume")
    again.assert_outcomes(failed=1)
    shown = again.stdout.str()
    assert "\x1b" not in shown and r"\x1b]0;owned\x07" in shown and os.sep in shown


def test_a_baseline_of_another_method_stops_the_session_before_its_first_case(pytester):
    settings = two_pairs(pytester.path)
    run(pytester, settings, "-k", "g01").assert_outcomes(passed=1)
    baseline = pytester.path / "baseline"
    (pytester.path / "out").rename(baseline)
    result = run(pytester, settings, "-k", "g01", "--gpu-pairs-method", "interleaved",
                 "--gpu-pairs-compare", str(baseline), "--gpu-pairs-compare-fail", "concurrency_efficiency:5%")
    assert result.ret == 4
    result.stdout.fnmatch_lines([f"*--gpu-pairs-compare: baseline {baseline} measured 1 case(s) with another method "
                                 f"than this session: {CASE} (epoch in BASE, interleaved in NEW); figures of "
                                 "different methods do not compare*"])
    assert not (pytester.path / "out" / CASE / "fg.log").exists()  # nothing was measured


FULL_DISK_FOR_THE_BENCHMARK_JSON = """
import errno, os
import pytest_benchmark.session

def _full(self, output_json):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

pytest_benchmark.session.BenchmarkSession.save_json = _full
"""


def test_a_benchmark_json_that_cannot_be_written_as_the_session_ends_is_one_line_under_the_table(pytester):
    pytester.makeconftest(FULL_DISK_FOR_THE_BENCHMARK_JSON)
    result = run(pytester, two_pairs(pytester.path), "-k", "g01", "--benchmark-json", str(pytester.path / "b.json"))
    result.assert_outcomes(passed=1)
    assert result.ret == 1 and "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*gpu-pairs results*", f"{CASE}  passed*",
                                 f"not written as the session ended: could not write {pytester.path / 'b.json'}: "
                                 "No space left on device"])
