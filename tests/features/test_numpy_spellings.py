"""NumPy spellings seen in ordinary user code, on traced arrays: after a per-element loop and
inside a collective loop's body, each gradient compared with central finite differences of the
same code run on NumPy arrays."""

import numpy as np
import pytest

import dloop as dl
from helpers import (after_per_element_loop, assert_close, finite_difference,
                     summed_collective_loop)

X = np.array([0.31, 0.72, 0.15, 0.56, 0.88, 0.43])
N = np.array([2, 0, 3, 1, 2, 4])
A = np.cos(np.arange(24.0)).reshape(4, 6)
GRID = np.linspace(0.0, 1.0, 6)

SPELLINGS = {
    "A @ x": lambda x: A @ x,
    "np.matmul(A, x)": lambda x: np.matmul(A, x),
    "np.linalg.norm": lambda x: np.linalg.norm(x) + np.linalg.norm(x, 1),
    "np.diff": lambda x: np.diff(x) + np.diff(x, n=2, prepend=0.5, append=0.1)[:5],
    "np.cumprod": np.cumprod,
    "np.sort": lambda x: np.sort(x) * np.arange(1.0, 7.0),
    "np.interp": lambda x: np.interp(np.array([0.05, 0.5, 0.93, 1.2]), GRID, x),
    "np.einsum": lambda x: np.einsum("ij,j->i", A, x) + np.einsum("i,i", x, x),
    "np.outer": lambda x: np.outer(x, x[:3]),
    "np.atleast_1d": lambda x: np.atleast_1d(x.sum()) * x,
    "np.hstack": lambda x: np.hstack([x, x * x]),
    "np.pad": lambda x: np.pad(x, (1, 2)) + np.pad(x, (2, 1), mode="edge"),
    "np.exp2": np.exp2,
    "np.fft.fft2 and kin": lambda x: np.fft.fft2(x.reshape(2, 3)).real.ravel() +
    np.fft.ifft2(x.reshape(1, 2, 3), s=(2, 4), norm="ortho").imag.ravel()[:6] +
    (np.fft.rfft2(x.reshape(3, 2), axes=(1, 0)).real ** 2).sum() +
    np.fft.irfft2(x.reshape(2, 3) * 1j)[:, :1].ravel().sum(),
    # A ufunc mapped by name onto xp.special (as scipy.special's ufuncs are without
    # SCIPY_ARRAY_API).
    "np.cbrt": lambda x: np.cbrt(x - 0.5),
    "np.heaviside": lambda x: np.heaviside(x - 0.5, 0.5) * x,
    "x.clip": lambda x: x.clip(0.2, 0.7),
    "x.std": lambda x: x.std() + x.std(ddof=1),
    "x.copy": lambda x: x.copy() * 2,
    "x.ravel": lambda x: x.reshape(2, 3).ravel() * x,
    "x.var": lambda x: x.var() + x.reshape(2, 3).var(axis=0, ddof=1) + np.var(x, correction=1),
    "reductions with axis/keepdims": lambda x: x.reshape(2, 3).std(0, keepdims=True) +
    x.reshape(2, 3).mean(1, np.float64, keepdims=True) + x.reshape(3, 2).max(1) +
    x.reshape(2, 3).min(axis=(0, 1), keepdims=True) + x.reshape(2, 3).prod(0) +
    x.reshape(3, 2).sum(axis=1, keepdims=True)[1:],
    # Integer arrays and traced integers (an argmax) mixed with slices, NumPy's layout.
    "x[int array, slice]": lambda x: x.reshape(2, 3)[np.array([1, 0, 1]), 1:],
    "x[slice, int array]": lambda x: x.reshape(2, 3)[:, np.array([[2], [-1]])],
    "x[int, slice, int array]": lambda x: x.reshape(3, 2, 1)[1, :, np.array([0, 0])],
    "x[traced int, slice]": lambda x: x.reshape(3, 2)[np.argmax(x) % 3, ::-1],
    "x[slice, traced int]": lambda x: x.reshape(2, 3)[:, np.argmax(x) % 3] * x[:2],
}
WEIGHTS = np.cos(np.arange(20.0) + 0.5)


def _loss(y):
    y = np.reshape(y, (-1,))
    return (y * WEIGHTS[:y.shape[0]]).sum()


def _per_element(fn, x, traced):
    return _loss(fn(after_per_element_loop(N, x, traced)))


def _collective(fn, x, traced):
    return summed_collective_loop(lambda i, v: v * 0.99 + 0.01 * _loss(fn(v)), x, traced)


@pytest.mark.parametrize("program", [_per_element, _collective])
@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spelling_gradient(name, program):
    fn = SPELLINGS[name]
    got = dl.grad(lambda x: program(fn, x, True))(X)
    expected = finite_difference(lambda x: program(fn, x, False), X)
    assert_close(got, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["np.exp2", "np.heaviside", "x.clip"])
def test_elementwise_spelling_inside_per_element_body(backend, name):
    fn = SPELLINGS[name]

    def run(x, traced):
        body = lambda i, v: 0.5 * v + 0.3 * fn(v)  # noqa: E731
        if traced:
            return dl.fori_loop(0, N, body, x).sum()
        y = x.copy()
        for j in range(y.size):
            for i in range(N[j]):
                y[j:j + 1] = body(i, y[j:j + 1])
        return y.sum()

    got = dl.grad(lambda x: run(x, True))(X)
    assert_close(got, finite_difference(lambda x: run(x, False), X), rtol=1e-6, atol=1e-9)


def test_sort_method_sorts_in_place():
    def f(x):
        y = x * 1.0
        y.sort()
        return y
    np.testing.assert_array_equal(dl.jit(f)(X), np.sort(X))


@pytest.mark.parametrize("fn, cls, phrase", [
    (lambda x: x.sum(out=np.zeros(())), dl.DloopNotImplementedError, r"sum\(out=\.\.\.\)"),
    (lambda x: np.var(x, ddof=1, correction=1), dl.DloopValueError, "not both"),
    (lambda x: np.linalg.lstsq(x.reshape(2, 3), x[:2])[0], dl.DloopNotImplementedError,
     r"np\.linalg\.lstsq is not"),
])
def test_unsupported_reduction_arguments_name_the_line(fn, cls, phrase):
    with pytest.raises(cls, match=rf"(?s){phrase}.*test_numpy_spellings.py"):
        dl.grad(lambda x: fn(x))(X)
