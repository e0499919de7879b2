"""The min-fit bisection: for any monotone probe it returns a size that fits with one that did not
within the resolution below it, never probes outside the bounds, and a peak hint saves probes."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.run.minfit import bisect_min_fit

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
