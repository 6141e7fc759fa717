"""xp.linalg's compositions of primitives (cross, vecdot, det up to 3 x 3, trace, diagonal,
vector_norm; the decompositions are in test_decompositions.py): after a per-element loop and inside a collective loop's body, gradients against
central finite differences of the same code on NumPy."""

import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, finite_difference

X = np.linspace(0.15, 0.85, 18) ** 1.3
N = np.array([2, 0, 3, 1, 2, 4, 1, 3, 0, 2, 1, 3, 2, 0, 1, 2, 3, 1])


def _terms(x, linalg, traced):
    a, b = x[:9].reshape(3, 3), x[9:].reshape(3, 3)
    if traced:
        return (linalg.cross(a, b, axis=0).sum() + linalg.det(a) + linalg.det(b[:2, :2]) +
                linalg.det(a[None, 1:2, 1:2]).sum() + linalg.trace(a, offset=1) +
                linalg.diagonal(b, offset=-1).sum() + linalg.vector_norm(x, ord=3) +
                linalg.vector_norm(a, axis=1, ord=np.inf).sum() + linalg.vecdot(a[0], b[1]))
    return (np.cross(a, b, axis=0).sum() + np.linalg.det(a) + np.linalg.det(b[:2, :2]) +
            a[1, 1] + np.trace(a, 1) + np.diagonal(b, -1).sum() + np.linalg.norm(x, 3) +
            np.abs(a).max(axis=1).sum() + a[0] @ b[1])


def _run(x, traced, program):
    step = lambda i, v: v * 0.9 + 0.05 * np.sin(v)  # noqa: E731

    def f(v):
        return _terms(v, v.__array_namespace__().linalg if traced else None, traced)
    if program == "per-element":
        if traced:
            return f(dl.fori_loop(0, N, step, x))
        y = x.copy()
        for j in range(y.size):
            for i in range(N[j]):
                y[j] = step(i, y[j])
        return f(y)
    body = lambda i, v: v * 0.99 + 0.01 * f(v) * v  # noqa: E731
    if traced:
        return dl.fori_loop(0, 2, body, x).sum()
    for i in range(2):
        x = body(i, x)
    return x.sum()


@pytest.mark.parametrize("program", ["per-element", "collective"])
def test_linalg_gradient(program):
    got = dl.grad(lambda x: _run(x, True, program))(X)
    assert_close(got, finite_difference(lambda x: _run(x, False, program), X), rtol=1e-6,
                 atol=1e-9)


@pytest.mark.parametrize("fn, phrase", [
    (lambda la, x: la.cross(x[:4], x[4:8]), "3 elements"),
    (lambda la, x: la.det(x[:6].reshape(2, 3)), "square"),
    (lambda la, x: la.tensordot(x[:6].reshape(2, 3), x[:6].reshape(3, 2), axes=([0, 1], [0, 1])),
     "differ in length"),
    (lambda la, x: np.tensordot(x[:6].reshape(3, 2), x[:12].reshape(2, 3, 2), axes=2),
     "differ in length"),
    (lambda la, x: np.fft.irfft(x[:1].astype(np.complex128)), "n >= 1"),
])
def test_bad_shapes_name_the_line(fn, phrase):
    def f(x):
        return fn(x.__array_namespace__().linalg, x).sum()
    with pytest.raises(dl.DloopValueError, match=rf"(?s){phrase}.*test_linalg.py"):
        dl.grad(f)(X)


def test_matrix_power_of_a_float_exponent_names_the_line():
    def f(x):
        return x.__array_namespace__().linalg.matrix_power(x[:4].reshape(2, 2), 2.0).sum()
    with pytest.raises(dl.DloopTypeError, match=r"(?s)integer.*test_linalg.py"):
        dl.grad(f)(X)
