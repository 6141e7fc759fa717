"""x[idx] = v on traced arrays: the tracer is rebound to the updated value, gradients flow to
both the untouched part of x and to v; zeros_like/full_like/zeros give updatable arrays."""

import numpy as np
import pytest

import dloop as dl
from helpers import (after_per_element_loop, assert_close, finite_difference,
                     summed_collective_loop)

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


# Integer-array and traced-integer keys, mixed with slices. Repeated indices: the last write
# wins, as in NumPy's assignment, and only it gets a gradient. `_k(x)` is a traced integer
# (an argmax) where x is traced, the same integer on NumPy.
def _k(x):
    return _numpy_xp(x).argmax(x) % 2


SCATTERS = {
    "int array, repeated": lambda x: _set(x * 1.0, np.array([0, 4, 0, -1]), x[2:] ** 2),
    "int array and slice": lambda x: _set(x.reshape(2, 3) * 1.0, (np.array([1, 0, 1]),
                                                                  slice(1, None)),
                                          x[:2] * 3.0),
    "slice and int array": lambda x: _set(x.reshape(2, 3) * 1.0, (slice(None),
                                                                  np.array([2, -1])),
                                          x[:2].reshape(2, 1) * x[4]),
    "traced int and slice": lambda x: _set(x.reshape(2, 3) * 1.0, (_k(x), slice(0, 2)), x[3:5]),
    "traced int array": lambda x: _set(x * 1.0, _numpy_xp(x).stack([_k(x), _k(x) + 2, _k(x)]),
                                       x[3:] * 2.0),
}


def _loss(y):
    return (y.reshape(-1) * W).sum()


def _per_element(fn, x, traced):
    return _loss(fn(after_per_element_loop(np.array([2, 0, 3, 1, 2, 4]), x, traced)))


def _collective(fn, x, traced):
    return summed_collective_loop(lambda i, v: v * 0.99 + 0.01 * _loss(fn(v)) * v, x, traced)


@pytest.mark.parametrize("program", [_per_element, _collective])
@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_scatter_value_and_gradient(name, program):
    fn = SCATTERS[name]
    got = dl.jit(lambda x: program(fn, x, True))(X)
    np.testing.assert_allclose(got, program(fn, X.copy(), False), rtol=1e-12)
    grad = dl.grad(lambda x: program(fn, x, True))(X)
    assert_close(grad, finite_difference(lambda x: program(fn, x, False), X), rtol=1e-6,
                 atol=1e-9)


def test_row_of_matrix_by_loop_counter_in_collective_loop():
    """A[i, 1:3] read and written with i the loop counter; A[:, i] likewise."""
    def body(i, a):
        a = a * 1.0
        a[i, 1:3] = a[i + 1, 2:4] * 0.5 + np.sin(a[i, 1:3])
        a[:, i] = a[:, i] * a[i, 0]
        return a

    def run(x, traced):
        a = np.cos(np.arange(24.0)).reshape(4, 6) * x
        if traced:
            a = dl.fori_loop(0, 3, body, a)
        else:
            for i in range(3):
                a = body(i, a)
        return (a * np.sin(np.arange(24.0)).reshape(4, 6)).sum()

    assert_close(dl.grad(lambda x: run(x, True))(X), finite_difference(
        lambda x: run(x, False), X), rtol=1e-7, atol=1e-9)


def test_index_out_of_range_names_the_line():
    def fn(x):
        y = x * 1.0
        y[np.array([1, 6])] = 1.0  # static
        return y
    with pytest.raises(dl.DloopIndexError, match=r"(?s)out of bounds.*test_inplace.py"):
        dl.jit(fn)(X)


def test_traced_index_out_of_range_names_the_line():
    def fn(x):
        y = x * 1.0
        y[dl.fori_loop(0, 2, lambda i, k: k + 3, np.int64(0)), None] = 1.0  # traced
        return y
    with pytest.raises(dl.DloopIndexError, match=r"(?s)out of bounds.*test_inplace.py:\d+"):
        dl.jit(fn)(X)
    with pytest.raises(dl.DloopIndexError) as info:
        dl.jit(fn)(X)
    assert str(info.value).count("test_inplace.py") == 1


def test_mask_update_with_array_value_names_the_line():
    def fn(x):
        y = x * 1.0
        y[x > 0] = x[:3]
        return y
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)True count.*test_inplace.py"):
        dl.jit(fn)(X)


@pytest.mark.parametrize("key, cls, phrase", [
    ((0, np.array([1]), 2), dl.DloopIndexError, "too many indices"),
    ((np.array([1]), "a"), dl.DloopTypeError, "unsupported index"),
])
def test_bad_array_key_names_the_line(key, cls, phrase):
    def fn(x):
        return x.reshape(2, 3)[key]  # bad key
    with pytest.raises(cls, match=rf"(?s){phrase}.*test_inplace.py"):
        dl.jit(fn)(X)
