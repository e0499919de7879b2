"""Interleaved rounds with real processes: two command workloads kept alive, paused and resumed
by signal, switched through their phases; every process ends, whatever happens."""
import json
import sys

import psutil
import pytest
from support.helpers import FAKE_JOB, SUITE, descendants_of_this_process, jobs_started_under

from pytest_gpu_pairs.protocol import Progress

ROUNDS = 3


def _job(step_s):
    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "100000", "--step-s", str(step_s)],
            "hyperparameters": {"fault": {"type": "str", "flag": "--fault"}}}


def _settings(path, fg_fault="none"):
    path.write_text(json.dumps({
        "name": "phases", "defaults": {"method": "interleaved", "phase_s": 0.5, "settle_s": 0.1, "warmup_s": 0.5,
                                       "runs_per_config": ROUNDS, "min_efficiency": 0.0},
        "workloads": {"trainer": _job(0.01), "loader": _job(0.02)},
        "pairs": [{"group": "p1", "foreground": {"model": "trainer", "hyperparameters": {"fault": fg_fault}},
                   "background": {"model": "loader"}}]}))
    return path


def test_an_interleaved_case_measures_its_rounds_and_ends_both_jobs(pytester):
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _settings(pytester.path / "s.json"),
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / "p1-trainer+loader-default-concurrent" / "result.json").read_text())
    assert record["method"] == "interleaved" and record["n_rounds"] == ROUNDS and len(record["rounds"]) == ROUNDS
    assert record["stop_reason"] == f"fixed {ROUNDS} round(s)" and record["precision_target"] is None
    for r in record["rounds"]:
        names = [p["name"] for p in r["phases"]]
        assert sorted(names) == ["bg", "fg", "pair"] and names[-1] == "pair"
        assert r["fg_solo_steps_per_s"] > 0 and r["bg_solo_steps_per_s"] > 0
        assert r["concurrency_efficiency"] == 1 / r["fg_slowdown"] + r["bg_progress_ratio"]
        assert r["bracketed"] is True  # the last pair phase too: closing solo phases followed it
    assert [r["phases"][0]["name"] for r in record["rounds"]] == ["fg", "bg", "fg"]  # solo order alternates
    assert len(record["concurrency_efficiency_ci"]) == 2 and record["warmup_s"] > 0
    assert record["interval_method"] == "student_t_starts" and record["n_starts"] == 1 and 0 < record["n_rounds_effective"] <= ROUNDS
    assert "gpu_energy_j" in record["notes"] and record["gpu_energy_j"] is None  # no GPU here, and it says so
    for key in ("fg_solo_gpu_busy", "bg_solo_gpu_busy", "pair_gpu_busy", "efficiency_bound"):
        assert record[key] is None and "not measurable on this run" in record["notes"][key]
    for role in ("fg", "bg"):  # both jobs were told that only their steady training rate is measured
        assert "steady state only" in (out / "p1-trainer+loader-default-concurrent" / f"{role}.log").read_text()
    assert jobs_started_under(out) == []


def test_a_job_that_dies_mid_case_fails_the_case_and_nothing_is_left(pytester):
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _settings(pytester.path / "s.json", "crash"),
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    record = json.loads((out / "p1-trainer+loader-default-concurrent" / "result.json").read_text())
    assert "fg trainer" in record["failure"] and record["concurrency_efficiency"] is None
    assert jobs_started_under(out) == []


def _finite(steps, step_s):
    """A training script that ends: it takes its step count as one argument (``--steps=N``)."""
    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--step-s", str(step_s)],
            "hyperparameters": {"steps": {"type": "int", "flag": "--steps=", "default": steps}}}


def _finite_settings(path, fg_steps, bg_steps, rounds, phase_s=0.5, settle_s=0.1):
    path.write_text(json.dumps({
        "name": "finite", "defaults": {"phase_s": phase_s, "settle_s": settle_s, "warmup_s": 0.5, "runs_per_config": rounds,
                                       "min_efficiency": 0.0},
        "workloads": {"short_a": _finite(fg_steps, 0.01), "short_b": _finite(bg_steps, 0.02)},
        "pairs": [{"group": "f1", "foreground": {"model": "short_a"}, "background": {"model": "short_b"}}]}))
    return path


def test_jobs_that_end_are_started_again_and_the_case_is_measured_without_a_method_option(pytester):
    """Both scripts end after 420 and 240 steps (5-7 s of running), fewer seconds than the case: each is started again,
    its new warm-up left out, and the case completes with an efficiency, restart counts and one
    pytest-benchmark round per complete round (1 / efficiency). Phases of 0.3 s hold the four step
    reports of each job that the harness asks for (one every 0.05 s at most)."""
    pytester.makepyfile(test_suite=SUITE)
    out, bench = pytester.path / "out", pytester.path / "bench.json"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _finite_settings(pytester.path / "s.json", 420, 240, 7, 0.3, 0.05),
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-out", out, "-p", "no:cacheprovider",
                                           "--benchmark-json", bench)
    result.assert_outcomes(passed=1)
    case_dir = out / "f1-short_a+short_b-default-concurrent"
    record = json.loads((case_dir / "result.json").read_text())
    assert record["method"] == "interleaved" and record["failure"] is None
    assert record["fg_restarts"] >= 1 and record["bg_restarts"] >= 1 and len(record["restarts"]) >= 2
    assert record["concurrency_efficiency"] is not None and len(record["concurrency_efficiency_ci"]) == 2
    assert record["n_rounds"] >= 7 and {r["segment"] for r in record["rounds"]} != {0}
    for restart in record["restarts"]:
        assert restart["trained_s"] > 0 and restart["restarted_t"] >= restart["exit_t"]
    assert "--steps=420" in (case_dir / "fg.log").read_text() and (case_dir / "fg.run2.log").exists()
    [entry] = json.loads(bench.read_text())["benchmarks"]
    used = [r for r in record["rounds"] if r["complete"]]
    assert entry["stats"]["rounds"] == len(used) >= 2 and entry["stats"]["stddev"] > 0
    assert entry["stats"]["data"] == [pytest.approx(1 / r["concurrency_efficiency"]) for r in used]
    assert entry["extra_info"]["case_wall_s"] > entry["stats"]["max"]
    assert entry["extra_info"]["benchmark_figure"].startswith("pair_s_per_solo_s")
    assert jobs_started_under(out) == []


def test_a_run_that_ends_while_the_other_job_still_sets_up_is_started_again(pytester):
    """The background's runs (240 steps, about 5 s) end before the foreground's first step (6 s of
    set-up, like a large model's): the run is started again, not refused, and the case is measured."""
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    settings = _finite_settings(pytester.path / "s.json", 100000, 240, 3, 0.3, 0.05)
    written = json.loads(settings.read_text())
    written["workloads"]["short_a"]["command"] += ["--startup-s", "6"]
    settings.write_text(json.dumps(written))
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / "f1-short_a+short_b-default-concurrent" / "result.json").read_text())
    assert record["failure"] is None and record["concurrency_efficiency"] is not None
    first = record["restarts"][0]
    assert first["role"] == "bg" and first["trained_s"] > 0
    assert first["exit_t"] < min(r["phases"][0]["start"] for r in record["rounds"])
    assert jobs_started_under(out) == []


def test_a_run_too_short_for_its_warm_up_and_a_few_rounds_fails_and_says_how_long_it_must_be(pytester):
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _finite_settings(pytester.path / "s.json", 150, 100000, 3),
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fg short_a finished its run (exit code 0) after * s of training, too short to "
                                 "measure: a run must train through its warm-up (* s here) and 3 rounds (* s each here), about * s*more work*"])
    assert jobs_started_under(out) == []


def test_a_trainer_in_a_session_of_its_own_is_paused_in_the_other_jobs_solo_phases(pytester):
    """As torch's elastic launcher starts its workers: were only the job's process group stopped, the
    "paused" job would go on training beside the other job's solo phases, and the figures be wrong."""
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    launched = [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "100000", "--step-s", "0.01", "--trainer-session"]
    (pytester.path / "s.json").write_text(json.dumps({
        "name": "launched", "defaults": {"method": "interleaved", "phase_s": 0.5, "settle_s": 0.2, "warmup_s": 0.3,
                                         "runs_per_config": ROUNDS, "min_efficiency": 0.0},
        "workloads": {"trainer": {"command": launched}, "loader": {"command": launched}},
        "pairs": [{"group": "p1", "foreground": {"model": "trainer"}, "background": {"model": "loader"}}]}))
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", pytester.path / "s.json", "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    case = out / "p1-trainer+loader-default-concurrent"
    record = json.loads((case / "result.json").read_text())
    reports = {role: Progress.read(case / f"{role}.progress.jsonl").steps for role in ("fg", "bg")}
    solo_phases = [p for r in record["rounds"] for p in r["phases"] if p["name"] != "pair"]
    assert len(solo_phases) >= 2 * ROUNDS
    for phase in solo_phases:
        paused = "bg" if phase["name"] == "fg" else "fg"
        assert not [t for t, _ in reports[paused] if phase["start"] <= t <= phase["end"]], (paused, phase)
        assert [t for t, _ in reports[phase["name"]] if phase["start"] <= t <= phase["end"]]
    assert jobs_started_under(out) == []
    assert not stopped_processes_of(out)


def stopped_processes_of(out) -> list[int]:
    """Processes left stopped (SIGSTOP) whose environment names a file under ``out``."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_STOPPED and any(str(out) in v for v in process.environ().values()):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def _slowing(slow_step_s):
    """A job that steps fast through the warm-up and then slowly, as on a host that gets busy."""
    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "100000", "--step-s", "0.01",
                        "--slow-after-s", "1.0", "--slow-step-s", str(slow_step_s)]}


def _slowing_settings(path, slow_step_s, phase_s=0.05):
    path.write_text(json.dumps({
        "name": "slowing", "defaults": {"method": "interleaved", "phase_s": phase_s, "settle_s": 0.05, "warmup_s": 0.3,
                                        "min_efficiency": 0.0},
        "workloads": {"trainer": _slowing(slow_step_s), "loader": _job(0.02)},
        "pairs": [{"group": "p1", "foreground": {"model": "trainer"}, "background": {"model": "loader"}}]}))
    return path


def test_phases_grow_to_the_steps_a_job_takes_after_the_warm_up_and_the_case_measures(pytester):
    """The warm-up promised steps of 10 ms; then each takes 0.3 s, ten times the settings' phase:
    the phases grow to hold several of the slow steps and the case has its figures."""
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _slowing_settings(pytester.path / "s.json", 0.3, 0.03),
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / "p1-trainer+loader-default-concurrent" / "result.json").read_text())
    assert record["phase_s"] >= 2 * 0.3 > 16 * 0.03
    assert record["settle_s"] == 0.05  # on the CPU nothing queues: settling stays the settings' however slow a step
    assert record["concurrency_efficiency"] is not None and record["n_rounds"] >= ROUNDS
    assert jobs_started_under(out) == []


def test_a_job_too_slow_for_the_time_cap_fails_the_case_and_says_what_to_change(pytester):
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _slowing_settings(pytester.path / "s.json", 4.0),
                                           "--gpu-pairs-device", "cpu", "--gpu-pairs-out", out, "-p", "no:cacheprovider",
                                           "--gpu-pairs-max-case-s", "25")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fg trainer steps too slowly here for the case's time cap: about one step report "
                                 "every * s of its running*raise --gpu-pairs-max-case-s*"])
    result.stdout.fnmatch_lines(["p1-trainer+loader-default-concurrent  failed *"])
    record = json.loads((out / "p1-trainer+loader-default-concurrent" / "result.json").read_text())
    assert record["concurrency_efficiency"] is None and "steps too slowly" in record["failure"]
    assert jobs_started_under(out) == []


def test_a_script_that_trains_without_a_progress_pattern_is_told_to_get_one_not_to_train_longer(pytester):
    """Its log has hundreds of step lines the harness was never told how to read: the case says
    which job needs a progress_pattern, and never that the run was too short."""
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    printing = {"command": [sys.executable, str(FAKE_JOB), "--print-steps", "--steps", "150", "--step-s", "0.02"]}
    (pytester.path / "s.json").write_text(json.dumps({
        "name": "silent", "defaults": {"method": "interleaved", "warmup_s": 0.3, "ready_timeout_s": 60},
        "workloads": {"printer": printing, "loader": _job(0.02)},
        "pairs": [{"group": "p1", "foreground": {"model": "printer"}, "background": {"model": "loader"}}]}))
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", pytester.path / "s.json", "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fg printer finished its run (exit code 0) after * s without a step report the "
                                 "harness could read*give printer a progress_pattern (its log's step lines) or report "
                                 "steps with pytest_gpu_pairs.progress*"])
    assert "too short" not in result.stdout.str()
    assert jobs_started_under(out) == []


def test_a_case_spreads_its_rounds_evenly_over_independent_starts_and_ends_every_job(pytester):
    """Three starts of the pair: each start's jobs are new processes, warm up until steady, and
    measure the same planned number of rounds; the interval is taken over the starts and every
    process of every start is ended."""
    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    settings = json.loads(_settings(pytester.path / "s.json").read_text())
    settings["defaults"].update(starts=3, phase_s=0.3, settle_s=0.05, runs_per_config=3)
    (pytester.path / "s.json").write_text(json.dumps(settings))
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", pytester.path / "s.json", "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-max-case-s", "60",
                                           "--gpu-pairs-out", out, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / "p1-trainer+loader-default-concurrent" / "result.json").read_text())
    assert record["n_starts"] == 3 and [s["start"] for s in record["starts"]] == [1, 2, 3]
    per_start = [s["rounds"] for s in record["starts"]]
    assert len(set(per_start)) == 1 and per_start[0] >= 2, per_start
    assert record["stop_reason"].startswith("planned:"), record["stop_reason"]
    assert {r["segment"] for r in record["rounds"]} == {0, 1, 2}
    assert record["interval_method"] == "student_t_starts" and record["between_start_prior"] is None
    assert all(not s["from_standby"] for s in record["starts"])  # command workloads cannot wait at a gate
    assert (out / "p1-trainer+loader-default-concurrent" / "fg.run3.log").is_file()
    assert jobs_started_under(out) == []
    assert not stopped_processes_of(out)


def test_the_sharing_mechanism_is_probed_once_while_both_jobs_train(tmp_path):
    """Under MPS the probe is the proof that the jobs became the daemon's clients: it must be asked
    while both jobs run, and what it said must reach the measurement."""
    from pytest_gpu_pairs.experiment.cases import expand_all
    from pytest_gpu_pairs.experiment.load import parse_experiment
    from pytest_gpu_pairs.record.stats import StoppingRule
    from pytest_gpu_pairs.run.environment import Environment
    from pytest_gpu_pairs.run.interleaved import InterleavedPair

    settings = json.loads(_settings(tmp_path / "s.json").read_text())
    case = expand_all([parse_experiment(settings, str(tmp_path / "s.json"))])[0]
    env = Environment(device="cpu", scale=1.0, sample_hz=10.0)
    asked = []

    def probe():
        asked.append({role: process.poll() is None and len(process.progress().steps) > 0
                      for role, process in pair.jobs.items()})
        return {"server_pids": [4242]}

    pair = InterleavedPair(case, env, tmp_path / "case", StoppingRule(None, min_rounds=1), probe=probe)
    measurement = pair.run()
    assert asked == [{"fg": True, "bg": True}] and measurement.sharing_probe == {"server_pids": [4242]}
    assert measurement.failure is None and len(measurement.rounds) >= 1
    assert jobs_started_under(tmp_path) == [] and descendants_of_this_process() == []
