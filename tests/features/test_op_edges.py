"""Operations at the edges of their domains, each once wrong: values against NumPy (which
decides NaN, inf and signed results), gradients against closed forms and central
differences."""

import array_api_compat
import numpy as np
import pytest

import dloop as dl
from dloop.backends.base import get_backend
from helpers import assert_close, finite_difference


def test_ties_split_the_gradient_of_max_and_min(backend):
    """hypot and logaddexp are smooth where a == b, but max's rule gave the whole gradient
    to a: logaddexp's gradient was (1, 0) instead of (1/2, 1/2)."""
    a = np.array([0.5, 1.5, -2.0])
    for fn, slope in ((np.logaddexp, np.full(3, 0.5)), (np.hypot, np.sqrt(0.5) * np.sign(a))):
        ga, gb = dl.grad(lambda a, b: fn(a, b).sum(), argnums=(0, 1))(a, a.copy())
        assert_close(ga, slope, rtol=1e-15)
        assert_close(gb, slope, rtol=1e-15)
    g = dl.grad(lambda x: np.maximum(x, 1.0).sum())(np.array([1.0, 2.0, 0.0]))
    assert_close(g, [0.5, 1.0, 0.0], rtol=0)


def test_logaddexp_heaviside_imag_and_angle_of_special_values(backend):
    inf, nan = np.inf, np.nan
    a, b = np.array([inf, -inf, inf, 1.0, nan]), np.array([inf, -inf, -inf, 1.0, 0.0])
    np.testing.assert_array_equal(dl.jit(np.logaddexp)(a, b), np.logaddexp(a, b))
    x = np.array([nan, -1.0, 0.0, 2.0, -0.0, inf, -inf])
    np.testing.assert_array_equal(dl.jit(lambda x: np.heaviside(x, 0.5))(x),
                                  np.heaviside(x, 0.5))
    np.testing.assert_array_equal(dl.jit(np.imag)(x), np.imag(x))
    np.testing.assert_array_equal(dl.jit(np.angle)(x[1:]), np.angle(x[1:]))


def test_powers_of_zero(backend):
    """x ** 0 is 1 for inf and NaN too (a * 0 + 1 made them NaN), and d(a^b)/da is 0 where
    b = 0 (b a^(b-1) was 0 * inf = NaN at a = 0)."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 2.0])
    np.testing.assert_array_equal(dl.jit(lambda x: x ** 0)(x), x ** 0)
    b = np.array([0.0, 1.0, 2.0, 0.5])
    ga, gb = dl.grad(lambda a, b: (a ** b).sum(), argnums=(0, 1))(np.array([0.0, 0.0, 0.0,
                                                                             1.0]), b)
    assert_close(ga, [0.0, 1.0, 0.0, 0.5], rtol=0)
    assert_close(dl.grad(lambda x: (x ** 0.0).sum())(np.array([0.0, 1.0])), [0.0, 0.0], rtol=0)


def test_norms_of_complex_values(backend):
    """They squared z instead of |z|: a complex 'norm', and its gradient with it."""
    z = np.array([[1 + 2j, 3 - 1j], [0.5j, -2.0]])
    assert_close(dl.jit(np.linalg.norm)(z), np.linalg.norm(z), rtol=1e-15)
    assert_close(dl.jit(lambda z: array_api_compat.array_namespace(z).linalg.matrix_norm(z))(z),
                 np.linalg.norm(z), rtol=1e-15)
    r = z.real.copy()
    assert_close(dl.grad(lambda r: np.linalg.norm(r + 1j * z.imag))(r),
                 finite_difference(lambda r: np.linalg.norm(r + 1j * z.imag), r), rtol=1e-8)
    count = dl.jit(lambda v: array_api_compat.array_namespace(v).linalg.vector_norm(v, ord=0))
    assert count(np.array([1.0, 0.0, 2.0])) == 2


def test_arccosh_of_complex_values(backend):
    """1 / sqrt(z^2 - 1) has the wrong sign where its branch cut differs from acosh's."""
    z0 = np.array([-0.5 + 0.3j, 0.7 - 0.2j, 2.0 + 1.0j])

    def f(re, im):
        return np.real(np.arccosh(re + 1j * im) * np.array([1.0, 2.0, 3.0])).sum()
    ga, gb = dl.grad(f, argnums=(0, 1))(z0.real.copy(), z0.imag.copy())
    assert_close(ga, finite_difference(lambda r: f(r, z0.imag), z0.real), rtol=1e-7)
    assert_close(gb, finite_difference(lambda i: f(z0.real, i), z0.imag), rtol=1e-7)


def test_complex_to_bool_is_nonzero_in_either_part(backend):
    z = np.array([1j, 0, 2, -0.5j])
    np.testing.assert_array_equal(dl.jit(lambda z: z.astype(bool))(z), z.astype(bool))
    np.testing.assert_array_equal(dl.jit(lambda z: np.where(z, 1.0, 0.0))(z),
                                  np.where(z, 1.0, 0.0))


def test_log_ndtr_in_float32_far_in_the_tail(backend):
    """float32's ndtr underflows near -13: log_ndtr gave -inf from about -14 to -37. The
    reference is float64's value rounded (d/dx log_ndtr is about -x there)."""
    special = pytest.importorskip("scipy.special")
    x = np.array([-5.0, -12.0, -14.0, -20.0, -36.0, -40.0], np.float32)
    expected = special.log_ndtr(x.astype(np.float64))
    assert_close(dl.jit(lambda v: special.log_ndtr(v))(x), expected, rtol=1e-6)
    g = dl.grad(lambda v: special.log_ndtr(v).sum())(x)
    assert g.dtype == np.float32
    assert_close(g, finite_difference(lambda v: special.log_ndtr(v).sum(), x), rtol=1e-3)


def test_shift_divmod_and_expand_dims_spellings(backend):
    k = np.array([1, 2, 3])
    np.testing.assert_array_equal(dl.jit(lambda k: (k << 2, 64 >> k, k >> 1))(k),
                                  (k << 2, 64 >> k, k >> 1))
    x = np.array([7.5, -3.0, 2.0])
    np.testing.assert_array_equal(dl.jit(lambda x: divmod(x, 2.0))(x), divmod(x, 2.0))
    y = np.ones((2, 3))
    assert dl.jit(lambda y: np.expand_dims(y, (0, 2)))(y).shape == (1, 2, 1, 3)
    assert dl.jit(lambda y: np.expand_dims(y, -1))(y).shape == (2, 3, 1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_shifts_by_counts_outside_the_bit_width_as_numpy(backend, dtype):
    """NumPy fills >> with the sign for a negative count as for one past the width (dloop
    gave 0 for -8 >> -1), and << gives 0 for both."""
    v = np.array([-8, 8, -1, 0, 5, -5, 7], dtype)
    s = np.array([-1, -1, 70, -70, 64, 63, 2], dtype)
    for fn in (lambda v, s: v >> s, lambda v, s: v << s):
        np.testing.assert_array_equal(dl.jit(fn)(v, s), fn(v, s))
    n = np.array([1, 2, 3, 1, 2, 3, 1])
    fn = lambda v, s: dl.fori_loop(0, n, lambda i, c: (c >> s) + (c << s), v)  # noqa: E731
    expected = v.copy()
    for i in range(n.max()):
        expected = np.where(i < n, (expected >> s) + (expected << s), expected)
    np.testing.assert_array_equal(dl.jit(fn)(v, s), expected)


def test_numpy_vecdot_a_ufunc_in_numpy_2(backend):
    a, b = np.arange(6.0).reshape(2, 3), np.array([1.0, -2.0, 0.5])
    assert_close(dl.jit(np.vecdot)(a, b), np.vecdot(a, b), rtol=1e-15)
    assert_close(dl.jit(lambda a: np.vecdot(a, a, axis=0))(a), np.vecdot(a, a, axis=0),
                 rtol=1e-15)
    assert_close(dl.grad(lambda a: np.vecdot(a, b).sum())(a), np.broadcast_to(b, (2, 3)),
                 rtol=1e-15)


def test_scalar_exponents_numpy_computes_without_pow(backend):
    """NumPy computes x ** 0.5 as sqrt and x ** 2.0, 1.0, 0.0, -1.0 as products: -inf ** 0.5
    is NaN and -0.0 ** 0.5 is -0.0 there, where C's pow gives inf and 0.0."""
    x = np.array([-0.0, -np.inf, 1e30, 2.0, 0.3, np.inf, np.nan, -2.0])
    for e in (0.5, 2.0, 1.0, 0.0, -1.0, np.float64(0.5)):
        with np.errstate(all="ignore"):
            want = x ** e
        got = dl.jit(lambda v: v ** e)(x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    got = dl.jit(lambda v: v ** 2.0)(np.arange(4))              # an int array: float64
    assert got.dtype == np.float64 and list(got) == [0.0, 1.0, 4.0, 9.0]
    g = dl.grad(lambda v: (v ** 0.5 + v ** 2.0 + v ** -1.0).sum())(np.array([0.25, 4.0]))
    assert_close(g, [1.0 + 0.5 - 16.0, 0.25 + 8.0 - 1 / 16], rtol=1e-15)


def test_arithmetic_with_zero_inf_and_nan_literals(backend):
    """x / 0.0, x * 0.0, 0.0 / x, x + 0.0 and 0.0 - x keep IEEE's infinities, NaNs and signed
    zeros (lavapipe folded them as if none existed: x / 0.0 came back x or garbage)."""
    x = np.array([1.5, -2.5, 0.0, -0.0, np.inf, np.nan])
    cases = [lambda v: v / 0.0, lambda v: v / 0, lambda v: v * 0.0, lambda v: 0.0 / v,
             lambda v: v + 0.0, lambda v: 0.0 - v, lambda v: v * np.inf, lambda v: v + np.nan,
             lambda v: dl.fori_loop(0, np.ones(6, int), lambda i, w: w / 0.0, v)]
    with np.errstate(all="ignore"):
        wants = [f(x) for f in cases[:-1]] + [x / 0.0]
    for f, want in zip(cases, wants):
        got = dl.jit(f)(x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_composites_keep_float32_with_python_scalars(backend):
    """NEP 50: a Python scalar takes the array's dtype, in the functions dloop composes too."""
    x = np.array([0.5, -2.0, 0.0, 3.0], np.float32)
    sp = pytest.importorskip("scipy.special")
    for f in (lambda v: np.hypot(v, 3), lambda v: np.hypot(2.0, v), lambda v: np.logaddexp(v, 1),
              lambda v: np.heaviside(v, 0.5), lambda v: sp.softplus(v)):
        got, want = dl.jit(f)(x), f(x)
        assert got.dtype == want.dtype == np.float32
        assert_close(got, want, rtol=1e-6)


def test_gammaln_at_infinities_and_integer_dot_products(backend):
    sp = pytest.importorskip("scipy.special")
    x = np.array([np.inf, -np.inf, 0.5, 200.0, -2.0, np.nan])
    np.testing.assert_allclose(dl.jit(sp.gammaln)(x), sp.gammaln(x), rtol=1e-14)
    i = np.array([[1, -2], [3, 4]], np.int32)
    for f in (lambda i: np.einsum("ij,jk->ik", i, i), lambda i: np.vecdot(i, i)):
        got, want = dl.jit(f)(i), f(i)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype == np.int32
    for v in (i, np.array([0.5, 1.5, -2.5], np.float32)):         # rint: a float function
        got, want = dl.jit(np.rint)(v), np.rint(v)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("dtype, values", [
    (np.float32, [3.4028235e38, -3e38, 1e30, 1e-40, 1e-45, 1.5e-38, -27.0, 0.3, 0.0, -0.0]),
    (np.float64, [1.7e308, -1e300, 5e-324, 1e-320, 2.2e-308, 1e-200, 8.0, -0.3, 0.0])])
def test_cbrt_in_a_loop_body_at_the_ends_of_the_range(backend, dtype, values):
    """The per-element cbrt's Newton step cubed its root: cbrt(3.4e38f) was inf, and
    cbrt(5e-324) 62 ulps off. Within 1 ulp of NumPy's, and its gradient 1 / (3 cbrt(x)^2)."""
    x = np.array(values, dtype)
    if dtype == np.float32 and backend == "vulkan" and \
            not get_backend("vulkan").features.denorm_preserve32:
        x = x[(x == 0) | (np.abs(x) >= np.finfo(dtype).tiny)]   # NVIDIA's flushes them
    ones = np.ones(x.size, np.int64)
    got = dl.fori_loop(0, ones, lambda i, w: np.cbrt(w), x)
    want = np.cbrt(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want))), (got, want)
    x = x[(x != 0) & (np.abs(x) < 1e300)]          # the gradient's own range
    g = dl.grad(lambda v: dl.fori_loop(0, np.ones(x.size, np.int64),
                                       lambda i, w: np.cbrt(w), v).sum())(x)
    assert_close(g, 1.0 / (3.0 * np.cbrt(x.astype(np.float64)) ** 2),
                 rtol=1e-5 if dtype == np.float32 else 1e-14)


def test_tanh_gradient_where_tanh_rounds_to_one(backend):
    """1 - tanh(x)^2 cancels: it was 1e-8 off at x = 10, 1.7e-4 at 15, and 0 from 19 on,
    where sech(x)^2 is 1.7e-17 at 20; in a loop body too."""
    x = np.array([-30.0, -5.0, -0.3, 0.0, 0.5, 3.0, 10.0, 15.0, 20.0, 30.0, 400.0])
    want = 1.0 / np.cosh(x) ** 2
    got = dl.grad(lambda x: np.tanh(x).sum())(x)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)        # relative, tiny ones too
    in_loop = dl.grad(lambda x: dl.fori_loop(0, np.ones(x.size, np.int64),
                                             lambda i, v: np.tanh(v), x).sum())(x)
    np.testing.assert_allclose(in_loop, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("fn, slope", [
    (np.arcsin, lambda x: 1 / np.sqrt((1 - x) * (1 + x))),
    (np.arccos, lambda x: -1 / np.sqrt((1 - x) * (1 + x))),
    (np.arctanh, lambda x: 1 / ((1 - x) * (1 + x)))])
def test_gradients_near_one_where_one_minus_x_squared_cancels(backend, fn, slope):
    """1 - x x cancelled near |x| = 1 (3e-7 of asin's slope off at 1 - 1e-10, 5e-7 of
    atanh's): (1 - x)(1 + x)."""
    x = np.array([1 - 1e-10, -(1 - 1e-12), 1 - 2.0 ** -40, 0.999, 0.5, -0.3])
    want = slope(x)
    np.testing.assert_allclose(dl.grad(lambda x: fn(x).sum())(x), want, rtol=1e-14, atol=0)
