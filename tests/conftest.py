"""Fixtures shared by every level of the plugin's own tests (unit/, integration/, e2e/).

Helpers that are not fixtures live in tests/support/ and are imported as ``support.<module>``.
"""
import os
import sys
from pathlib import Path

import pytest
from support.helpers import (  # noqa: F401 (re-exported)
    FAKE_MPS_CONTROL,
    PREDECESSOR_DATA,
    REPO,
    WITHOUT_HYPOTHESIS,
    XDIST_WORKER_VARS,
    pair,
    write_settings,
)

pytest_plugins = ["pytester"]

SEED = PREDECESSOR_DATA  # the predecessor's seed files, kept in the repository (tests/data/predecessor)
LEVELS = ("unit", "integration", "e2e")


def pytest_configure(config):
    """One intra-op thread for every torch process of the suite (unless the environment names a
    number), then Hypothesis's profiles.

    CI runs two xdist workers on two cores, and a pair of built-in jobs trains two processes at a
    time: with torch's default of a thread per core, threads wait at every operator's barrier for a
    thread kept off the CPU, spinning on the cores the other processes need (two reference studies
    beside a two-thread training process: 57 s with the default, 33 s with one thread, and the
    other process trained faster). Set before torch is imported (in a test module or a job)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _hypothesis_profiles()


def _hypothesis_profiles():
    """Hypothesis's profiles, loaded when a test session starts and not when this file is imported:
    pytest-benchmark's ``compare`` command reads the repository's pytest configuration, conftests
    included, in an environment of the README's install, which has no Hypothesis."""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    settings.register_profile("thorough", max_examples=2000, deadline=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default"))


def pytest_collection_modifyitems(items):
    """Run the levels in order, unit first, whatever order the paths were given in: fast failures
    come first. Under pytest-xdist's worksteal (CI runs ``-n 4 --dist worksteal``) each worker starts
    on a stretch of this order, but one that runs dry steals from the end of another's, so a worker
    can run integration tests after e2e tests; the tests that count pytest's child processes
    therefore leave out multiprocessing's resource tracker, which an e2e test that trains in-process
    starts and which lives on (``support.helpers.children_of_this_process``).
    """
    tests = Path(__file__).parent

    def level(item) -> int:
        try:
            return LEVELS.index(item.path.relative_to(tests).parts[0])
        except (ValueError, IndexError):
            return len(LEVELS)

    items.sort(key=level)  # stable: the order within a level stays pytest's


FAILED_CALL = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED_CALL] = True
    return report


@pytest.fixture(autouse=True)
def no_job_outlives_a_failed_test(request):
    """A test that fails before it stops the jobs it started leaves them in the worker's registry,
    and every later test of that worker that counts live jobs would fail too: one fault reported
    once. A passing test's jobs are its own to end (the tests that count them say so)."""
    yield
    if request.node.stash.get(FAILED_CALL, False):
        from pytest_gpu_pairs.run.jobs import kill_all_jobs

        kill_all_jobs(grace_s=0.5)


@pytest.fixture
def standalone_pytest(monkeypatch):
    """The environment of the pytest sessions a test starts: a user's own pytest run, whether or not
    this suite runs under pytest-xdist (pytest-benchmark turns itself off where it sees a worker's
    variables), and without Hypothesis's plugin, which imports all of Hypothesis at each session's
    end (over a second per session on the CI machine; no session a test starts uses Hypothesis)."""
    for name in XDIST_WORKER_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} {WITHOUT_HYPOTHESIS}".strip())


@pytest.fixture
def pytester(pytester, standalone_pytest):
    """pytester, its sessions started in the environment of ``standalone_pytest``."""
    return pytester


@pytest.fixture
def seed_dir() -> Path:
    """The predecessor's seed data: raw_data.csv, models_config.json and two of its experiment files."""
    return SEED


@pytest.fixture
def make_settings(tmp_path):
    def make(pairs=None, name="t", **top):
        return write_settings(tmp_path / f"{name}.json", pairs if pairs is not None else [pair()], name=name, **top)
    return make


@pytest.fixture
def fake_mps_control(tmp_path_factory) -> Path:
    """An executable stand-in for nvidia-cuda-mps-control (tests/support/fake_mps_control.py)."""
    path = tmp_path_factory.mktemp("fake-mps") / "nvidia-cuda-mps-control"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_MPS_CONTROL} \"$@\"\n")
    path.chmod(0o755)
    return path
