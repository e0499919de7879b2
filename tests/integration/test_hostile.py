"""Hostile input and faults in real pytest sessions (pytester subprocesses) with command workloads
(tests/support/fake_job.py): patterns that backtrack, malformed progress files, a second session
on one output folder, senseless options, jobs that train nothing, a daemon that escapes its
session with a scrubbed environment, unreadable records on resume, and the files' modes."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from filelock import FileLock
from support.helpers import FAKE_JOB, SUITE, alive_pids, jobs_started_under

HOSTILE_LINE = "a" * 40 + "!"  # (a+)+$ against this takes 2**40 steps in a backtracking engine
BG = ["--protocol", "--steps", "20", "--step-s", "0.05"]  # 1 s: outlasts the few-step foregrounds beside it


def command(*args: str, **extra) -> dict:
    return {"command": [sys.executable, str(FAKE_JOB), *args], **extra}


def write_settings(tmp: Path, workloads: dict, **defaults) -> Path:
    path = tmp / "hostile.json"
    pairs = [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]
    path.write_text(json.dumps({"name": "hostile", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 300, **defaults},
                                "workloads": workloads, "pairs": pairs}))
    return path


def run(pytester, settings: Path, *extra):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(pytester.path / "out"),
                                         "--gpu-pairs-settings", str(settings), "-p", "no:cacheprovider", "-rA",
                                         *extra, timeout=600)


CASE = "g01-fg+bg-default-concurrent"


def record(tmp: Path) -> dict:
    return json.loads((tmp / "out" / CASE / "result.json").read_text())


def test_a_backtracking_ready_pattern_and_log_pattern_cannot_freeze_pytest(pytester):
    """Before RE2 this session never ended: the reader thread held the GIL and no signal got in."""
    settings = write_settings(pytester.path, {
        "fg": command("--say", HOSTILE_LINE, "--steps", "3", log_patterns={"stuck": "(a+)+$"}),
        "bg": command("--say", HOSTILE_LINE, "--steps", "80", "--step-s", "0.05", ready_pattern="(a+)+$"),  # 4 s: past the 2 s ready timeout
    }, ready_timeout_s=2)
    result = run(pytester, settings)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*did not become ready within 2 s*its ready_pattern '(a+)+$'*"])
    assert jobs_started_under(pytester.path / "out") == []


def test_malformed_progress_lines_are_counted_and_the_case_is_complete(pytester):
    settings = write_settings(pytester.path, {"fg": command("--protocol", "--bad-progress", "--steps", "5"),
                                              "bg": command(*BG)})
    result = run(pytester, settings)
    result.assert_outcomes(passed=1)
    saved = record(pytester.path)
    assert saved["complete"] is True and saved["fg_duration_s"] > 0
    assert "5 malformed progress line(s) ignored (first: line 2: expected a JSON object" in saved["notes"]["duration_basis"]
    again = run(pytester, settings, "--gpu-pairs-resume")
    again.assert_outcomes(skipped=1)  # complete: not rerun forever


def test_a_second_session_on_one_output_folder_is_refused_in_one_line(pytester):
    out = pytester.path / "out"
    live_case = out / CASE
    live_case.mkdir(parents=True)
    (live_case / "fg.log").write_text("the first session's live log\n")
    (out / ".gpu-pairs.lock.owner").write_text("pid 12345 since today\n")
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    with FileLock(str(out / ".gpu-pairs.lock"), timeout=0):
        result = run(pytester, settings)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: --gpu-pairs-out {out} is in use by another pytest session (pid 12345 "
                                 "since today); wait for it to end or choose another --gpu-pairs-out"])
    assert (live_case / "fg.log").read_text() == "the first session's live log\n"


def test_options_that_make_no_sense_are_one_line_before_anything_starts(pytester):
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    pytester.makepyfile(test_suite=SUITE)
    a_file = pytester.path / "not-a-folder"
    a_file.write_text("")
    for options, expected in [(["--gpu-pairs-scale", "inf"], "*--gpu-pairs-scale*expected a finite number above 0*"),
                              (["--gpu-pairs-min-efficiency", "nan"], "*--gpu-pairs-min-efficiency*expected a finite number*"),
                              (["--gpu-pairs-out", str(a_file)], f"*--gpu-pairs-out {a_file}: expected a folder*")]:
        args = ["--gpu-pairs-device", "cpu", "--gpu-pairs-settings", str(settings), "--gpu-pairs-out",
                str(pytester.path / "out"), *options]
        result = pytester.runpytest_subprocess(*args, timeout=300)
        assert result.ret == 4, options
        assert "Traceback" not in result.stderr.str() + result.stdout.str(), options
        (result.stderr if result.stderr.str().strip() else result.stdout).fnmatch_lines([expected])
    assert not (pytester.path / "out").exists()


def test_a_foreground_that_trained_nothing_fails(pytester):
    settings = write_settings(pytester.path, {"fg": {"command": [sys.executable, "-c", "pass"]}, "bg": command(*BG)})
    result = run(pytester, settings)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*exited with code 0 without training anything: no progress report, no metric "
                                 "and no output*"])


def test_a_background_that_exits_at_once_fails_the_case_as_a_crash_loop(pytester):
    hang_when_concurrent = ["--fault", "hang", "--fault-runs", "2", "--state", str(pytester.path / "fg-state")]
    settings = write_settings(pytester.path, {"fg": command("--protocol", *hang_when_concurrent),
                                              "bg": {"command": [sys.executable, "-c", "print('done')"]}},
                              restart_delay_s=0)
    result = run(pytester, settings)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*background bg crash-looped: 3 consecutive runs that failed or ended before they "
                                 "were ready*exited with code 0 before it was ready*"])
    assert record(pytester.path)["complete"] is True


def test_a_setsid_daemon_with_a_scrubbed_environment_is_killed(pytester):
    pids = pytester.path / "pids"
    settings = write_settings(pytester.path, {
        "fg": command("--protocol", "--steps", "5", "--scrubbed-daemon", "--pids", str(pids)), "bg": command(*BG)})
    result = run(pytester, settings)
    result.assert_outcomes(passed=1)
    assert list(pids.glob("*.helper")), "the daemon never started"
    assert alive_pids(pids) == []
    assert record(pytester.path)["complete"] is True


def test_a_record_of_wrong_types_is_measured_again_on_resume(pytester):
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    run(pytester, settings).assert_outcomes(passed=1)
    path = pytester.path / "out" / CASE / "result.json"
    path.write_text(json.dumps({**record(pytester.path), "concurrency_efficiency": "1.2"}))
    result = run(pytester, settings, "--gpu-pairs-resume")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpu-pairs results*", f"{CASE}  *"])
    assert isinstance(record(pytester.path)["concurrency_efficiency"], (float, type(None)))


def test_results_follow_the_umask_like_the_logs(pytester):
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    run(pytester, settings).assert_outcomes(passed=1)
    out = pytester.path / "out"
    log_mode = stat.S_IMODE((out / CASE / "fg.log").stat().st_mode)
    umask = os.umask(0o022)
    os.umask(umask)
    assert log_mode == 0o666 & ~umask
    for path in (out / CASE / "result.json", out / "session.json"):
        assert stat.S_IMODE(path.stat().st_mode) == log_mode, path


FULL_DISK_FOR_RESULTS = """
import errno, os
_fsync = os.fsync

def _full_for_results(fd):
    if ".result.json." in os.readlink(f"/proc/self/fd/{fd}"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _fsync(fd)

os.fsync = _full_for_results
"""


def test_a_full_disk_fails_the_case_in_one_line_and_ends_every_job(pytester):
    pytester.makeconftest(FULL_DISK_FOR_RESULTS)
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    result = run(pytester, settings)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{CASE}: could not write *result.json: No space left on device; the earlier file, "
                                 "if any, is unchanged"])
    assert "Traceback" not in result.stdout.str() and "OSError" not in result.stdout.str()
    assert jobs_started_under(pytester.path / "out") == []


PLAIN_TEST = """
import ctypes

def test_pytest_is_no_subreaper_here():
    value = ctypes.c_int(-1)
    assert ctypes.CDLL(None).prctl(37, ctypes.byref(value), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    assert value.value == 0
"""


def test_a_session_that_runs_no_case_takes_no_lock_and_no_subreaper_role(pytester):
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    pytester.makepyfile(test_plain=PLAIN_TEST)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", str(settings), "--gpu-pairs-out", str(out),
                                           "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1)
    assert not out.exists()


def test_a_case_folder_planted_as_a_symlink_is_refused_and_nothing_outside_is_touched(pytester):
    outside = pytester.path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    out = pytester.path / "out"
    out.mkdir()
    (out / CASE).symlink_to(outside)
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    result = run(pytester, settings)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{CASE}: refusing {out / CASE}: it resolves to {outside}, outside {out}"])
    assert [p.name for p in outside.iterdir()] == ["precious.txt"]


def test_collect_only_lists_the_cases_whatever_fifos_and_device_links_lie_in_the_output_folder(pytester):
    """Collection reads earlier results (estimates, the mutation design's history): a FIFO would wait
    for a writer forever, /dev/zero never end."""
    out = pytester.path / "out"
    for folder in (out / CASE, out / "_solo" / "x", out / "other"):
        folder.mkdir(parents=True)
    os.mkfifo(out / CASE / "result.json")
    os.mkfifo(out / "session.json")
    (out / "_solo" / "x" / "result.json").symlink_to("/dev/zero")
    (out / "other" / "result.json").symlink_to("/dev/zero")
    workload = command("--steps", "3", hyperparameters={"steps": {"type": "int", "flag": "--steps", "range": [2, 9]}})
    settings = pytester.path / "mutation.json"
    settings.write_text(json.dumps({"name": "m", "design": "mutation", "workloads": {"fg": workload, "bg": command(*BG)},
                                    "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"},
                                               "mutate": ["steps"], "mutations": 2}]}))
    result = run(pytester, settings, "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_pair[[]g01-fg+bg-steps_*-concurrent[]]", "*2 tests collected*"])


READ_ONLY_FOR_ROOT = """
import errno, os
_open = os.open

def _as_for_another_user(path, flags, *args, **kwargs):
    if os.fspath(path).startswith({out!r}) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
    return _open(path, flags, *args, **kwargs)

os.open = _as_for_another_user
"""


def test_an_output_folder_that_exists_read_only_is_one_line(pytester):
    out = pytester.path / "out"
    out.mkdir()
    out.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the kernel's answer to anyone else, given here
        pytester.makeconftest(READ_ONLY_FOR_ROOT.format(out=str(out)))
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    try:
        result = run(pytester, settings)
    finally:
        out.chmod(0o755)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"ERROR: --gpu-pairs-out {out}: cannot write in it (Permission denied); choose a "
                                 "folder this user can write to"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_case_folder_linked_to_another_cases_folder_fails_on_resume_and_the_other_keeps_its_record(pytester):
    pairs = [{"group": g, "foreground": {"model": "fg"}, "background": {"model": "bg"}} for g in ("g01", "g02")]
    settings = pytester.path / "two.json"
    settings.write_text(json.dumps({"name": "two", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 300},
                                    "workloads": {"fg": command("--steps", "3"), "bg": command(*BG)}, "pairs": pairs}))
    run(pytester, settings, "-k", "g01").assert_outcomes(passed=1)
    out, other = pytester.path / "out", "g02-fg+bg-default-concurrent"
    kept = (out / CASE / "result.json").read_text()
    (out / other).symlink_to(out / CASE)
    result = run(pytester, settings, "--gpu-pairs-resume")
    result.assert_outcomes(skipped=1, failed=1)
    result.stdout.fnmatch_lines([f"{other}: refusing {out / other}: it is a symbolic link to {out / CASE}; the harness "
                                 "writes a case only into a folder of its own (remove the link)"])
    assert (out / CASE / "result.json").read_text() == kept and (out / other).is_symlink()


def test_a_shard_count_past_the_bound_is_a_usage_error(pytester):
    settings = write_settings(pytester.path, {"fg": command("--steps", "3"), "bg": command(*BG)})
    result = run(pytester, settings, "--gpu-pairs-shard", "1/30000000")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--gpu-pairs-shard: expected K/N such as 2/4, with N at most 10000, got '1/30000000'"])


def test_numbers_no_float_holds_in_progress_events_and_log_lines_are_ignored_and_never_written(pytester):
    settings = write_settings(pytester.path, {
        "fg": command("--protocol", "--huge-numbers", "--steps", "5", log_patterns={"accuracy": r"Accuracy: (\d+)"}),
        "bg": command("--print-steps", "--huge-numbers", "--steps", "40", "--step-s", "0.05",
                      progress_pattern=r"^step (?P<step>\d+)$")})
    bench = pytester.path / "bench.json"
    run(pytester, settings, f"--benchmark-json={bench}").assert_outcomes(passed=1)
    text = (pytester.path / "out" / CASE / "result.json").read_text()
    saved = json.loads(text)
    assert "Infinity" not in text and "NaN" not in text and "Infinity" not in bench.read_text()
    assert saved["complete"] is True and saved["bg_progress_ratio"] is not None
    assert ("4 malformed progress line(s) ignored (first: line 2: expected 'step' to be a whole number from 0 to "
            "2**53, got an integer of 400 digits)") in saved["notes"]["duration_basis"]
    run(pytester, settings, "--gpu-pairs-resume").assert_outcomes(skipped=1)  # complete: not failing on every resume


def test_a_fifo_or_a_device_link_as_a_jobs_progress_file_is_named_and_the_case_ends(pytester):
    pairs = [{"group": g, "foreground": {"model": model}, "background": {"model": "bg"}}
             for g, model in (("g01", "fifo"), ("g02", "device"))]
    settings = pytester.path / "special.json"
    settings.write_text(json.dumps({"name": "special", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "timeout_s": 300},
                                    "workloads": {"fifo": command("--progress-file", "fifo", "--steps", "3"),
                                                  "device": command("--progress-file", "device", "--steps", "3"),
                                                  "bg": command(*BG)}, "pairs": pairs}))
    result = run(pytester, settings)
    result.assert_outcomes(passed=2)
    for case, kind in (("g01-fifo+bg-default-concurrent", "a FIFO"), ("g02-device+bg-default-concurrent",
                                                                      "a character device")):
        notes = json.loads((pytester.path / "out" / case / "result.json").read_text())["notes"]
        assert f"unreadable (expected a regular file, got {kind})" in notes["duration_basis"]
    assert jobs_started_under(pytester.path / "out") == []


def test_a_background_that_prints_works_and_exits_0_is_a_finished_run_not_a_crash_loop(pytester):
    """docs/settings.md: without a progress or ready pattern, a command workload is ready when it
    exits with code 0 (after at least 2 s of work); the loop restarts it, it is no crash loop. It
    reports no steps, so the pair has no efficiency: the case fails for that alone, naming the fix."""
    works = "import time; print('training', flush=True); time.sleep(2.5); print('done', flush=True)"
    settings = write_settings(pytester.path, {"fg": command("--steps", "40", "--step-s", "0.1"),
                                              "bg": {"command": [sys.executable, "-c", works]}}, restart_delay_s=0)
    result = run(pytester, settings)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not measured: concurrency_efficiency is null*give fg and bg a progress_pattern*"])
    assert "crash loop" not in result.stdout.str()
    runs = [json.loads(line) for line in (pytester.path / "out" / CASE / "bg-runs.jsonl").read_text().splitlines()]
    finished = [r for r in runs if r["exit_code"] == 0]
    assert finished and all(r["ready_basis"] == "fallback" for r in finished)
    assert not any(r["ended_unready"] for r in runs)
    assert record(pytester.path)["failure"] is None
