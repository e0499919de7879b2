"""A resumed study compares its remaining shared runs with the solo cases an earlier session recorded,
as the session that measured everything would have, instead of measuring each job alone again
(real pytest sessions, command workloads on the CPU)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from support.helpers import FAKE_JOB, SUITE, jobs_started_under

FG_SOLO, BG_SOLO = "g01-fg+none-default-solo", "g01-bg+none-default-solo"
SHARED = "g01-fg+bg-default-concurrent"


def _settings(tmp: Path) -> Path:
    def command(steps: int) -> dict:
        return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--step-s", "0.05"],
                "hyperparameters": {"steps": {"type": "int", "default": steps, "flag": "--steps"}}}

    path = tmp / "study.json"
    path.write_text(json.dumps({
        "name": "study", "design": "hp_study", "vary": {"steps": [0.5, 1.5]},
        "defaults": {"restart_delay_s": 0.1, "timeout_s": 300, "keep_background": True},
        "workloads": {"fg": command(10), "bg": command(100)},
        "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]}))
    return path


def _run(pytester, *extra):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(pytester.path / "out"),
                                         "--gpu-pairs-settings", str(_settings(pytester.path)), "-p", "no:cacheprovider",
                                         "-rA", *extra, timeout=600)


def _record(tmp: Path, case_id: str) -> dict:
    return json.loads((tmp / "out" / case_id / "result.json").read_text())


def test_a_resumed_study_compares_with_the_solo_cases_on_record_and_measures_no_job_alone_again(pytester):
    _run(pytester, "-k", "solo").assert_outcomes(passed=4)
    fg_solo, bg_solo = _record(pytester.path, FG_SOLO), _record(pytester.path, BG_SOLO)
    assert fg_solo["fg_steps_in_window"] and fg_solo["fg_solo_steps_per_s"] and bg_solo["fg_solo_steps_per_s"]

    resumed = _run(pytester, "--gpu-pairs-resume")
    resumed.assert_outcomes(passed=3, skipped=4)
    shared = _record(pytester.path, SHARED)
    assert not (pytester.path / "out" / "_solo").exists()  # no job was measured alone again
    assert shared["fg_solo_duration_s"] == fg_solo["fg_duration_s"]
    assert shared["fg_solo_steps_per_s"] == fg_solo["fg_solo_steps_per_s"]
    assert shared["bg_solo_steps_per_s"] == bg_solo["fg_solo_steps_per_s"]
    assert shared["concurrent_overhead"] is not None
    assert jobs_started_under(pytester.path / "out") == []


def test_a_solo_case_on_record_without_the_baselines_figures_is_measured_again(pytester):
    """A record written before a solo case kept its steps cannot stand in for the run: the job is
    measured alone again, as resumed sessions always did."""
    _run(pytester, "-k", "solo").assert_outcomes(passed=4)
    path = pytester.path / "out" / FG_SOLO / "result.json"
    older = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("fg_steps_in_window", "fg_solo_steps_per_s")}
    path.write_text(json.dumps(older))

    _run(pytester, "--gpu-pairs-resume").assert_outcomes(passed=3, skipped=4)
    shared = _record(pytester.path, SHARED)
    remeasured = [p for p in (pytester.path / "out" / "_solo").glob("fg-*/result.json")]
    assert len(remeasured) == 1 and not list((pytester.path / "out" / "_solo").glob("bg-*"))
    assert shared["fg_solo_duration_s"] == json.loads(remeasured[0].read_text())["fg_duration_s"]
    assert shared["bg_solo_steps_per_s"] == _record(pytester.path, BG_SOLO)["fg_solo_steps_per_s"]
    assert jobs_started_under(pytester.path / "out") == []


def _moved_to_another_host(tmp: Path, case_id: str) -> None:
    path = tmp / "out" / case_id / "result.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "host": f"{record['host']}-elsewhere"}))


def test_a_replicate_begun_on_another_host_is_measured_again_whole(pytester):
    """Its shared runs must be compared with solo runs of the machine they run on: every case of the
    replicate runs again here, the solo cases included, and nothing is measured twice."""
    _run(pytester, "-k", "solo").assert_outcomes(passed=4)
    _moved_to_another_host(pytester.path, FG_SOLO)
    elsewhere = _record(pytester.path, FG_SOLO)

    _run(pytester, "--gpu-pairs-resume").assert_outcomes(passed=7)
    fg_solo, shared = _record(pytester.path, FG_SOLO), _record(pytester.path, SHARED)
    assert fg_solo["host"] == shared["host"] != elsewhere["host"]
    assert shared["fg_solo_duration_s"] == fg_solo["fg_duration_s"]
    assert not (pytester.path / "out" / "_solo").exists()
    assert jobs_started_under(pytester.path / "out") == []


def test_a_complete_replicate_from_another_host_is_resumed_as_it_stands(pytester):
    _run(pytester).assert_outcomes(passed=7)
    for case in (pytester.path / "out").glob("g01-*"):
        _moved_to_another_host(pytester.path, case.name)
    _run(pytester, "--gpu-pairs-resume").assert_outcomes(skipped=7)
    assert _record(pytester.path, SHARED)["host"].endswith("-elsewhere")


def test_the_plan_of_a_resumed_session_counts_a_replicate_to_be_measured_again(pytester):
    _run(pytester, "-k", "solo").assert_outcomes(passed=4)
    here = _run(pytester, "--gpu-pairs-resume", "--gpu-pairs-plan")
    here.stdout.fnmatch_lines(["*resumed: 4 case(s) already recorded in * are not counted*"])
    _moved_to_another_host(pytester.path, FG_SOLO)
    elsewhere = _run(pytester, "--gpu-pairs-resume", "--gpu-pairs-plan")
    assert "already recorded" not in elsewhere.stdout.str()
    assert "gpu-pairs plan" in elsewhere.stdout.str()


def _split_settings(tmp: Path) -> Path:
    """Two factors, each its own block: ``steps`` and ``step_s`` (case ids ``...steps...`` and ``...step_s...``)."""
    def command(steps: int) -> dict:
        return {"command": [sys.executable, str(FAKE_JOB), "--protocol"],
                "hyperparameters": {"steps": {"type": "int", "default": steps, "flag": "--steps"},
                                    "step_s": {"type": "float", "default": 0.05, "flag": "--step-s"}}}

    path = tmp / "split.json"
    path.write_text(json.dumps({
        "name": "split", "design": "hp_study", "vary": {"steps": [0.5, 1.5], "step_s": [0.8, 1.25]},
        "defaults": {"restart_delay_s": 0.1, "timeout_s": 300, "keep_background": True},
        "workloads": {"fg": command(10), "bg": command(100)},
        "pairs": [{"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"},
                   "split_by_factor": True}]}))
    return path


def test_a_pair_split_by_factor_keeps_a_block_from_another_host_and_measures_an_unfinished_one_again(pytester):
    """Each block is a replicate of its own: one finished elsewhere stands, one begun elsewhere runs
    again whole here, its shared runs compared with its own solo runs of this machine."""
    pytester.makepyfile(test_suite=SUITE)

    def run(*extra):
        return pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(pytester.path / "out"),
                                             "--gpu-pairs-settings", str(_split_settings(pytester.path)),
                                             "-p", "no:cacheprovider", "-rA", *extra, timeout=600)

    run("-k", "steps or (step_s and solo)").assert_outcomes(passed=11)
    for case in (pytester.path / "out").glob("g01-*"):
        _moved_to_another_host(pytester.path, case.name)

    run("--gpu-pairs-resume").assert_outcomes(passed=7, skipped=7)
    kept = _record(pytester.path, "g01-fg+bg-default_steps-concurrent")
    solo, shared = (_record(pytester.path, f"g01-fg+{bg}-default_step_s-{mode}")
                    for bg, mode in (("none", "solo"), ("bg", "concurrent")))
    assert kept["host"].endswith("-elsewhere") and solo["host"] == shared["host"] != kept["host"]
    assert shared["fg_solo_duration_s"] == solo["fg_duration_s"]
    assert not (pytester.path / "out" / "_solo").exists()
    assert jobs_started_under(pytester.path / "out") == []
