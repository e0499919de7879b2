"""Beyond one GPU, in real pytest runs: shards partition the selection, `gpu-pairs plan` predicts
GPU counts, `gpu-pairs merge` of shard runs equals one unsharded run, and xdist workers each run
their own session (every worker's jobs ended)."""
from __future__ import annotations

import json
import re

import pytest
from support.helpers import SUITE, alive_pids, jobs_started_under
from support.helpers import pair as builtin_pair

from integration.test_supervision import pair, write_settings
from pytest_gpu_pairs.cli import main as gpu_pairs

QUICK_BG = {"protocol": True, "steps": 10, "step_s": 0.02}
QUICK_PAIRS = [pair(f"g0{i}", {"steps": 2 + i, "accuracy": 0.5}, QUICK_BG) for i in range(1, 4)]


def _builtin_settings(pytester):
    pairs = [builtin_pair(f"g{i:02d}", fg, bg) for i, (fg, bg) in enumerate(
        [("mnist_ff", "resnet20"), ("mnist", "densenet121"), ("mnist_rnn", "resnet56"), ("mnist", "mnist_ff"),
         ("resnet20", "mnist_rnn"), ("densenet121", "mnist_ff"), ("mnist_ff", "mnist")], 1)]
    path = pytester.path / "exp.json"
    path.write_text(json.dumps({"name": "exp", "pairs": pairs}))
    return path


def _collected(result) -> list[str]:
    return re.findall(r"test_pair\[([^\]]+)\]", result.stdout.str())


@pytest.mark.parametrize("count", [3, 4])
def test_shards_partition_the_selected_cases_exactly(pytester, count):
    pytester.makepyfile(test_suite=SUITE)
    settings = _builtin_settings(pytester)
    args = ["--gpu-pairs-settings", settings, "--collect-only", "-q", "-p", "no:cacheprovider", "-k", "not g04"]
    everything = _collected(pytester.runpytest_subprocess(*args))
    shards = [_collected(pytester.runpytest_subprocess(*args, "--gpu-pairs-shard", f"{k}/{count}"))
              for k in range(1, count + 1)]
    assert len(everything) == 6
    assert sorted(i for shard in shards for i in shard) == sorted(everything)
    assert all(shards)  # 6 cases of similar cost over 3 or 4 machines: none idle
    again = _collected(pytester.runpytest_subprocess(*args, "--gpu-pairs-shard", f"2/{count}"))
    assert again == shards[1]


def test_a_bad_shard_is_one_line(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _builtin_settings(pytester), "--gpu-pairs-shard", "4/3")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--gpu-pairs-shard*expected K/N with 1 <= K <= N, got '4/3'*"])


def test_plan_predicts_makespan_gpu_hours_and_idle_time_per_gpu_count(pytester, capsys):
    settings = _builtin_settings(pytester)
    assert gpu_pairs(["plan", str(settings), "--gpus", "1,2,4", "-k", "not g04", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    rows = {row["gpus"]: row for row in plan["predictions"]}
    assert plan["cases"] == 6 and set(rows) == {1, 2, 4}
    assert rows[1]["speedup"] == 1.0 and rows[1]["idle_s"] == 0
    for row in rows.values():
        assert row["makespan_s"] == max(row["loads_s"])
        assert sorted(i for ids in row["cases_per_gpu"] for i in ids) == sorted(rows[1]["cases_per_gpu"][0])
        assert row["memory"] is None  # no earlier results: headroom is not guessed
    assert rows[4]["makespan_s"] < rows[2]["makespan_s"] < rows[1]["makespan_s"]
    assert gpu_pairs(["plan", str(settings), "--gpus", "1,2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gpu-pairs plan: 7 case(s) on cuda at scale 1 (estimates: 7 profile)")
    assert out[1].split()[:4] == ["gpus", "makespan", "speedup", "gpu-hours"] and out[2].startswith("1 ")


def test_plan_refuses_a_bad_selection_in_one_line(pytester, capsys):
    settings = _builtin_settings(pytester)
    assert gpu_pairs(["plan", str(settings), "-k", "nothing-like-this"]) == 2
    assert capsys.readouterr().out == "error: no case selected\n"


def _run(pytester, out, *extra):
    settings = write_settings(pytester.path, "quick", QUICK_PAIRS)
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                         "--gpu-pairs-out", str(pytester.path / out), "-p", "no:cacheprovider",
                                         *extra, timeout=600)


def assert_every_job_ended(tmp) -> None:
    """Every job process of every session (workers and shards) was started and is gone."""
    assert list((tmp / "pids").iterdir())
    assert alive_pids(tmp / "pids") == [] and jobs_started_under(tmp) == []


def _records(folder) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in folder.glob("*/result.json")}


def test_merge_of_three_shard_runs_equals_one_unsharded_run_in_case_ids_and_record_keys(pytester, capsys):
    whole = _run(pytester, "whole")
    assert whole.ret == 0, whole.stdout.str()
    for k in (1, 2, 3):
        assert _run(pytester, f"shard{k}", "--gpu-pairs-shard", f"{k}/3").ret == 0
    assert all(len(_records(pytester.path / f"shard{k}")) == 1 for k in (1, 2, 3))
    assert_every_job_ended(pytester.path)
    folders = [str(pytester.path / f"shard{k}") for k in (1, 2, 3)]
    assert gpu_pairs(["merge", *folders, "-o", str(pytester.path / "merged")]) == 0
    assert "merged 3 case(s) from 3 folder(s)" in capsys.readouterr().out
    merged, unsharded = _records(pytester.path / "merged"), _records(pytester.path / "whole")
    assert sorted(merged) == sorted(unsharded)
    assert all(sorted(merged[i]) == sorted(unsharded[i]) for i in merged)
    assert all((pytester.path / "merged" / i / "fg.log").is_file() or list((pytester.path / "merged" / i).iterdir())
               for i in merged)
    session = json.loads((pytester.path / "merged" / "session.json").read_text())
    assert session["merged_from"] == folders

    assert gpu_pairs(["merge", folders[0], str(pytester.path / "whole"), "-o", str(pytester.path / "clash")]) == 2
    line = capsys.readouterr().out
    assert line.startswith("error: case g01-") and "has different records in" in line and line.count("\n") == 1
    assert not (pytester.path / "clash").exists()
    assert gpu_pairs(["merge", folders[0], folders[0], "-o", str(pytester.path / "twice")]) == 0  # same record: kept once


def test_two_cpu_workers_run_every_case_into_one_summary_one_benchmark_json_and_one_folder(pytester):
    bench = pytester.path / "bench.json"
    result = _run(pytester, "out", "-n", "2", "--benchmark-json", str(bench))
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert out.count("gpu-pairs results") == 1 and "2 workers [3 items]" in out
    result.stdout.fnmatch_lines(["*g01-trainer+loader-default-concurrent * passed *",
                                 "*g02-trainer+loader-default-concurrent * passed *",
                                 "*g03-trainer+loader-default-concurrent * passed *"])
    cases = sorted(f"g0{i}-trainer+loader-default-concurrent" for i in (1, 2, 3))
    benchmarks = json.loads(bench.read_text())["benchmarks"]
    assert sorted(b["extra_info"]["case_id"] for b in benchmarks) == cases
    assert all(b["stats"]["rounds"] >= 1 and b["stats"]["data"] for b in benchmarks)  # timed in the workers
    assert sorted(_records(pytester.path / "out")) == cases
    session = json.loads((pytester.path / "out" / "session.json").read_text())
    assert sorted(session["workers"]) == ["gw0", "gw1"]
    solos = [p.name for p in (pytester.path / "out" / "_solo").iterdir()]
    assert solos and all(name.endswith(("-gw0", "-gw1")) for name in solos)  # each worker its own cache
    assert_every_job_ended(pytester.path)
    assert not (pytester.path / "out" / ".gpu-pairs.lock.owner").exists()  # released by the controller


def test_a_second_run_on_the_same_folder_is_refused_while_the_workers_run(pytester):
    """The controller holds the output folder's lock for all its workers."""
    from filelock import FileLock

    (pytester.path / "out").mkdir()
    with FileLock(str(pytester.path / "out" / ".gpu-pairs.lock")):
        result = _run(pytester, "out", "-n", "2")
    assert result.ret == 4
    assert "is in use by another pytest session" in result.stdout.str() + result.stderr.str()
    assert not list((pytester.path / "out").glob("g0*"))


def test_a_study_handed_out_by_group_holds_its_folder_while_the_workers_run(pytester):
    """Under ``--dist loadgroup`` a worker's test ids carry ``@<group>``: the controller still finds
    its cases, so it locks the folder (a second session is refused) and says who holds it."""
    from filelock import FileLock

    from integration.test_resume_solo_baselines import _settings
    from pytest_gpu_pairs.run.outdir import in_use_by

    pytester.makepyfile(test_suite=SUITE)
    out = pytester.path / "out"
    args = ["--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(out), "--gpu-pairs-settings",
            str(_settings(pytester.path)), "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    out.mkdir()
    with FileLock(str(out / ".gpu-pairs.lock")):
        refused = pytester.runpytest_subprocess(*args, "-k", "steps_min", timeout=600)
    assert refused.ret == 4 and "is in use by another pytest session" in refused.stdout.str() + refused.stderr.str()
    assert not list(out.glob("g01-*"))
    plugin = pytester.path / "conftest.py"
    plugin.write_text("import os\n\ndef pytest_runtest_call(item):\n"
                      f"    os.makedirs({str(pytester.path / 'seen')!r}, exist_ok=True)\n"
                      f"    open(os.path.join({str(pytester.path / 'seen')!r}, str(os.getpid())), 'w').write("
                      f"open({str(out / '.gpu-pairs.lock.owner')!r}).read())\n")
    result = pytester.runpytest_subprocess(*args, "-k", "steps_min", timeout=600)
    assert result.ret == 0, result.stdout.str()
    held = [f.read_text() for f in (pytester.path / "seen").iterdir()]
    assert held and all(text.startswith("pid ") for text in held)  # the controller's, while cases ran
    assert in_use_by(out) is None and not (out / ".gpu-pairs.lock.owner").exists()
    assert jobs_started_under(out) == []


def test_sigterm_to_the_controller_ends_every_workers_jobs(pytester):
    """Both workers mid-case (one hangs in its foreground), SIGTERM to the controller: pytest ends
    and no job process of either worker lives on."""
    import signal

    from support.helpers import wait_for

    from integration.test_supervision import INTERRUPTED_CASE, start_pytest

    tmp = pytester.path
    process = start_pytest(tmp, "-n", "2")
    try:
        progress = tmp / "out" / INTERRUPTED_CASE / "fg.progress.jsonl"
        wait_for(lambda: process.poll() is None and progress.exists() and '"ready"' in progress.read_text()
                 and len(jobs_started_under(tmp / "out")) >= 2, timeout_s=300, what="the hanging case's jobs")
        assert len(list((tmp / "out" / "_workers").iterdir())) == 2  # both workers opened their session
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    log = (tmp / "pytest.log").read_text()
    assert log.count("gpu-pairs results") == 1  # the controller's summary names the cut case
    assert f"interrupted (incomplete result.json): {INTERRUPTED_CASE}" in log and "--gpu-pairs-resume" in log
    wait_for(lambda: jobs_started_under(tmp / "out") == [], timeout_s=60, what="every job to end")
    assert alive_pids(tmp / "pids") == []


def test_several_gpus_without_workers_are_refused_in_one_line(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", _builtin_settings(pytester),
                                           "--gpu-pairs-gpus", "0,1")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: --gpu-pairs-gpus names several GPUs: run one worker per GPU with -n 2*"])
