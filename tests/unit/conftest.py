"""The unit tests plan for the H100 unless a test names the card: a suite run on a GPU machine
reads the same as on the CPU, where NVML sees no GPU."""
import pytest


@pytest.fixture(autouse=True)
def no_gpu_here(monkeypatch):
    monkeypatch.setattr("pytest_gpu_pairs.planning.cards.gpu_here", lambda: None)
