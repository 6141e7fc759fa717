"""while_loop forward results against plain-Python reference loops."""

import numpy as np

import dloop as dl
from helpers import assert_close


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_per_element_condition_integer_carry(backend):
    start = np.arange(1, 40, dtype=np.int64)

    def cond(c):
        return c[0] != 1

    def body(c):
        n, steps = c
        return np.where(n % 2 == 0, n // 2, 3 * n + 1), steps + 1

    n, steps = dl.while_loop(cond, body, (start, np.zeros_like(start)))
    np.testing.assert_array_equal(n, 1)
    np.testing.assert_array_equal(steps, [collatz_steps(int(s)) for s in start])


def test_scalar_condition_on_counter(backend):
    x = np.linspace(0, 1, 5)
    k, v = dl.while_loop(lambda c: c[0] < 6, lambda c: (c[0] + 1, c[1] * 1.5 + 0.1),
                         (np.int64(0), x))
    assert int(k) == 6
    expected = x.copy()
    for _ in range(6):
        expected = expected * 1.5 + 0.1
    assert_close(v, expected, rtol=1e-12)


def test_newton_cube_root_per_element(backend):
    a = np.linspace(0.5, 30.0, 50)

    def solve(a):
        return dl.while_loop(lambda v: np.abs(v ** 3 - a) > 1e-12 * a,
                             lambda v: v - (v ** 3 - a) / (3 * v ** 2), np.ones_like(a) * 2.0)

    assert_close(dl.jit(solve)(a), np.cbrt(a), rtol=1e-12)


def test_while_inside_fori(backend):
    x = np.array([1.0, 5.0, 20.0])
    n = np.array([2, 0, 3])

    def f(x):
        def outer(i, v):
            return dl.while_loop(lambda w: w > 1.0, lambda w: w * 0.5, v + 3.0)
        return dl.fori_loop(0, n, outer, x)

    expected = x.copy()
    for j in range(3):
        for _ in range(n[j]):
            w = expected[j] + 3.0
            while w > 1.0:
                w *= 0.5
            expected[j] = w
    assert_close(dl.jit(f)(x), expected, rtol=1e-12)


def test_zero_trip_while(backend):
    x = np.array([-1.0, -2.0])
    np.testing.assert_array_equal(dl.while_loop(lambda v: v > 0, lambda v: v - 1.0, x), x)
