"""A launch's sizing kept from the last call (runtime/sizing_memo.py): reused only while the
arrays it read hold the same values; trip counts changed in place, or a changed setting,
size anew. Gradients against the closed form a**n of sum(fori_loop(0, n, v * a, x))."""

import numpy as np
import pytest

import dloop as dl
from dloop.runtime import sizing_memo


@pytest.fixture
def lookups(monkeypatch):
    """Whether each sizing lookup found the last call's sizing."""
    found = []
    real = sizing_memo.lookup
    monkeypatch.setattr(sizing_memo, "lookup",
                        lambda *a: found.append(bool(hit := real(*a))) or hit)
    return found


def _grad(n, a=0.9):
    return dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: v * a, x).sum())


def test_same_trip_counts_reuse_changed_ones_size_anew(backend, lookups):
    n = np.arange(3000) % 37
    x = np.linspace(0.5, 1.5, 3000)
    g = _grad(n)
    for _ in range(2):
        np.testing.assert_allclose(g(x), 0.9 ** n, rtol=1e-13)
    n[::3] = 40 - n[::3]                     # in place: the same array, other values
    np.testing.assert_allclose(g(x), 0.9 ** n, rtol=1e-13)
    n[:] = n[::-1].copy()
    np.testing.assert_allclose(g(x), 0.9 ** n, rtol=1e-13)
    assert lookups == [False, True, False, False]


def test_a_new_array_of_the_same_values_reuses(backend, lookups):
    x = np.linspace(0.5, 1.5, 500)
    for k in range(3):
        n = np.arange(500) % 11                  # a new array each call
        np.testing.assert_allclose(_grad(n, 0.8)(x), 0.8 ** n, rtol=1e-13)
    assert lookups == [False, True, True]


def test_a_changed_limit_sizes_anew(backend, lookups):
    n = np.arange(400) % 9
    x = np.ones(400)
    g = _grad(n, 0.7)
    g(x)
    with dl.config.override(max_adstack_bytes=100):
        with pytest.raises(dl.DloopMemoryError):
            g(x)
    np.testing.assert_allclose(g(x), 0.7 ** n, rtol=1e-13)
    assert lookups == [False, False, True]      # the limit is part of the key


def test_counted_loops_are_not_kept(backend, lookups):
    """A while loop's trips are counted (or guessed) per call: nothing to compare with."""
    a = np.linspace(1.0, 3.0, 300)
    g = dl.grad(lambda a: dl.while_loop(lambda v: v < a, lambda v: v * 1.5, a * 0 + 0.1).sum())
    for _ in range(2):
        got = g(a)
    steps = np.ceil(np.log(a / 0.1) / np.log(1.5))
    np.testing.assert_allclose(got, np.zeros_like(a), atol=0)
    assert steps.min() > 0 and lookups == []
