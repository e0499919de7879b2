"""``pytest_gpu_pairs.progress``, the three calls a script makes: a no-op outside the harness, the
progress protocol inside it, read back by the harness's own reader."""
import importlib
import json

import pytest

from pytest_gpu_pairs import progress as progress_api
from pytest_gpu_pairs.protocol import ENV_VAR, Progress


@pytest.fixture
def api(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    yield importlib.reload(progress_api)
    importlib.reload(progress_api)


def test_outside_the_harness_every_call_does_nothing(api, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    api.ready()
    for n in range(1, 5):
        api.step(n, epoch=n / 4)
    api.result({"accuracy": 0.9})
    assert not api.active() and list(tmp_path.iterdir()) == []


def test_inside_the_harness_the_calls_are_the_protocol(api, tmp_path, monkeypatch):
    path = tmp_path / "fg.progress.jsonl"
    monkeypatch.setenv(ENV_VAR, str(path))
    assert api.active()
    api.step()  # the first step makes the script ready
    for _ in range(9):
        api.step()
    api.result({"accuracy": 0.75})
    read = Progress.read(path)
    assert read.ready_t is not None and read.total_steps == 10
    assert read.result["metrics"] == {"accuracy": 0.75} and read.result["steps"] == 10
    events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    assert events[0] == "ready" and events.count("ready") == 1 and events[-2:] == ["step", "result"]


def test_explicit_step_counts_and_epochs_are_written_as_given(api, tmp_path, monkeypatch):
    path = tmp_path / "bg.progress.jsonl"
    monkeypatch.setenv(ENV_VAR, str(path))
    api.ready()
    api.step(120, epoch=0.5)
    api.result({"loss": 1.5}, steps=240)
    last_step = [json.loads(line) for line in path.read_text().splitlines()][-2]
    assert last_step["step"] == 240 and last_step["epoch"] == 0.5


@pytest.mark.parametrize("bad", [{"epoch": float("nan")}, {"epoch": float("inf")}, {"n": float("nan")},
                                 {"n": -1}, {"n": 10**400}, {"n": 2**53 + 1}, {"epoch": "x"}],
                         ids=["epoch NaN", "epoch Infinity", "step NaN", "step -1", "step of 400 digits",
                              "step past 2**53", "epoch text"])
def test_a_value_the_harness_cannot_read_is_refused_at_the_call_and_changes_nothing(api, tmp_path, monkeypatch, bad):
    path = tmp_path / "fg.progress.jsonl"
    monkeypatch.setenv(ENV_VAR, str(path))
    api.step(5, epoch=0.5)
    with pytest.raises(ValueError, match="^progress: expected '?(epoch|step|the step)'? to be"):
        api.step(**bad)
    api.step()  # plain steps go on from the last valid one
    api.result({"accuracy": 0.5})
    read = Progress.read(path)
    assert read.bad_lines == 0 and read.total_steps == 6
    assert all(json.loads(line).get("epoch") in (None, 0.5) for line in path.read_text().splitlines())
