"""while_loop(max_steps=k): an element that would never stop returns after k iterations,
and the gradient is that of the truncated loop (checked against finite differences)."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference

X = np.array([0.5, 2.0, 1.0, 3.0, 40.0])


def stuck_at_one(v):
    """Halves v, except that v == 1 stays 1 forever (so cond v > 0.9 never fails)."""
    return np.where(v == 1.0, v, v * 0.5)


def reference(x, max_steps):
    out = []
    for v in x:
        k = 0
        while v > 0.9 and k < max_steps:
            v, k = (v if v == 1.0 else v * 0.5), k + 1
        out.append(v)
    return np.array(out)


@pytest.mark.parametrize("max_steps", [0, 1, 4, 50])
def test_per_element_truncation(backend, max_steps):
    got = dl.jit(lambda x: dl.while_loop(lambda v: v > 0.9, stuck_at_one, x,
                                         max_steps=max_steps))(X)
    np.testing.assert_array_equal(got, reference(X, max_steps))


def test_per_element_gradient_of_the_truncated_loop(backend):
    def loss(x):
        v = dl.while_loop(lambda v: v > 0.9, lambda v: v * 0.5 + 0.3 * np.sin(x), x,
                          max_steps=3)
        return (v * v).sum()
    x = np.array([0.5, 2.0, 5.0, 50.0, 400.0])
    g = dl.grad(loss)(x)
    assert_close(g, finite_difference(lambda x: float(loss(x)), x), rtol=1e-6)


def test_collective_truncation_and_gradient(backend):
    def loss(x):
        v = dl.while_loop(lambda v: (v * v).sum() > 1e-3, lambda v: v * 0.5 + 0.01 * v.mean(),
                          x, max_steps=2)
        return (v * x).sum()
    x = np.array([0.4, 1.5, 2.0])
    g = dl.grad(loss)(x)
    assert_close(g, finite_difference(lambda x: float(loss(x)), x), rtol=1e-6)
    out = dl.while_loop(lambda v: (v * v).sum() > 1e-3, lambda v: v * 0.5, x, max_steps=2)
    np.testing.assert_allclose(out, x * 0.25)


def test_eager_call_with_max_steps(backend):
    out = dl.while_loop(lambda v: v > 0.9, stuck_at_one, X, max_steps=6)
    np.testing.assert_array_equal(out, reference(X, 6))
