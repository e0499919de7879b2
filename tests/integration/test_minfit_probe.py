"""The min-fit GPU probe on real processes: command workloads claim memory of a shared fake pool
that a stand-in ballast fills above the emulated card, so bisection must find the memory they
claim, an OOM or a crash is no fit, a training shorter than the probe judges nothing, and no process
is left running."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.helpers import FAKE_JOB, jobs_started_under

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.experiment.schema import CommandWorkload
from pytest_gpu_pairs.run.minfit import bisect_min_fit, probe_fits

CAPACITY_MB = 16_384


class PoolBallast:
    """Emulates a card on the fake jobs' shared memory pool: holds what lies above ``card_mb``."""

    def __init__(self, pool: Path, card_mb: int):
        self.claim, self.held = pool / f"{os.getpid()}.mb", CAPACITY_MB - card_mb

    def __enter__(self):
        self.claim.parent.mkdir(parents=True, exist_ok=True)
        self.claim.write_text(str(max(0, self.held)))
        return self

    def __exit__(self, *exc):
        self.claim.unlink(missing_ok=True)


@pytest.fixture
def pool(tmp_path, monkeypatch):
    folder = tmp_path / "pool"
    monkeypatch.setattr("pytest_gpu_pairs.run.ballast.Ballast",
                        lambda card_mb, gpu, work_dir: PoolBallast(folder, card_mb))
    return folder


def fake_jobs(pool, *mems, fault="none", steps=400):
    """Command workloads that claim ``mem`` MB of the pool, print PyTorch's OOM when it is full,
    and report steps through the progress protocol."""
    return [JobConfig(f"fake{index}", (), CommandWorkload(command=[
        sys.executable, str(FAKE_JOB), "--protocol", "--steps", str(steps), "--step-s", "0.01", "--pool", str(pool),
        "--mem-mb", str(mem), "--capacity-mb", str(CAPACITY_MB), "--fault", fault])) for index, mem in enumerate(mems)]


def test_the_gpu_probe_bisected_on_real_processes_finds_the_jobs_memory(tmp_path, pool):
    jobs = fake_jobs(pool, 3000)
    outcomes = []

    def fits(card_mb):
        outcomes.append(probe_fits(jobs, card_mb, gpu=None, work_dir=tmp_path / "probes", timeout_s=60))
        return outcomes[-1].fits

    found = bisect_min_fit(fits, 256, CAPACITY_MB, hint_mb=2000)
    assert found.no_fit_mb < 3000 <= found.fit_mb <= 3000 + 256
    refused = [o for o in outcomes if not o.fits]
    assert refused and all("ran out of memory" in o.reason for o in refused)
    assert jobs_started_under(tmp_path) == []


def test_a_pair_that_fits_reaches_steady_state_and_a_crash_is_no_fit_and_nothing_is_left(tmp_path, pool):
    both = probe_fits(fake_jobs(pool, 1000, 2000), 8000, gpu=None, work_dir=tmp_path / "pair", timeout_s=60)
    assert both.fits and "every job reached 5 steps" in both.reason and len(both.jobs) == 2
    crashed = probe_fits(fake_jobs(pool, 1000, fault="crash"), 8000, gpu=None, work_dir=tmp_path / "crash",
                         timeout_s=60)
    assert not crashed.fits and "exited with code 1" in crashed.reason
    assert jobs_started_under(tmp_path) == []


def test_a_job_that_finishes_before_its_steady_state_is_inconclusive_not_a_no_fit(tmp_path, pool):
    short = probe_fits(fake_jobs(pool, 1000, steps=2), 8000, gpu=None, work_dir=tmp_path / "short", timeout_s=60)
    assert not short.conclusive and not short.fits and "finished its training" in short.reason
    assert short.as_dict()["conclusive"] is False
    steady = probe_fits(fake_jobs(pool, 1000), 8000, gpu=None, work_dir=tmp_path / "steady", timeout_s=60)
    assert steady.conclusive and steady.fits
    assert jobs_started_under(tmp_path) == []
