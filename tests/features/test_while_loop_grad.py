"""while_loop gradients against the implicit-function answer and finite differences."""

import numpy as np

import dloop as dl
from helpers import assert_close, finite_difference


def newton(a, xp_abs=np.abs):
    """Solve v**3 + a v - 1 = 0 for v, per element, to |f| < 1e-13."""
    def cond(v):
        return xp_abs(v ** 3 + a * v - 1.0) > 1e-13

    def body(v):
        return v - (v ** 3 + a * v - 1.0) / (3.0 * v ** 2 + a)

    return dl.while_loop(cond, body, np.ones_like(a))


def test_newton_solve_matches_implicit_function_theorem(backend):
    a = np.linspace(0.5, 4.0, 40)
    v = dl.jit(newton)(a)
    assert np.all(np.abs(v ** 3 + a * v - 1.0) <= 1e-13)
    g = dl.grad(lambda a: newton(a).sum())(a)
    # F(v, a) = v^3 + a v - 1 = 0  =>  dv/da = -v / (3 v^2 + a)
    assert_close(g, -v / (3 * v ** 2 + a), rtol=1e-6)


def test_newton_shared_parameter_through_while(backend):
    a = np.linspace(0.5, 4.0, 16)

    def loss(s):
        return (newton(a * s) ** 2).sum()

    s = np.array(1.2)
    v = dl.jit(lambda a: newton(a))(a * 1.2)
    expected = np.sum(2 * v * (-v / (3 * v ** 2 + a * 1.2)) * a)
    assert_close(dl.grad(loss)(s), expected, rtol=1e-6)


def test_fixed_count_while_equals_closed_form(backend):
    # Halve until below 1: the trip count is piecewise constant in x, so the derivative of the
    # result is 0.5 ** trips(x) per element.
    x = np.array([0.5, 1.5, 3.0, 100.0])
    g = dl.grad(lambda x: dl.while_loop(lambda v: v > 1.0, lambda v: v * 0.5, x).sum())(x)
    trips = np.array([0, 1, 2, 7])
    assert_close(g, 0.5 ** trips, rtol=1e-12)


def test_scalar_condition_counter_loop_grad(backend):
    x = np.linspace(0.1, 0.9, 5)

    def f(x):
        _, v = dl.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, np.sin(c[1]) + x * 0.5),
                             (np.int64(0), x))
        return (v ** 2).sum()

    def ref(x):
        v = x.copy()
        for _ in range(5):
            v = np.sin(v) + x * 0.5
        return (v ** 2).sum()

    assert_close(dl.grad(f)(x), finite_difference(ref, x), rtol=1e-6)


def test_while_inside_fori_grad(backend):
    x = np.array([1.0, 5.0, 20.0])
    n = np.array([2, 1, 3])

    def f(x):
        def outer(i, v):
            w = dl.while_loop(lambda w: w > 1.0, lambda w: w * 0.5 + 0.01 * np.sin(w), v + 3.0)
            return w * x
        return dl.fori_loop(0, n, outer, x)

    def ref(x):
        out = x.copy()
        for j in range(3):
            for _ in range(n[j]):
                w = out[j] + 3.0
                while w > 1.0:
                    w = w * 0.5 + 0.01 * np.sin(w)
                out[j] = w * x[j]
        return out.sum()

    assert_close(dl.grad(lambda x: f(x).sum())(x), finite_difference(ref, x), rtol=1e-6)
