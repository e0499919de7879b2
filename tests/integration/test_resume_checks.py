"""A resumed case is judged by this session's thresholds, and its result.json says which: the check
and the report read the same minimum efficiency."""
from __future__ import annotations

import json

from integration.test_hostile import BG, command, record, run, write_settings


def test_a_resumed_case_under_a_new_minimum_records_the_new_minimum(pytester):
    settings = write_settings(pytester.path, {"fg": command("--protocol", "--steps", "5", "--step-s", "0.05"),
                                              "bg": command(*BG)})
    run(pytester, settings, "--gpu-pairs-min-efficiency", "0.0").assert_outcomes(passed=1)
    first = record(pytester.path)
    assert first["min_efficiency"] == 0.0
    again = run(pytester, settings, "--gpu-pairs-resume", "--gpu-pairs-min-efficiency", "0.25")
    again.assert_outcomes(skipped=1)
    resumed = record(pytester.path)
    assert resumed["min_efficiency"] == 0.25
    assert {k: v for k, v in resumed.items() if k != "min_efficiency"} == \
        {k: v for k, v in first.items() if k != "min_efficiency"}
    assert json.loads(json.dumps(resumed)) == resumed
