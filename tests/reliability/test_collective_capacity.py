"""A fixed adstack_capacity applies to per-element loops only (docs/errors.md): a collective
loop longer than it still gives the exact gradient, and a per-element loop longer than it
raises AdstackOverflowError."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference

X = np.linspace(0.1, 1.0, 4)


def collective(x):
    return dl.fori_loop(0, 5, lambda i, v: v * 1.5 - 0.01 * v.sum(), x).sum()


def test_fixed_capacity_does_not_limit_collective_loops(backend):
    with dl.config.override(adstack_capacity=2):
        g = dl.grad(collective)(X)
    assert_close(g, finite_difference(lambda x: float(collective(x)), X), rtol=1e-7)


def test_fixed_capacity_limits_per_element_loops(backend):
    with dl.config.override(adstack_capacity=2):
        with pytest.raises(dl.AdstackOverflowError):
            dl.grad(lambda x: dl.fori_loop(0, np.full(4, 5), lambda i, v: v * 1.5, x).sum())(X)
    g = dl.grad(lambda x: dl.fori_loop(0, np.full(4, 5), lambda i, v: v * 1.5, x).sum())(X)
    np.testing.assert_allclose(g, np.full(4, 1.5 ** 5))
