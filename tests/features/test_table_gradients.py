"""Gradients with respect to arrays gathered inside per-element loop bodies (a coefficient
table indexed by the loop index, a lookup by a computed index): each element adds its
contributions to the table's cotangent."""

import numpy as np

import dloop as dl
from helpers import assert_close, finite_difference

COEF = np.array([0.5, -0.3, 0.8, 0.1, 0.9])
X = np.array([0.2, 0.7, 1.1, 0.4])
N = np.array([5, 2, 0, 3])


def run(coef, x, body):
    return (dl.fori_loop(0, N, lambda i, v: body(i, v, coef), x) ** 2).sum()


def reference(coef, x, body):
    total = 0.0
    for j in range(x.size):
        v = x[j]
        for i in range(N[j]):
            v = body(i, v, coef)
        total += v * v
    return total


def test_table_indexed_by_the_loop_index(backend):
    body = lambda i, v, c: v * 0.9 + np.sin(v) * c[i]  # noqa: E731
    g_coef, g_x = dl.grad(lambda c, x: run(c, x, body), argnums=(0, 1))(COEF, X)
    assert_close(g_coef, finite_difference(lambda c: reference(c, X, body), COEF), rtol=1e-6)
    assert_close(g_x, finite_difference(lambda x: reference(COEF, x, body), X), rtol=1e-6)


def test_table_indexed_by_a_computed_index_and_twice_per_step(backend):
    def body(i, v, c):
        k = (i * 2 + 1) % 5
        return v * 0.8 + c[k] * np.cos(v) + 0.1 * c[i] * v

    g = dl.grad(lambda c: run(c, X, body))(COEF)
    assert_close(g, finite_difference(lambda c: reference(c, X, body), COEF), rtol=1e-6)


def test_table_gradient_through_a_nested_loop_and_a_while_loop(backend):
    def f(c):
        def outer(i, v):
            w = dl.fori_loop(0, i, lambda k, w: w * 0.95 + c[k] * 0.1, v)
            return dl.while_loop(lambda u: u > 2.0, lambda u: u * 0.5 + c[0] * 0.01, w + c[i])
        return (dl.fori_loop(0, N, outer, X) ** 2).sum()

    def ref(c):
        total = 0.0
        for j in range(X.size):
            v = X[j]
            for i in range(N[j]):
                w = v
                for k in range(i):
                    w = w * 0.95 + c[k] * 0.1
                u = w + c[i]
                while u > 2.0:
                    u = u * 0.5 + c[0] * 0.01
                v = u
            total += v * v
        return total

    assert_close(dl.grad(f)(COEF), finite_difference(ref, COEF), rtol=1e-6)


def test_table_gradient_of_an_empty_launch_is_zero(backend):
    body = lambda i, v, c: v * c[i]  # noqa: E731
    g = dl.grad(lambda c: (dl.fori_loop(0, np.zeros(0, np.int64), lambda i, v: body(i, v, c),
                                         np.zeros(0)) ** 2).sum())(COEF)
    np.testing.assert_array_equal(g, np.zeros(5))
