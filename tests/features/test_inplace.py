"""x[idx] = v on traced arrays: the tracer is rebound to the updated value, gradients flow to
both the untouched part of x and to v; zeros_like/full_like/zeros give updatable arrays."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference

X = np.array([0.3, -1.2, 2.1, 0.7, -0.4, 1.5])
W = np.cos(np.arange(6.0) + 0.5)


def _numpy_xp(x):
    return np if isinstance(x, np.ndarray) else x.__array_namespace__()


UPDATES = {
    "slice": lambda x, xp: _set(x * 1.0, slice(1, 4), x[:3] ** 2),
    "step": lambda x, xp: _set(x * 1.0, slice(None, None, 2), 0.5),
    "integer": lambda x, xp: _set(x * 1.0, 2, x[0] * x[1]),
    "mask": lambda x, xp: _set(x * 1.0, x > 0.5, 0.0),
    "traced mask, traced value": lambda x, xp: _set(x * 1.0, x < 0, xp.sum(x)),
    "zeros then fill": lambda x, xp: _set(xp.zeros(6), slice(1, None), x[:-1] * 2),
    "zeros_like then fill": lambda x, xp: _set(xp.zeros_like(x), slice(None, 3), xp.sin(x[3:])),
    "full_like, 2-d": lambda x, xp: xp.reshape(_set(xp.full_like(xp.reshape(x, (2, 3)), 1.5),
                                                    (slice(None), 1), x[:2]), (6,)),
}


def _set(y, key, value):
    y[key] = value
    return y


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_update_value_and_gradient(name):
    update = UPDATES[name]
    got = dl.jit(lambda x: update(x, _numpy_xp(x)))(X)
    np.testing.assert_allclose(got, update(X.copy(), np))
    grad = dl.grad(lambda x: (update(x, _numpy_xp(x)) * W).sum())(X)
    expected = finite_difference(lambda x: (update(x.copy(), np) * W).sum(), X)
    assert_close(grad, expected, rtol=1e-7, atol=1e-9)


def test_copy_is_not_rebound():
    def fn(x):
        xp = x.__array_namespace__()
        y = xp.asarray(x, copy=True)
        y[0] = 5.0
        return x + 0 * y
    np.testing.assert_array_equal(dl.jit(fn)(X), X)


def test_update_inside_collective_loop():
    def step(i, v):
        v = v * 1.0
        v[1:] = v[:-1] * 0.5 + v[1:] * 0.5
        return v

    def run(x, traced):
        if traced:
            return (dl.fori_loop(0, 3, step, x) * W).sum()
        for i in range(3):
            x = step(i, x.copy())
        return (x * W).sum()

    assert_close(dl.grad(lambda x: run(x, True))(X), finite_difference(
        lambda x: run(x, False), X), rtol=1e-7, atol=1e-9)


def test_integer_array_index_update_names_the_line():
    def fn(x):
        y = x * 1.0
        y[np.array([0, 2])] = 1.0
        return y
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)xp.where.*test_inplace.py"):
        dl.jit(fn)(X)


def test_mask_update_with_array_value_names_the_line():
    def fn(x):
        y = x * 1.0
        y[x > 0] = x[:3]
        return y
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)True count.*test_inplace.py"):
        dl.jit(fn)(X)
