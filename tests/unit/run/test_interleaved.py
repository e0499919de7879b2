"""How long each phase of an interleaved round lasts: the settings' lengths, stretched only for a
job that reports rarely or steps slowly."""
from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.protocol import Progress
from pytest_gpu_pairs.run.interleaved import REPORTS_PER_PHASE, STEPS_PER_SETTLE, phase_lengths


def reporting(every_s: float, steps_per_report: int, until: float = 10.0) -> Progress:
    progress = Progress()
    t, step = 0.0, 1
    while t <= until:
        progress.steps.append((t, step))
        t, step = t + every_s, step + steps_per_report
    return progress


def test_fast_reporters_keep_the_settings_lengths():
    assert phase_lengths([reporting(0.25, 50), reporting(0.25, 25)], 0.0, 10.0, 2.0, 0.3) == (2.0, 0.3)


def test_a_rare_reporter_stretches_the_phase_and_a_slow_stepper_the_settling():
    phase, settle = phase_lengths([reporting(0.25, 50), reporting(1.5, 1)], 0.0, 10.0, 2.0, 0.3)
    assert phase == 2.0 * math.ceil(REPORTS_PER_PHASE * 1.5 / 2.0) and settle == STEPS_PER_SETTLE * 1.5


def test_no_reports_in_the_warm_up_leaves_the_settings_lengths():
    assert phase_lengths([Progress(), reporting(0.25, 10)], 20.0, 30.0, 2.0, 0.3) == (2.0, 0.3)


@given(st.lists(st.tuples(st.floats(0.01, 5.0), st.integers(1, 1000)), min_size=1, max_size=3),
       st.floats(0.1, 10.0), st.floats(0.0, 2.0))
def test_never_shorter_than_the_settings(cadences, phase_s, settle_s):
    progresses = [reporting(every, steps, until=20.0) for every, steps in cadences]
    phase, settle = phase_lengths(progresses, 0.0, 20.0, phase_s, settle_s)
    assert phase >= phase_s and settle >= settle_s
    assert math.isclose(phase / phase_s, round(phase / phase_s))  # a whole multiple: the same in every session


def test_a_job_that_ends_while_the_other_is_restarted_is_restarted_too():
    """Two scripts that end together: the second's end, met while the first one's new run warms up,
    restarts it as well, and both new runs warm up together before the rounds go on."""
    from pytest_gpu_pairs.run.interleaved import InterleavedPair, JobEnded

    pair = InterleavedPair.__new__(InterleavedPair)
    replaced, warmed = [], []

    def replace_run(role):
        replaced.append(role)
        return float(len(replaced))

    def warm_up_again(renewed, since):
        warmed.append((list(renewed), since))
        if len(warmed) == 1:
            raise JobEnded("bg")

    pair._replace_run, pair._warm_up_again = replace_run, warm_up_again
    pair._restart("fg")
    assert replaced == ["fg", "bg"]
    assert warmed == [(["fg"], 1.0), (["fg", "bg"], 2.0)]
