"""Adstack sizing split over threads (adstack/parallel.py) gives what the one-thread NumPy
computation gives, and gradients sized that way are exact."""

import numpy as np
import pytest

import dloop as dl
from dloop.adstack import parallel
from dloop.runtime.execute import work_order


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_CHUNK", 1000)      # several parts on small arrays
    with dl.config.override(num_threads=4):
        yield


@pytest.mark.parametrize("n", [0, 1, 999, 4001, 12345])
def test_scan_gather_scatter_match_numpy(n):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 1000, n)
    expected = np.zeros(n, np.int64)
    if n:
        np.cumsum(values[:-1], out=expected[1:])
    np.testing.assert_array_equal(parallel.exclusive_cumsum(values), expected)
    perm = rng.permutation(n)
    np.testing.assert_array_equal(parallel.take(values, perm), values[perm])
    out = np.full(n, -1, np.int64)
    parallel.scatter(out, perm, values)
    expected = np.empty(n, np.int64)
    expected[perm] = values
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("n", [0, 1, 999, 4001, 12345])
def test_work_order_is_a_permutation_sorted_within_each_part(n):
    rng = np.random.default_rng(n)
    work = rng.integers(0, 5000, n)
    order = work_order(work)
    np.testing.assert_array_equal(np.sort(order), np.arange(n))
    key = 255 - work // (int(work.max(initial=0)) // 255 + 1)
    for lo, hi in parallel.parts(n):
        part = order[lo:hi]
        assert np.all((part >= lo) & (part < hi))
        assert np.all(np.diff(key[part]) >= 0)            # longest work first


def test_gradient_sized_in_parts_is_exact():
    rng = np.random.default_rng(0)
    n_elems = 20_000
    trips = rng.integers(0, 30, n_elems)
    x = rng.random(n_elems)
    g = dl.grad(lambda x: dl.fori_loop(0, trips, lambda i, v: v * 0.9, x).sum())(x)
    np.testing.assert_allclose(g, 0.9 ** trips, rtol=1e-13)
