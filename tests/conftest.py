import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default"))

REPO = Path(__file__).resolve().parents[1]
SEED_PLACES = (REPO.parent / "shared" / "seed-data", REPO.parents[1] / "shared" / "seed-data")  # checkout, worktree
SEED = Path(os.environ.get("GPU_PAIRS_SEED_DATA") or next((p for p in SEED_PLACES if p.is_dir()), SEED_PLACES[0]))


@pytest.fixture
def seed_dir() -> Path:
    if not SEED.is_dir():
        pytest.skip(f"seed data not found at {SEED}")
    return SEED


def write_settings(path: Path, pairs, **top) -> Path:
    data = {"name": top.pop("name", "t"), "pairs": pairs, **top}
    path.write_text(json.dumps(data))
    return path


def pair(group="g01", fg="mnist_ff", bg="resnet20", fg_hp=None, bg_hp=None, **extra):
    return {"group": group, "foreground": {"model": fg, "hyperparameters": fg_hp or {"epochs": 1}},
            "background": {"model": bg, "hyperparameters": bg_hp or {"epochs": 1}}, **extra}


@pytest.fixture
def make_settings(tmp_path):
    def make(pairs=None, name="t", **top):
        return write_settings(tmp_path / f"{name}.json", pairs if pairs is not None else [pair()], name=name, **top)
    return make


def descendants_of_this_process() -> list[int]:
    import psutil
    return [p.pid for p in psutil.Process(os.getpid()).children(recursive=True)]


@pytest.fixture
def fake_mps_control(tmp_path_factory) -> Path:
    """An executable stand-in for nvidia-cuda-mps-control (tests/fake_mps_control.py)."""
    import sys

    path = tmp_path_factory.mktemp("fake-mps") / "nvidia-cuda-mps-control"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {REPO / 'tests' / 'fake_mps_control.py'} \"$@\"\n")
    path.chmod(0o755)
    return path
