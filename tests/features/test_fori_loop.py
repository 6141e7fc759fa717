"""fori_loop forward results against plain-Python reference loops."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl
from helpers import assert_close, damped_sine


def test_per_element_bounds_match_python_loop(backend):
    rng = np.random.default_rng(0)
    x = rng.random(300)
    n = rng.integers(0, 40, size=300)
    out = dl.jit(lambda x: dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x))(x)
    assert_close(out, damped_sine(x, n), rtol=1e-12)


def test_loop_on_plain_arrays_runs_compiled_and_returns_numpy(backend):
    x = np.linspace(0.1, 1.0, 5)
    n = np.array([0, 1, 2, 3, 4])
    out = dl.fori_loop(0, n, lambda i, v: v * 0.95 + np.sin(v) * x * 0.1, x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert_close(out, damped_sine(x, n), rtol=1e-12)


def test_lower_bounds_per_element_and_index_use(backend):
    lo = np.array([2, 0, 5, 7])
    hi = np.array([6, 3, 5, 4])
    x = np.ones(4)
    out = dl.fori_loop(lo, hi, lambda i, v: v + i * 0.5, x)
    expected = np.array([1 + 0.5 * sum(range(a, b)) for a, b in zip(lo, hi)])
    assert_close(out, expected, rtol=1e-12)


def test_scalar_bounds_from_0d_array(backend):
    x = np.linspace(-1, 1, 6)
    out = dl.jit(lambda x: dl.fori_loop(np.int64(1), np.array(4), lambda i, v: v * 2.0 + i, x))(x)
    expected = x.copy()
    for i in range(1, 4):
        expected = expected * 2.0 + i
    assert_close(out, expected, rtol=1e-12)


def test_nested_loop_inner_bound_is_outer_index(backend):
    n = np.array([0, 1, 3, 5])
    x = np.array([0.3, 0.5, 0.7, 0.9])

    def f(x):
        def outer(i, v):
            return dl.fori_loop(0, i, lambda k, w: w * 0.9 + 0.01 * k, v) + 0.1 * x
        return dl.fori_loop(0, n, outer, x)

    expected = x.copy()
    for j in range(4):
        v = x[j]
        for i in range(n[j]):
            for k in range(i):
                v = v * 0.9 + 0.01 * k
            v = v + 0.1 * x[j]
        expected[j] = v
    assert_close(dl.jit(f)(x), expected, rtol=1e-12)


def test_tuple_and_dict_carry_with_int_counter(backend):
    x = np.array([0.5, 1.5, 2.5])
    n = np.array([3, 0, 2])

    def body(i, c):
        pos, vel, count = c["pos"], c["vel"], c["count"]
        return {"pos": pos + 0.1 * vel, "vel": vel - 0.1 * pos, "count": count + 1}

    out = dl.fori_loop(0, n, body, {"pos": x, "vel": np.zeros(3), "count": np.zeros(3, np.int64)})
    assert out["count"].dtype == np.int64
    np.testing.assert_array_equal(out["count"], n)
    pos, vel = x.copy(), np.zeros(3)
    for j in range(3):
        for _ in range(n[j]):
            pos[j], vel[j] = pos[j] + 0.1 * vel[j], vel[j] - 0.1 * pos[j]
    assert_close(out["pos"], pos, rtol=1e-12)
    assert_close(out["vel"], vel, rtol=1e-12)


def test_replicated_scalar_carry_under_scalar_bounds(backend):
    x = np.array([1.0, 2.0, 3.0])
    c, v = dl.fori_loop(0, 4, lambda i, cv: (cv[0] * 2.0, cv[1] + cv[0]), (np.float64(1.0), x))
    assert np.shape(c) == () and float(c) == 16.0
    assert_close(v, x + 1 + 2 + 4 + 8, rtol=1e-12)


def test_empty_array_and_zero_trips(backend):
    empty = np.zeros(0)
    out = dl.fori_loop(0, np.zeros(0, np.int64), lambda i, v: v * 2.0, empty)
    assert out.shape == (0,)
    x = np.arange(4.0)
    out = dl.fori_loop(0, np.zeros(4, np.int64), lambda i, v: v * 2.0, x)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_carry_dtypes_are_kept(backend, dtype):
    x = np.arange(1, 5).astype(dtype)
    out = dl.fori_loop(0, 3, lambda i, v: v * 2 + 1, x)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, ((x * 2 + 1) * 2 + 1) * 2 + 1)


def test_gather_from_invariant_table_with_loop_index(backend):
    table = np.array([0.5, -1.0, 2.0, 0.25])
    x = np.array([1.0, 2.0])
    n = np.array([4, 2])

    def body(i, v):
        xp = array_api_compat.array_namespace(i)
        return v + xp.asarray(table)[i] * v

    out = dl.fori_loop(0, n, body, x)
    expected = x.copy()
    for j in range(2):
        for i in range(n[j]):
            expected[j] = expected[j] + table[i] * expected[j]
    assert_close(out, expected, rtol=1e-12)


def test_loop_gathers_from_a_table_computed_just_before(backend):
    x = np.arange(5.0)
    n = np.array([1, 2, 3, 1, 0])

    def f(x):
        t = x * 2.0
        return dl.fori_loop(0, n, lambda i, v: v + t[i], x)

    np.testing.assert_array_equal(dl.jit(f)(x), [0.0, 3.0, 8.0, 3.0, 4.0])


def test_carries_assigned_all_at_once(backend):
    """A carry's new value may be another carry's old one: (b, a) swaps, and c[1] passed on
    to c[0] reaches it one step later (the interpreter assigned carries one by one, so a swap
    gave (b, b) and the gradient through the hand-on was 0)."""
    a, b = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    swapped = dl.fori_loop(0, 3, lambda i, c: (c[1], c[0]), (a, b))
    np.testing.assert_array_equal(swapped[0], b)
    np.testing.assert_array_equal(swapped[1], a)
    q, w = np.array([0.5, -0.3, 0.2, 0.8, -0.6]), np.arange(1.0, 6.0)

    def handed_on(q):        # a <- b <- 2q: after two steps a == 2q
        a, _ = dl.fori_loop(0, 2, lambda i, c: (c[1], 2.0 * q), (np.zeros(5), np.zeros(5)))
        return (a * w).sum()
    assert_close(dl.grad(handed_on)(q), 2 * w, rtol=1e-15)
    n = np.array([0, 1, 2, 3, 4])
    rotated = dl.while_loop(lambda c: c[3] < n, lambda c: (c[1], c[2], c[0], c[3] + 1),
                            (q, 2 * q, 3 * q, np.zeros(5, np.int64)))
    expected = [np.where(n % 3 == 0, q, np.where(n % 3 == 1, 2 * q, 3 * q)),
                np.where(n % 3 == 0, 2 * q, np.where(n % 3 == 1, 3 * q, q))]
    assert_close(rotated[0], expected[0], rtol=0)
    assert_close(rotated[1], expected[1], rtol=0)
