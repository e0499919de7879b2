"""``--gpu-pairs-gpu-memory-mb``: the ballast process's life (ready, held, stopped on every path) and the option."""
import json
import sys
from functools import partial
from types import SimpleNamespace

import psutil
import pytest
from support.helpers import SUITE, children_of_this_process, pair

from pytest_gpu_pairs.run.ballast import Ballast, BallastError
from pytest_gpu_pairs.run.case import CaseContext
from pytest_gpu_pairs.run.fitprofile import PairFits
from pytest_gpu_pairs.run.jobs import live_jobs
from pytest_gpu_pairs.run.methods import EPOCH
from pytest_gpu_pairs.run.session import GpuPairsSession

STAND_IN = """\
import json, os, sys, time
mode, path = sys.argv[1], os.environ["GPU_PAIRS_PROGRESS"]
def emit(event):
    with open(path, "a") as handle:
        handle.write(json.dumps({**event, "t": time.time()}) + "\\n")
if mode == "ready":
    emit({"event": "ready", "free_mb": float(sys.argv[2])})
elif mode == "error":
    emit({"event": "error", "message": "CUDA is not available to the ballast process"})
    sys.exit(2)
elif mode == "exit":
    sys.exit(5)
time.sleep(60)
"""


def children() -> list[psutil.Process]:
    return children_of_this_process()


def fake_gpu(used_mb=500.0):
    """What the ballast asks NVML: memory in use before it, and per-process memory after."""
    return SimpleNamespace(memory_used_mb=lambda: used_mb,
                           compute_processes=lambda: [(p.pid, 70_000.0) for p in children()])


@pytest.fixture
def stand_in(tmp_path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return lambda mode: (lambda target_free: [sys.executable, str(script), mode, str(target_free)])


def test_the_ballast_holds_until_stopped_and_reports_what_it_held(tmp_path, stand_in):
    ballast = Ballast(10240, fake_gpu(), tmp_path, make_argv=stand_in("ready")).start()
    assert psutil.pid_exists(ballast.pid) and ballast.pid in [j.pid for j in live_jobs()]
    figures = ballast.figures()
    assert figures == {"gpu_memory_mb": 10240, "ballast_held_mb": 70_000.0, "gpu_free_mb_emulated": 9740.0,
                       "gpu_used_before_ballast_mb": 500.0}
    ballast.stop()
    assert children() == [] and live_jobs() == []


@pytest.mark.parametrize("mode, message", [("error", "the ballast failed: CUDA is not available"),
                                           ("exit", "exited with code 5 before holding the memory")])
def test_a_ballast_that_cannot_hold_is_a_clear_error_and_leaves_nothing(tmp_path, stand_in, mode, message):
    with pytest.raises(BallastError, match=message):
        Ballast(10240, fake_gpu(), tmp_path, make_argv=stand_in(mode)).start()
    assert children() == [] and live_jobs() == []


def test_a_ballast_that_never_gets_ready_is_killed(tmp_path, stand_in):
    with pytest.raises(BallastError, match="did not hold the memory within 1 s"):
        Ballast(10240, fake_gpu(), tmp_path, make_argv=stand_in("hang"), ready_timeout_s=1.0).start()
    assert children() == [] and live_jobs() == []


def test_a_card_smaller_than_what_the_driver_uses_is_refused_before_anything_starts(tmp_path, stand_in):
    with pytest.raises(BallastError, match="leaves nothing: the GPU already uses 600 MB"):
        Ballast(500, fake_gpu(600.0), tmp_path, make_argv=stand_in("ready")).start()
    assert children() == []


def test_the_real_ballast_process_says_why_it_cannot_hold_without_cuda(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": ""}
    with pytest.raises(BallastError, match="CUDA is not available to the ballast process"):
        Ballast(10240, fake_gpu(), tmp_path, env=env).start()
    events = [json.loads(line) for line in (tmp_path / "ballast.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "error" and children() == []


def test_option_without_a_gpu_skips_each_case_with_the_reason(pytester):
    pytester.makepyfile(test_suite=SUITE)
    settings = pytester.path / "exp.json"
    settings.write_text(json.dumps({"name": "exp", "pairs": [pair()]}))
    result = pytester.runpytest_subprocess("--gpu-pairs-settings", settings, "--gpu-pairs-device", "cpu",
                                           "--gpu-pairs-gpu-memory-mb", "10240", "-rs", "--gpu-pairs-out", pytester.path / "out")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*--gpu-pairs-gpu-memory-mb 10240 emulates a smaller GPU and needs one*"])


def test_option_value_must_be_positive(pytester):
    pytester.makepyfile(test_suite=SUITE)
    assert pytester.runpytest_subprocess("--gpu-pairs-gpu-memory-mb", "0", "--collect-only").ret == 4
    pytester.runpytest_subprocess("--help").stdout.fnmatch_lines(["*--gpu-pairs-gpu-memory-mb*"])


def test_a_case_that_fails_on_the_emulated_card_stops_its_ballast(tmp_path, stand_in):
    """The solo baseline OOMs on the small card: the case fails, and the ballast is gone with it."""
    env = SimpleNamespace(fixed_roles={}, device="cuda", device_name="fake GPU", scale=1.0)
    failed_solo = SimpleNamespace(fg=SimpleNamespace(failed=True, reason=lambda: "out of memory", oom=True,
                                                     start_t=0.0, end_t=1.0), window=(0.0, 1.0))
    sharing = SimpleNamespace(check=lambda case, device: None, prepare=lambda case, device: None)
    case_dir = tmp_path / "case"
    folder = SimpleNamespace(path=tmp_path, case_dir=lambda case: case_dir, fresh_case_dir=lambda case: case_dir.mkdir())
    device = SimpleNamespace(environment=lambda: env, emulated_card=lambda case: Ballast(10240, fake_gpu(), tmp_path,
                                                                                         make_argv=stand_in("ready")),
                             cool_down=lambda seconds: 0.0, release=lambda: None,
                             enforce_efficiency=True, enforce_vram=True)
    solos = SimpleNamespace(recorded=lambda job: None, has=lambda job: False, measure=lambda job, timeout_s: failed_solo)
    session = SimpleNamespace(folder=folder, device=device, results=[], extended=lambda case, record: record,
                              settings_digest=lambda case: {})
    context = CaseContext(folder, device, solos, sharing,
                          SimpleNamespace(for_case=lambda case, env: PairFits(unmeasured="not here")),
                          partial(GpuPairsSession.conclude, session), session.results)
    fg = SimpleNamespace(model="a", hyperparameters={}, runs=1)
    case = SimpleNamespace(id="g01-a+b-default-concurrent", fg=fg, bg=None, jobs=(fg,), roles=("fg",), timeout_s=60, cool_down_s=0.0, sharing="timeslice", design="pairs", variant="default",
                           mode="concurrent", method="epoch", vram_budget_mb=7500.0)
    run = EPOCH.runner(case, context, SimpleNamespace(extra_info={}))
    with pytest.raises(pytest.fail.Exception, match="solo baseline of a failed: out of memory"):
        run()
    assert children() == [] and live_jobs() == [] and env.fixed_roles == {}
    recorded = json.loads((case_dir / "result.json").read_text())
    assert recorded["complete"] and recorded["oom"] and recorded["gpu_memory_mb"] == 10240
