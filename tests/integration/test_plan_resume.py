"""The plan of a resumed session counts only the cases it will run."""
from __future__ import annotations

import json
import shutil

from support.helpers import H100_DATA, SUITE, pair

CASE_ID = "g01-mnist_ff+resnet20-default-concurrent"


def test_a_resumed_plan_leaves_out_the_cases_already_recorded(pytester):
    settings = pytester.path / "exp.json"
    settings.write_text(json.dumps({"name": "exp", "pairs": [pair("g01", "mnist_ff", "resnet20"),
                                                             pair("g03", "mnist", "siamese")]}))
    out = pytester.path / "out"
    shutil.copytree(H100_DATA / "run" / CASE_ID, out / CASE_ID)
    record = json.loads((out / CASE_ID / "result.json").read_text())
    (out / CASE_ID / "result.json").write_text(json.dumps({**record, "complete": True}))
    pytester.makepyfile(test_suite=SUITE)
    common = ("--gpu-pairs-plan", "--gpu-pairs-settings", settings, "--gpu-pairs-device", "cuda", "--gpu-pairs-out",
              out, "-p", "no:cacheprovider")
    resumed = pytester.runpytest_subprocess(*common, "--gpu-pairs-resume")
    resumed.stdout.fnmatch_lines(["total: * for 1 case(s) on cuda *",
                                  f"resumed: 1 case(s) already recorded in {out} are not counted"])
    assert CASE_ID not in resumed.stdout.str().split("gpu-pairs plan")[1].split("total:")[0]
    fresh = pytester.runpytest_subprocess(*common)
    fresh.stdout.fnmatch_lines(["total: * for 2 case(s) on cuda *"])
    assert "resumed:" not in fresh.stdout.str()
