"""The min-fit bisection: for any monotone probe it returns a size that fits with one that did not
within the resolution below it, never probes outside the bounds, and a peak hint saves probes; the
GPU probe, run on real processes over a fake memory pool, bisects to the memory they claim."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.helpers import FAKE_JOB, jobs_started_under

from pytest_gpu_pairs.experiment.cases import JobConfig
from pytest_gpu_pairs.experiment.schema import CommandWorkload
from pytest_gpu_pairs.run.minfit import bisect_min_fit, probe_fits

LOW, HIGH = 256, 81_920


def threshold_probe(need_mb):
    seen = []

    def fits(size):
        seen.append(size)
        return size >= need_mb
    return fits, seen


@given(st.integers(1, 100_000), st.one_of(st.none(), st.integers(1, 100_000)), st.sampled_from([64, 256, 1000]))
def test_the_answer_fits_and_the_resolution_below_it_did_not(need, hint, resolution):
    fits, seen = threshold_probe(need)
    found = bisect_min_fit(fits, LOW, HIGH, hint, resolution)
    assert all(LOW <= size <= HIGH for size in seen)
    assert [size for size, _ in found.probes] == seen
    if need > HIGH:
        assert found.fit_mb is None and found.no_fit_mb == HIGH
        return
    assert found.fit_mb >= need and fits(found.fit_mb)
    if need <= LOW:
        assert found.fit_mb == LOW or found.fit_mb - found.no_fit_mb <= resolution
    else:
        assert found.no_fit_mb < need <= found.fit_mb and found.fit_mb - found.no_fit_mb <= resolution
        assert found.fit_mb - need < resolution


@given(st.integers(LOW + 1, HIGH))
def test_a_hint_at_the_measured_peak_needs_few_probes(need):
    fits, seen = threshold_probe(need)
    bisect_min_fit(fits, LOW, HIGH, hint_mb=need + 100)
    # the hint fits, half of it does not, then bisection of that half down to 256 MB
    assert len(seen) <= 2 + math.ceil(math.log2((need + 100) / 2 / 256))


def test_every_answer_is_a_probed_size_and_probes_are_not_repeated():
    fits, seen = threshold_probe(5_000)
    found = bisect_min_fit(fits, LOW, HIGH, hint_mb=9_000)
    assert (found.fit_mb, True) in found.probes and (found.no_fit_mb, False) in found.probes
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("low, high, resolution", [(0, 10, 256), (10, 5, 256), (10, 20, 0)])
def test_bad_bounds_are_refused(low, high, resolution):
    with pytest.raises(ValueError):
        bisect_min_fit(lambda size: True, low, high, None, resolution)


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


def fake_jobs(pool, *mems, fault="none"):
    """Command workloads that claim ``mem`` MB of the pool, print PyTorch's OOM when it is full,
    and report steps through the progress protocol."""
    return [JobConfig(f"fake{index}", (), CommandWorkload(command=[
        sys.executable, str(FAKE_JOB), "--protocol", "--steps", "400", "--step-s", "0.01", "--pool", str(pool),
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
