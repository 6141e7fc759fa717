"""Spellings and empty shapes once wrong or crashing under dloop.grad: values against NumPy,
gradients against central differences."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close


def _weighted(f, shape):
    w = np.cos(np.arange(int(np.prod(shape))) + 0.3).reshape(shape)
    return lambda a: (f(a) * w).sum()


def _central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("spelling", [
    lambda a: np.ravel(a, order="F"), lambda a: a.ravel("F"), lambda a: a.flatten(order="F"),
    lambda a: np.reshape(a, (3, 2), order="F"), lambda a: a.reshape(3, 2, order="F"),
    lambda a: np.reshape(a, (-1, 2), order="F"), lambda a: np.ravel(a.T, order="C"),
])
def test_fortran_order_reshapes(backend, spelling):
    """np.ravel / np.reshape / flatten with order='F' ignored the order: C-order values, and
    gradients scattered back to the wrong elements."""
    a = np.arange(6.0).reshape(2, 3) + 1.0
    out = dl.jit(spelling)(a)
    np.testing.assert_array_equal(out, spelling(a))
    loss = _weighted(spelling, np.shape(spelling(a)))
    assert_close(dl.grad(loss)(a), _central(loss, a), rtol=1e-8)


def test_fortran_order_views_write_their_base(backend):
    def f(a):
        b = a * 1.0
        np.ravel(b.T, order="F")[1] = 100.0     # b.T is F-contiguous: a view of b
        np.reshape(b, (3, 2), order="F")[0, 0] = -7.0    # a copy: b keeps its value
        return b
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(dl.jit(f)(a), f(a.copy()))


def test_memory_order_is_refused(backend):
    with pytest.raises(dl.DloopNotImplementedError, match="order='K'"):
        dl.jit(lambda a: np.ravel(a, order="K"))(np.ones((2, 3)))


@pytest.mark.parametrize("shape, axis", [((0,), None), ((2, 0), 1), ((0, 3), 0)])
def test_gradient_of_an_empty_product(backend, shape, axis):
    """prod's VJP built [1] + x[:-1], one element too long for an empty x: a NumPy
    ValueError from the host step."""
    g = dl.grad(lambda a: np.prod(a, axis=axis).sum())(np.zeros(shape))
    assert g.shape == shape and g.dtype == np.float64


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_determinant_of_empty_matrices(backend, shape):
    """det of a 0 x 0 matrix is 1 (NumPy); dloop's cofactor expansion indexed row 0."""
    x = np.zeros(shape)
    np.testing.assert_array_equal(dl.jit(np.linalg.det)(x), np.linalg.det(x))
    assert dl.grad(lambda a: np.linalg.det(a).sum())(x).shape == shape


def test_dot_with_a_scalar_and_take_along_axis_over_the_flat_array(backend):
    a = np.random.default_rng(0).normal(size=(3, 4))
    for f in (lambda a: np.dot(a, 2.0), lambda a: np.dot(a[0, 0], a),
              lambda a: np.take_along_axis(a, np.array([11, 0, 0, 5]), axis=None)):
        np.testing.assert_array_equal(dl.jit(f)(a), f(a))
        loss = _weighted(f, np.shape(f(a)))
        assert_close(dl.grad(loss)(a), _central(loss, a), rtol=1e-8)


def test_dot_with_a_python_number_promotes_as_numpy_s():
    """np.dot makes a Python number an array: np.dot(float32, 2.0) is float64 and
    np.dot(int32, 2) int64 in NumPy (a weak scalar kept them float32 and int32)."""
    for f, a in ((lambda a: np.dot(a, 2.0), np.ones(3, np.float32)),
                 (lambda a: np.dot(2.0, a), np.ones(3, np.float32)),
                 (lambda a: np.dot(a, 2), np.ones(3, np.int32))):
        got, want = dl.jit(f)(a), f(a)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
