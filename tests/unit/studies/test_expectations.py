"""A prediction in the settings (a group's ``expect``) is judged by fixed rules: confirmed only where
the measured point lies in the predicted range, refuted only where the whole interval misses it, a
figure not measured never confirms, and one refuted figure refutes the prediction."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.load import SettingsError, parse_experiment
from pytest_gpu_pairs.experiment.schema import Expectation
from pytest_gpu_pairs.studies.expectations import (
    CONFIRMED,
    REFUTED,
    UNDECIDED,
    UNMEASURED,
    VRAM_TOLERANCE,
    Measured,
    judge,
    judge_fits,
    judge_range,
    overall,
    time_saved,
)

values = st.floats(min_value=0.01, max_value=4.0, allow_nan=False)


@given(values, values, values, values, values)
def test_a_range_is_confirmed_by_the_point_and_refuted_only_by_the_whole_interval(point, a, b, c, d):
    predicted, interval = (min(a, b), max(a, b)), (min(c, d, point), max(c, d, point))
    verdict = judge_range(point, interval, predicted)
    assert (verdict == CONFIRMED) == (predicted[0] <= point <= predicted[1])
    reaches = interval[0] <= predicted[1] and predicted[0] <= interval[1]
    assert (verdict == REFUTED) == (not reaches)
    assert verdict != UNDECIDED or reaches


def test_a_figure_not_measured_is_never_judged():
    assert judge_range(None, None, (1.0, 1.2)) == UNMEASURED
    measured = Measured(efficiency=None, efficiency_ci=None, steady_mb=None, verdicts=[None])
    result = judge(Expectation(name="p", source="s", efficiency=(1.0, 1.2), vram_mb=100, fits=True), measured)
    assert result["parts"] == {"efficiency": UNMEASURED, "vram_mb": UNMEASURED, "fits": UNMEASURED}
    assert result["verdict"] == UNMEASURED


@given(st.lists(st.sampled_from([CONFIRMED, REFUTED, UNDECIDED, UNMEASURED]), min_size=1, max_size=4))
def test_one_refuted_figure_refutes_and_only_all_confirmed_confirms(parts):
    verdict = overall({str(i): p for i, p in enumerate(parts)})
    assert (verdict == REFUTED) == (REFUTED in parts)
    assert (verdict == CONFIRMED) == all(p == CONFIRMED for p in parts)


@given(values, values)
def test_time_saved_rises_with_the_efficiency_and_is_half_at_two(a, b):
    if a < b:
        assert time_saved(a) <= time_saved(b)
    assert time_saved(2.0) == pytest.approx(0.5) and time_saved(0.0) is None


def test_memory_within_the_tolerance_confirms_and_fits_needs_every_session():
    predicted = Expectation(name="p", source="s", vram_mb=1000, fits=True)
    near = Measured(efficiency=None, efficiency_ci=None, steady_mb=1000 * (1 + 0.99 * VRAM_TOLERANCE), verdicts=["fits", "fits"])
    assert judge(predicted, near)["parts"] == {"vram_mb": CONFIRMED, "fits": CONFIRMED}
    far = Measured(efficiency=None, efficiency_ci=None, steady_mb=2500, verdicts=["fits", "over budget"])
    assert judge(predicted, far)["parts"] == {"vram_mb": REFUTED, "fits": UNDECIDED}
    assert judge_fits(["over budget", "over budget"], True) == REFUTED
    assert judge_fits(["over budget"], False) == CONFIRMED


def _settings(expect):
    pair = {"group": "g1", "foreground": {"model": "mnist"}, "background": {"model": "resnet20"}, "expect": expect}
    return {"name": "t", "pairs": [pair]}


@pytest.mark.parametrize("expect, path, words", [
    ([{"name": "p", "source": "s", "efficiency": [1.2, 1.0]}], "$.pairs[0].expect[0].efficiency", "low <= high"),
    ([{"name": "p", "source": "s", "time_saved": [0.4, 1.5]}], "$.pairs[0].expect[0].time_saved[1]", "less than 1"),
    ([{"name": "p", "source": "s", "effciency": [1.0, 1.2]}], "$.pairs[0].expect[0].effciency", ""),
    ([{"name": "p"}], "$.pairs[0].expect[0].source", ""),
    ([], "$.pairs[0].expect", ""),
])
def test_a_wrong_expectation_is_refused_naming_its_json_path(expect, path, words):
    with pytest.raises(SettingsError) as caught:
        parse_experiment(json.loads(json.dumps(_settings(expect))), "s.json")
    line = str(caught.value)
    assert "s.json" in line and path in line and words in line and "\n" not in line


def test_the_predecessors_predictions_are_written_into_its_settings():
    from pathlib import Path

    from pytest_gpu_pairs.experiment.load import load_experiment

    root = Path(__file__).resolve().parents[3]
    experiment = load_experiment(root / "settings/predecessor_predictions.json")
    names = [e.name for p in experiment.pairs for e in p.expect or []]
    assert names == ["predicted pair 1", "predicted pair 2", "predicted pair 3", "stress test 2", "stress test 1",
                     "stress test 3"]
    three = [p for p in experiment.pairs if p.backgrounds]
    assert [len(p.job_refs()) for p in three] == [3]
