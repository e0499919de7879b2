"""Command workloads that only print their own log format (tests/support/log_job.py prints the formats
of tests/data/logformats): their progress is read from the log, as foreground and as background, with
both case methods, and is what the same job reports through the protocol (its ``.truth`` file, which
the harness never reads): the same step counts, and each step read no earlier than it was reported.

Nothing here asserts a duration or a ratio of times.
"""
from __future__ import annotations

import fnmatch
import json
import os
import sys
import threading
from pathlib import Path

import pytest
from support.helpers import FAKE_JOB, LOG_FORMATS, LOG_JOB, SUITE, jobs_started_under

from pytest_gpu_pairs.experiment.logformats import PRESETS
from pytest_gpu_pairs.protocol import MONOTONIC_KEY, from_monotonic
from pytest_gpu_pairs.run import logprogress
from pytest_gpu_pairs.run.jobs import JobProcess, JobSpec, live_jobs

FORMATS = ("word_language_model", "mnist", "huggingface_trainer", "lightning")
ARRIVAL_BOUND_S = 60.0  # a line is read within a poll of being written; generous for a loaded CI machine


def fmt(name: str) -> dict:
    return json.loads((LOG_FORMATS / f"{name}.json").read_text(encoding="utf-8"))


def truth_steps(progress_path: Path) -> dict[float, float]:
    """step -> when the job reported it through the protocol (written before the line was printed),
    on the harness's clock: the job's own wall-clock ``t`` can sit milliseconds off it."""
    events = [json.loads(line) for line in Path(f"{progress_path}.truth").read_text().splitlines()]
    return {e["step"]: from_monotonic(e[MONOTONIC_KEY]) for e in events if e["event"] == "step"}


def assert_read_as_reported(read, truth: dict[float, float], completed: bool) -> None:
    steps = [step for _, step in read.steps]
    assert steps and steps == sorted(steps)
    assert all(step in truth for step in steps), "a step read from the log that the job never reported"
    if completed:
        assert steps[-1] == max(truth), "a finished job's last step read from the log is its last one"
    for t, step in read.steps:
        assert truth[step] <= t <= truth[step] + ARRIVAL_BOUND_S


def job_argv(name: str, *extra: str) -> list[str]:
    return [sys.executable, str(LOG_JOB), "--format", str(LOG_FORMATS / f"{name}.json"), "--truth", *extra]


@pytest.mark.parametrize("name", sorted(p.stem for p in LOG_FORMATS.glob("*.json")))
def test_a_job_that_only_prints_has_the_steps_it_reported(tmp_path, name):
    spec = JobSpec("fg", name, job_argv(name, "--step-s", "0.02"), {**os.environ, "PYTHONUNBUFFERED": "1"},
                   str(tmp_path), 120.0, progress_pattern=PRESETS[fmt(name)["preset"]].pattern)
    job = JobProcess(spec, tmp_path / "fg.log", tmp_path / "fg.progress.jsonl")
    outcome = job.run()
    assert outcome.completed and outcome.progress.source == "log"
    assert_read_as_reported(outcome.progress, truth_steps(tmp_path / "fg.progress.jsonl"), completed=True)
    first, last = outcome.progress.ready_t, outcome.progress.last_t
    assert first == outcome.progress.steps[0][0]
    assert outcome.duration_basis == ("training" if last > first else "process")  # one read: no window to time
    assert logprogress.load(job.log_progress_path) == outcome.progress  # saved beside the log
    assert live_jobs() == [] and not [t for t in threading.enumerate() if t.name.startswith("gpu-pairs-log-")]


def test_a_job_that_speaks_the_protocol_is_read_through_it_even_with_a_progress_pattern(tmp_path):
    spec = JobSpec("fg", "fake", [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "5"],
                   {**os.environ, "PYTHONUNBUFFERED": "1"}, str(tmp_path), 120.0,
                   progress_pattern=r"Epoch (?P<epoch>\d+) started")
    outcome = JobProcess(spec, tmp_path / "fg.log", tmp_path / "fg.progress.jsonl").run()
    assert outcome.completed and outcome.progress.source == "protocol" and outcome.progress.total_steps == 5


def workload(name: str, explicit: bool, *extra: str) -> dict:
    """One format as a user's command workload: half of them name the preset, half write the pattern."""
    preset = fmt(name)["preset"]
    spec = {"command": job_argv(name, *extra), "log_patterns": {"accuracy": r"Accuracy: ([0-9.]+)"}}
    spec.update({"progress_pattern": PRESETS[preset].pattern} if explicit else {"progress_preset": preset})
    return spec


def run_session(pytester, settings: dict, *options: str):
    pytester.makepyfile(test_suite=SUITE)
    path = pytester.path / "s.json"
    path.write_text(json.dumps(settings))
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", path, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "-p", "no:cacheprovider", *options)
    return result, out


def records(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/result.json")}


def test_each_format_as_foreground_and_as_background_gives_an_efficiency(pytester):
    """A ring of pairs: every format is once the foreground and once the background; the minimum
    efficiency is given on the command line, so a null efficiency would fail its case."""
    workloads = {name: workload(name, index % 2 == 0, "--step-s", "0.04") for index, name in enumerate(FORMATS)}
    pairs = [{"group": f"r{i}", "foreground": {"model": fg}, "background": {"model": bg}}
             for i, (fg, bg) in enumerate(zip(FORMATS, FORMATS[1:] + FORMATS[:1]))]
    result, out = run_session(pytester, {"name": "formats", "defaults": {"method": "epoch"}, "workloads": workloads,
                                         "pairs": pairs},
                              "--gpu-pairs-min-efficiency", "0")
    result.assert_outcomes(passed=len(pairs))
    found = records(out)
    assert len(found) == len(pairs)
    for record in found.values():
        assert record["concurrency_efficiency"] is not None and record["bg_progress_ratio"] is not None
        assert record["fg_progress_source"] == record["bg_progress_source"] == "log"
        assert record["duration_basis"] == "training" and record["fg_duration_s"] < record["fg_wall_s"]
        assert record["perf"] == {"accuracy": 0.75}
    runs = [json.loads(line) for path in out.glob("*/bg-runs.jsonl") for line in path.read_text().splitlines()]
    assert runs and all(run["ready_basis"] == "progress_pattern" for run in runs if run["ready_t"] is not None)
    assert_every_job_read_as_reported(out)
    assert jobs_started_under(out) == []


def assert_every_job_read_as_reported(out: Path) -> None:
    """Foregrounds, solo baselines and every background run: what was read from each log."""
    saved = sorted(out.rglob("*.log-progress.jsonl"))
    assert {p.name for p in saved} >= {"fg.log-progress.jsonl", "bg-run-001.log-progress.jsonl"}
    for path in saved:
        progress_path = path.with_name(path.name.replace(".log-progress.jsonl", ".progress.jsonl"))
        completed = "bg-run" not in path.name  # a background run is usually stopped mid-line
        assert_read_as_reported(logprogress.load(path), truth_steps(progress_path), completed)


def test_an_interleaved_case_reads_both_jobs_progress_from_their_logs(pytester):
    workloads = {"wlm": workload("word_language_model", True, "--epochs", "100000", "--step-s", "0.01"),
                 "hf": workload("huggingface_trainer", False, "--epochs", "100000", "--step-s", "0.01")}
    settings = {"name": "interleaved", "workloads": workloads,
                "defaults": {"method": "interleaved", "phase_s": 0.5, "settle_s": 0.1, "warmup_s": 0.5,
                             "runs_per_config": 3},
                "pairs": [{"group": "i1", "foreground": {"model": "wlm"}, "background": {"model": "hf"}}]}
    result, out = run_session(pytester, settings, "--gpu-pairs-min-efficiency", "0")
    result.assert_outcomes(passed=1)
    [record] = records(out).values()
    assert record["method"] == "interleaved" and record["concurrency_efficiency"] is not None
    assert record["fg_progress_source"] == record["bg_progress_source"] == "log"
    assert all(r["fg_solo_steps_per_s"] > 0 and r["bg_solo_steps_per_s"] > 0 for r in record["rounds"])
    assert jobs_started_under(out) == []


def test_a_background_without_progress_fails_a_minimum_efficiency_with_the_fix(pytester):
    """The case the issue met on the GPU: a background that reports no steps gives no efficiency,
    and a minimum efficiency that applies is then a failure that says what to do, not a pass."""
    silent = {"command": job_argv("mnist", "--step-s", "0.04")}  # no progress_pattern, no protocol
    settings = {"name": "silent", "defaults": {"method": "epoch"},
                "workloads": {"printer": workload("mnist", False, "--step-s", "0.04"),
                                                "silent": silent},
                "pairs": [{"group": "s1", "foreground": {"model": "printer"}, "background": {"model": "silent"}}]}
    result, out = run_session(pytester, settings, "--gpu-pairs-min-efficiency", "0.5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*minimum efficiency 0.500 could not be checked*give silent a progress_pattern*"])
    [record] = records(out).values()
    assert record["concurrency_efficiency"] is None and record["bg_progress_source"] is None
    assert record["fg_progress_source"] == "log"
    assert jobs_started_under(out) == []


def test_a_progress_pattern_that_reads_nothing_is_named_with_a_line_it_missed(pytester):
    """Its log has lines, and its pattern matches none: as foreground the record's note says so
    (durations fall back to process wall times), as background the case's failure does."""
    mismatched = {**workload("mnist", True, "--step-s", "0.01"), "progress_pattern": r"^Iteration (?P<step>\d+)"}
    settings = {"name": "mismatch", "defaults": {"method": "epoch", "restart_delay_s": 0.1, "ready_timeout_s": 120},
                "workloads": {"printer": workload("mnist", False, "--step-s", "0.01"), "mismatched": mismatched},
                "pairs": [{"group": "m1", "foreground": {"model": "mismatched"}, "background": {"model": "printer"}},
                          {"group": "m2", "foreground": {"model": "printer"}, "background": {"model": "mismatched"}}]}
    result, out = run_session(pytester, settings)
    result.assert_outcomes(passed=1, failed=1)
    said = "its progress_pattern '^Iteration (?P<step>\\\\d+)' matched no step in the * line(s) of its log; one of them: 'Train Epoch: *"
    result.stdout.fnmatch_lines([f"*m2-printer+mismatched*ended before they were ready*its log had lines but {said}"])
    found = records(out)
    note = found["m1-mismatched+printer-default-concurrent"]["notes"]["duration_basis"]
    assert fnmatch.fnmatch(note, f"*process wall times*: mismatched's log had lines but {said}"), note
    assert jobs_started_under(out) == []
