"""--gpu-pairs-time-limit in a real pytest session on the CPU (command workloads of
tests/support/fake_job.py): a case whose estimate would end past the limit is skipped, not started,
a later one that fits still runs, the session exits 2 naming what it left out, and a resumed
session measures it."""
from __future__ import annotations

import json
import re
from pathlib import Path

from support.helpers import SUITE, jobs_started_under

from integration.test_hostile import BG, command

FG = ["--protocol", "--steps", "5", "--step-s", "0.05"]
LONG, SHORT = "g02-fg+bg-default-concurrent", "g01-fg+bg-default-concurrent"


def _settings(tmp: Path) -> Path:
    """The long pair first (four rounds), then the short one (one round)."""
    path = tmp / "limit.json"
    pairs = [{"group": "g02", "foreground": {"model": "fg"}, "background": {"model": "bg"}, "runs_per_config": 4},
             {"group": "g01", "foreground": {"model": "fg"}, "background": {"model": "bg"}}]
    path.write_text(json.dumps({"name": "limit", "defaults": {"method": "epoch", "restart_delay_s": 0, "timeout_s": 300},
                                "workloads": {"fg": command(*FG), "bg": command(*BG)}, "pairs": pairs}))
    return path


def _run(pytester, settings: Path, *extra):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("--gpu-pairs-device", "cpu", "--gpu-pairs-out", str(pytester.path / "out"),
                                         "--gpu-pairs-settings", str(settings), "-p", "no:cacheprovider", "-rA",
                                         *extra, timeout=600)


def _estimates(pytester, settings: Path) -> dict[str, float]:
    planned = _run(pytester, settings, "--gpu-pairs-plan").stdout.str()
    found = {}
    for line in planned.splitlines():
        match = re.match(r"(g0\d-\S+)\s+(\d+):(\d\d)\s", line)
        if match:
            found[match[1]] = int(match[2]) * 60 + int(match[3])
    return found


def test_a_case_that_would_end_past_the_limit_is_left_out_and_a_resumed_session_measures_it(pytester):
    settings = _settings(pytester.path)
    estimates = _estimates(pytester, settings)
    assert estimates[LONG] > estimates[SHORT] + 60
    limit = estimates[SHORT] + 30  # the short case fits from the start, the long one never
    planned = _run(pytester, settings, "--gpu-pairs-plan", "--gpu-pairs-time-limit", str(limit))
    planned.stdout.fnmatch_lines([f"within --gpu-pairs-time-limit *: 1 of 2 case(s) start, *; left out: {LONG}"])
    limited = _run(pytester, settings, "--gpu-pairs-time-limit", str(limit))
    assert limited.ret == 2
    limited.assert_outcomes(passed=1, skipped=1)
    limited.stdout.fnmatch_lines([f"not started within --gpu-pairs-time-limit: 1 case(s), *: {LONG}",
                                  "  to measure them: pytest * --gpu-pairs-resume",
                                  f"SKIPPED *: not started within --gpu-pairs-time-limit (*): {LONG} is estimated at *"])
    out = pytester.path / "out"
    assert not (out / LONG).exists()  # never started: no folder, no half-written record
    assert json.loads((out / SHORT / "result.json").read_text())["complete"] is True
    assert jobs_started_under(out) == []
    resumed = _run(pytester, settings, "--gpu-pairs-resume")
    assert resumed.ret == 0
    resumed.assert_outcomes(passed=1, skipped=1)  # the short case resumed, the long one measured
    assert json.loads((out / LONG / "result.json").read_text())["complete"] is True
    assert jobs_started_under(out) == []
