"""A group of three jobs on the CPU, end to end: three real job processes kept alive, each measured
alone with the other two stopped by signal and all three together, the record complete with the
efficiency over three jobs, and every process ended."""
import json
import sys

from support.helpers import FAKE_JOB, SUITE, jobs_started_under

CASE = "g3-trainer+loader+tagger-default-concurrent"
ROUNDS = 3


def _job(step_s):
    return {"command": [sys.executable, str(FAKE_JOB), "--protocol", "--steps", "100000", "--step-s", str(step_s)]}


def test_a_group_of_three_is_measured_alone_and_together_and_every_job_ends(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = pytester.path / "three.json"
    settings.write_text(json.dumps({
        "name": "three", "defaults": {"phase_s": 0.25, "settle_s": 0.05, "warmup_s": 0.5, "min_efficiency": 0.0,
                                      "runs_per_config": ROUNDS},
        "workloads": {"trainer": _job(0.01), "loader": _job(0.02), "tagger": _job(0.015)},
        "pairs": [{"group": "g3", "foreground": {"model": "trainer"},
                   "backgrounds": [{"model": "loader"}, {"model": "tagger"}]}]}))
    out = pytester.path / "results"
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-out", out, "-k", "tagger", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = json.loads((out / CASE / "result.json").read_text())
    assert record["complete"] and record["method"] == "interleaved" and record["n_jobs"] == 3
    assert [(j["role"], j["model"]) for j in record["jobs"]] == [("fg", "trainer"), ("bg", "loader"),
                                                                ("bg2", "tagger")]
    assert record["n_rounds"] == ROUNDS and record["stop_reason"] == f"fixed {ROUNDS} round(s)"
    for r in record["rounds"]:
        names = [p["name"] for p in r["phases"]]
        assert sorted(names) == ["bg", "bg2", "fg", "pair"] and names[-1] == "pair"
        assert [j["role"] for j in r["jobs"]] == ["fg", "bg", "bg2"]
        if not r["complete"]:
            continue  # a loaded host left a job silent through a phase: the round is left out, and says so
        assert all(j["solo_steps_per_s"] > 0 for j in r["jobs"])
        fg, *bgs = [j["progress_ratio"] for j in r["jobs"]]
        assert r["concurrency_efficiency"] == 1 / r["fg_slowdown"] + bgs[0] + bgs[1]  # every job's progress counted
        assert r["bg_progress_ratio"] == bgs[0] and r["bracketed"] is True
    assert [r["phases"][0]["name"] for r in record["rounds"][:3]] == ["fg", "bg2", "fg"]  # the solo order reverses
    assert len(record["concurrency_efficiency_ci"]) == 2 and record["fg_slowdown"] > 0
    assert record["gpu_energy_j"] is None and "gpu_energy_j" in record["notes"]  # no GPU here, and it says so
    assert record["vram_fit_mb"] is None and "vram_fit_mb" in record["notes"]
    for role in ("fg", "bg", "bg2"):
        assert "steady state only" in (out / CASE / f"{role}.log").read_text()
    assert jobs_started_under(out) == []
