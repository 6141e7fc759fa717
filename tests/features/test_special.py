"""xp.special on traced arrays: values against SciPy over wide ranges on every backend (inside
kernels), and gradients against central finite differences, also inside a per-element loop.
The tolerances are the errors measured and stated in docs/scipy.md."""

import numpy as np
import pytest
import scipy.special as ss

import dloop as dl
from dloop.trace import special
from helpers import assert_close, finite_difference

WIDE = np.concatenate([np.linspace(-30, 30, 601), [0.0, -0.0, np.inf, -np.inf, 1e-300]])
UNIT = np.concatenate([np.linspace(-1, 1, 401), [1 - 1e-16, -1 + 1e-16, 1e-300, 1e-10]])
PROB = np.concatenate([np.linspace(0, 1, 401), [1e-300, 1e-100, 1e-20, 1 - 1e-16]])
GAMMA = np.concatenate([np.linspace(-20, 50, 701), np.logspace(-300, 300, 61), [0.0, -1.0, 1.0]])
POSITIVE = np.concatenate([np.linspace(0.01, 50, 500), np.logspace(-5, 5, 41)])
BESSEL = np.concatenate([np.linspace(-60, 60, 601), [0.0, 700.0, -800.0, 1e5]])
A, XG = (v.ravel() for v in np.meshgrid([0.5, 1.0, 2.5, 7.0, 30.0, 150.0],
                                        [0.0, 1e-3, 0.3, 1.0, 2.5, 6.0, 10.0, 35.0, 160.0]))

# name: (call on the namespace's special, SciPy's function, arguments, relative tolerance,
#        floor of the scale the error is measured against)
VALUES = {
    "erf": (lambda s, x: s.erf(x), ss.erf, (WIDE,), 2e-15, 1e-300),
    # SciPy's erfc rounds x*x before exp: its error grows as x^2 eps (5e-14 at 26; ours stays
    # under 5e-16 against mpmath, see docs/scipy.md).
    "erfc": (lambda s, x: s.erfc(x), ss.erfc, (WIDE[np.abs(WIDE) < 26],), 1e-13, 1e-300),
    "erfinv": (lambda s, x: s.erfinv(x), ss.erfinv, (UNIT,), 3e-14, 1e-300),
    "ndtri": (lambda s, x: s.ndtri(x), ss.ndtri, (PROB,), 3e-14, 1e-300),
    "ndtr": (lambda s, x: s.ndtr(x), ss.ndtr, (WIDE[np.abs(WIDE) < 37],), 3e-13, 1e-300),
    "log_ndtr": (lambda s, x: s.log_ndtr(x), ss.log_ndtr, (np.linspace(-60, 30, 451),),
                 3e-13, 1e-300),
    "gammaln": (lambda s, x: s.gammaln(x), ss.gammaln, (GAMMA,), 3e-14, 1.0),
    "digamma": (lambda s, x: s.digamma(x), ss.psi, (GAMMA,), 3e-13, 1.0),
    "polygamma1": (lambda s, x: s.polygamma(1, x), lambda x: ss.polygamma(1, x), (POSITIVE,),
                   3e-15, 1e-300),
    "polygamma3": (lambda s, x: s.polygamma(3, x), lambda x: ss.polygamma(3, x), (POSITIVE,),
                   3e-15, 1e-300),
    "i0e": (lambda s, x: s.i0e(x), ss.i0e, (BESSEL,), 3e-15, 1e-300),
    "i1e": (lambda s, x: s.i1e(x), ss.i1e, (BESSEL,), 3e-15, 1e-300),
    "i0": (lambda s, x: s.i0(x), ss.i0, (BESSEL[np.abs(BESSEL) < 700],), 5e-15, 1e-300),
    "i1": (lambda s, x: s.i1(x), ss.i1, (BESSEL[np.abs(BESSEL) < 700],), 5e-15, 1e-300),
    "gammainc": (lambda s, a, x: s.gammainc(a, x), ss.gammainc, (A, XG), 2e-13, 1e-300),
    "gammaincc": (lambda s, a, x: s.gammaincc(a, x), ss.gammaincc, (A, XG), 2e-13, 1e-300),
    # Below x = -708 the result is subnormal: there the error is measured in absolute terms.
    "zeta": (lambda s, x, q: s.zeta(x, q), ss.zeta, (np.linspace(1.01, 40, 300),
                                                     np.linspace(0.05, 30, 300)[::-1]), 2e-15,
             1e-300),
    # Riemann's, against mpmath: below -0.1 by reflection (SciPy is 9e-13 off near -140).
    "riemann_zeta": (lambda s, x: s.zeta(x), lambda x: _mp(lambda mp, x: mp.zeta(x), x),
                     (np.concatenate([np.linspace(-170, 0.99, 581), np.linspace(-1, 0.9, 39),
                                      [-259.0, -0.1, -1e-20, 0.0, -2.0, -300.0, -301.0]]),),
                     6e-14, 1e-300),
    "expit": (lambda s, x: s.expit(x), ss.expit, (WIDE * 30,), 3e-16, 1e-292),
    "logit": (lambda s, x: s.logit(x), ss.logit, (PROB,), 5e-16, 1.0),
    "xlogy": (lambda s, x, y: s.xlogy(x, y), ss.xlogy, (WIDE[:600], np.abs(WIDE[1:601])),
              5e-16, 1e-300),
    "xlog1py": (lambda s, x, y: s.xlog1py(x, y), ss.xlog1py, (WIDE[:600], WIDE[1:601] / 31),
                5e-16, 1e-300),
    # Against mpmath: SciPy's betaln cancels as gammaln(a) + gammaln(b) - gammaln(a + b) does
    # (5.9e-11 off at a = 0.01, b = 1e5; 2e-9 at 1e6).
    "betaln": (lambda s, a, b: s.betaln(a, b), lambda a, b: _mp_betaln(a, b),
               (np.concatenate([POSITIVE, [0.01, 0.09, 3.0, 0.5]]),
                np.concatenate([POSITIVE[::-1], [1e5, 9e5, 1e6, 2e4]])), 5e-14, 1.0),
    "sinc": (lambda s, x: s.sinc(x), np.sinc, (WIDE,), 5e-16, 1.0),
    "entr": (lambda s, x: s.entr(x), ss.entr, (WIDE,), 5e-16, 1e-300),
    "rel_entr": (lambda s, x, y: s.rel_entr(x, y), ss.rel_entr, (WIDE[:600], WIDE[1:601]),
                 5e-16, 1e-300),
    "kl_div": (lambda s, x, y: s.kl_div(x, y), ss.kl_div, (WIDE[:600], WIDE[1:601]), 4e-15,
               1.0),
    "huber": (lambda s, d, r: s.huber(d, r), ss.huber, (WIDE[:600] / 10, WIDE[1:601]), 5e-16,
              1e-300),
    "pseudo_huber": (lambda s, d, r: s.pseudo_huber(d, r), ss.pseudo_huber,
                     (np.abs(WIDE[:600]) / 10, WIDE[1:601]), 2e-15, 1e-300),
    "boxcox": (lambda s, x, l: s.boxcox(x, l), ss.boxcox, (POSITIVE, np.linspace(-2, 2, 541)),
               2e-15, 1.0),
    "inv_boxcox": (lambda s, y, l: s.inv_boxcox(y, l), ss.inv_boxcox,
                   (np.linspace(-0.4, 3, 541), np.linspace(-2, 2, 541)), 2e-15, 1.0),
    "cbrt": (lambda s, x: s.cbrt(x), ss.cbrt, (WIDE * 1e3,), 3e-16, 1e-300),
    "exprel": (lambda s, x: s.exprel(x), ss.exprel, (WIDE,), 1e-15, 1e-300),
}


def _mp_betaln(a, b):
    import mpmath
    with mpmath.workdps(40):
        return np.array([float(mpmath.log(mpmath.beta(x, y))) for x, y in zip(a, b)])


def _mp(fn, *args):
    """fn(mpmath, *floats) at 40 digits, elementwise, as float64."""
    import mpmath
    with mpmath.workdps(40):
        return np.array([float(fn(mpmath, *map(mpmath.mpf, xs))) for xs in zip(*args)])


def _error(got, want, floor):
    got, want = np.asarray(got), np.asarray(want)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        err = np.abs(got - want) / np.maximum(np.abs(want), floor)
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def test_every_function_has_a_value_case():
    covered = {"polygamma", "psi", "multigammaln", "chdtr", "chdtrc", "zeta"} | set(VALUES)
    assert set(special.FUNCTIONS) <= covered, sorted(set(special.FUNCTIONS) - covered)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_match_scipy(backend, name):
    call, reference, args, rtol, floor = VALUES[name]
    got = dl.jit(lambda *xs: call(xs[0].__array_namespace__().special, *xs))(*args)
    err = _error(got, reference(*args), floor)
    assert err.max() <= rtol, f"max relative error {err.max():.2e} at {args[0][err.argmax()]}"


# name: (function of one float64 vector, points where it is smooth)
GRADIENTS = {
    "erf": (lambda s, x: s.erf(x), np.linspace(-3, 3, 7)),
    "erfc": (lambda s, x: s.erfc(x), np.linspace(-3, 5, 7)),
    "erfinv": (lambda s, x: s.erfinv(x), np.linspace(-0.99, 0.99, 7)),
    "ndtri": (lambda s, x: s.ndtri(x), np.linspace(0.01, 0.99, 7)),
    "log_ndtr": (lambda s, x: s.log_ndtr(x), np.array([-45.0, -30.0, -5.0, 0.5, 4.0]),
                 # SciPy's log_ndtr is not smooth enough above 0 for differences: closed form.
                 lambda x: np.exp(-x * x / 2) / np.sqrt(2 * np.pi) / ss.ndtr(x)),
    "gammaln": (lambda s, x: s.gammaln(x), np.array([-2.5, 0.3, 1.5, 4.0, 12.0, 60.0])),
    "digamma": (lambda s, x: s.digamma(x), np.array([-2.5, 0.3, 1.5, 4.0, 12.0])),
    "polygamma2": (lambda s, x: s.polygamma(2, x), np.array([0.3, 1.5, 4.0, 12.0])),
    "i0e": (lambda s, x: s.i0e(x), np.array([-25.0, -3.0, 0.0, 0.4, 5.0, 30.0])),
    "i1e": (lambda s, x: s.i1e(x), np.array([-25.0, -3.0, 0.0, 0.4, 5.0, 30.0])),
    "i0": (lambda s, x: s.i0(x), np.array([-3.0, 0.4, 5.0])),
    "i1": (lambda s, x: s.i1(x), np.array([-3.0, 0.0, 5.0])),
    "gammainc": (lambda s, x: s.gammainc(2.5, x), np.array([0.3, 2.0, 4.0, 9.0])),
    "gammaincc": (lambda s, x: s.gammaincc(2.5, x), np.array([0.3, 2.0, 4.0, 9.0])),
    "chdtrc": (lambda s, x: s.chdtrc(3.0, x), np.array([0.3, 2.0, 9.0])),
    "expit": (lambda s, x: s.expit(x), np.array([-800.0, -3.0, 0.0, 2.0, 800.0])),
    "zeta": (lambda s, x: s.zeta(x * 3.0, x), np.array([0.6, 1.0, 2.5])),
    "riemann_zeta": (lambda s, x: s.zeta(x), np.array([-7.3, -2.0, -0.3, -0.05, 0.5, 3.0])),
    "logit": (lambda s, x: s.logit(x), np.array([0.1, 0.5, 0.8])),
    "xlogy": (lambda s, x: s.xlogy(x, x * x + 0.5), np.array([0.0, 0.5, 2.0])),
    "xlog1py": (lambda s, x: s.xlog1py(x, x * 0.5), np.array([0.0, 0.5, 2.0])),
    "betaln": (lambda s, x: s.betaln(x, 2.0 * x), np.array([0.3, 2.0, 20.0])),
    "sinc": (lambda s, x: s.sinc(x), np.array([-1.3, 0.0, 0.4])),
    "entr": (lambda s, x: s.entr(x), np.array([0.2, 1.0, 3.0])),
    "rel_entr": (lambda s, x: s.rel_entr(x, 1.5 - x), np.array([0.2, 0.7, 1.1])),
    "kl_div": (lambda s, x: s.kl_div(x, 1.5 - x), np.array([0.2, 0.7, 1.1])),
    "huber": (lambda s, x: s.huber(1.0, x), np.array([-2.0, 0.3, 3.0])),
    "pseudo_huber": (lambda s, x: s.pseudo_huber(0.7, x), np.array([-2.0, 0.0, 3.0])),
    "boxcox": (lambda s, x: s.boxcox(x, 0.4) + s.boxcox(x, 0.0), np.array([0.2, 1.0, 3.0])),
    "inv_boxcox": (lambda s, x: s.inv_boxcox(x, 0.4) + s.inv_boxcox(x, 0.0),
                   np.array([0.2, 1.0, 3.0])),
    "cbrt": (lambda s, x: s.cbrt(x), np.array([-8.0, 0.5, 27.0])),
    "exprel": (lambda s, x: s.exprel(x), np.array([-2.0, 0.0, 1e-3, 3.0])),
    "multigammaln": (lambda s, x: s.multigammaln(x, 3), np.array([1.5, 4.0])),
}
def _numpy_version(call):
    class Namespace:
        def __getattr__(self, name):
            fn = getattr(ss, name)
            return fn
    return lambda x: call(Namespace(), x)


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradient_matches_finite_differences(name):
    call, x, *closed_form = GRADIENTS[name]
    got = dl.grad(lambda x: call(x.__array_namespace__().special, x).sum())(x)
    reference = _numpy_version(call)
    expected = closed_form[0](x) if closed_form else \
        finite_difference(lambda x: reference(x).sum(), x, eps=1e-6)
    assert_close(got, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["erf", "gammaln", "i1e", "ndtri"])
def test_inside_per_element_loop(backend, name):
    """The expansion inside a loop body's kernel, forward and reverse sweep."""
    call, x = GRADIENTS[name][:2]
    n = np.arange(x.size) % 3

    def run(x, s):
        return dl.fori_loop(0, n, lambda i, v: 0.5 * v + 0.5 * call(s, v), x) if s is not None \
            else None

    def numeric(x):
        out = x.copy()
        for j in range(x.size):
            for _ in range(n[j]):
                out[j] = 0.5 * out[j] + 0.5 * _numpy_version(call)(np.array([out[j]]))[0]
        return out.sum()

    got = dl.grad(lambda x: run(x, x.__array_namespace__().special).sum())(x)
    assert_close(got, finite_difference(numeric, x), rtol=1e-6, atol=1e-9)


def test_polygamma_order_must_be_a_python_int():
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)Python int.*test_special.py"):
        dl.jit(lambda x: x.__array_namespace__().special.polygamma(x, x))(np.array([1.5]))


def test_incomplete_gamma_gradient_in_a_is_an_error():
    def loss(a):
        return a.__array_namespace__().special.gammainc(a, 2.0).sum()
    with pytest.raises(dl.DloopNotImplementedError, match=r"(?s)respect to a.*test_special.py"):
        dl.grad(loss)(np.array([1.5, 2.5]))


def test_betaln_on_a_loose_device():
    """As a Vulkan driver may run it: every transcendental from kernel/mathlib.py, products
    fused into adds, divisions and square roots 3 ulps off (NVIDIA's driver gave 1.5e-11
    with the plain gammaln sum). The bound holds over a wide grid."""
    from kernel.rough import loose_device
    rng = np.random.default_rng(2)
    a = np.concatenate([POSITIVE, 10.0 ** rng.uniform(-5, 6, 400)])
    b = np.concatenate([POSITIVE[::-1], 10.0 ** rng.uniform(-5, 6, 400)])
    previous = dl.config.backend
    dl.config.update("backend", "interpret")
    try:
        with loose_device(ulps=3, fused=True):
            got = dl.jit(lambda x, y: x.__array_namespace__().special.betaln(x, y))(a, b)
    finally:
        dl.config.update("backend", previous)
    err = _error(got, _mp_betaln(a, b), 1.0)
    assert err.max() <= 5e-14, f"{err.max():.2e} at {a[err.argmax()]}, {b[err.argmax()]}"


# x / y far from 1 both ways, over- and underflowing: (x - y) / y rounded to -1 below
# x / y = eps, where log1p made rel_entr(1e-20, 0.4) -inf (and stats.entropy(pk, qk) with it).
FAR = np.array([5e-324, 1e-300, 1e-20, 1e-10, 1e-3, 0.2, 0.5, 0.7, 1.0, 3.0, 1e3, 1e10, 1e300])
FAR_X, FAR_Y = (v.ravel() for v in np.meshgrid(FAR, FAR))


def _kl_div(x, y):
    """SciPy's kl_div, but where its x / y overflows (inf at x = 1e-10, y = 5e-324): there
    rel_entr(x, y) - x + y, from SciPy's rel_entr, which takes logarithms apart."""
    out = ss.kl_div(x, y)
    return np.where(np.isinf(out), ss.rel_entr(x, y) - x + y, out)


@pytest.mark.parametrize("name, reference, rtol, floor", [
    ("rel_entr", ss.rel_entr, 5e-16, 1e-300), ("kl_div", _kl_div, 4e-15, 1.0)])
def test_relative_entropy_far_from_one(backend, name, reference, rtol, floor):
    got = dl.jit(lambda x, y: getattr(x.__array_namespace__().special, name)(x, y))(FAR_X, FAR_Y)
    err = _error(got, reference(FAR_X, FAR_Y), floor)
    assert err.max() <= rtol, f"{err.max():.2e} at {FAR_X[err.argmax()]}, {FAR_Y[err.argmax()]}"


@pytest.mark.parametrize("call", [lambda s, x: s.rel_entr(x, x), lambda s, x: s.rel_entr(x, 0.5),
                                  lambda s, x: s.kl_div(x, 0.5),
                                  lambda s, x: s.pseudo_huber(1.0, x),
                                  lambda s, x: s.chdtr(x, 2.5), lambda s, x: s.chdtrc(x, 2.5)],
                         ids=["rel_entr", "rel_entr_scalar", "kl_div", "pseudo_huber", "chdtr",
                              "chdtrc"])
def test_float32_stays_float32(call):
    """Python scalars are weak: float32 in, float32 out, as in SciPy (a where() of two Python
    floats, or v * 0.5 of a Python float v, was a float64 constant that promoted the result)."""
    x = np.array([0.2, 0.7, 1.5], dtype=np.float32)
    got = dl.jit(lambda x: call(x.__array_namespace__().special, x))(x)
    assert got.dtype == np.float32


def _in_kernel(fn):
    """fn inside a loop body, so that its derivative runs in the backend's kernels."""
    return lambda x: fn(dl.fori_loop(0, 1, lambda i, v: v, x))


def _boxcox_slope(mp, x, lmbda):
    """d/dlambda of boxcox(x, lambda), at 40 digits (its limit log(x)^2 / 2 at 0)."""
    return mp.diff(lambda l: mp.expm1(l * mp.log(x)) / l if l else mp.log(x), lmbda)


def _inv_boxcox_slope(mp, y, lmbda):
    return mp.diff(lambda l: mp.exp(mp.log1p(l * y) / l if l else y), lmbda)


@pytest.mark.parametrize("name, slope, x", [("boxcox", _boxcox_slope, 2.0),
                                            ("inv_boxcox", _inv_boxcox_slope, 1.5)])
def test_box_cox_gradient_in_lambda_near_zero(backend, name, slope, x):
    """The slope in lambda at and near 0: where(lambda = 0, ...) had cut it (0 at 0), and
    expm1(t) / lambda, log1p(t) / lambda lost half the digits of theirs near t = 0."""
    lmbda = np.array([0.0, 1e-9, -1e-6, 1e-3, 0.05, -0.2, 0.7])
    got = dl.grad(_in_kernel(lambda l: getattr(l.__array_namespace__().special, name)(
        x, l).sum()))(lmbda)
    assert_close(got, _mp(slope, np.full(lmbda.shape, x), lmbda), rtol=1e-13, atol=1e-300)


EDGE_A, EDGE_X = (v.ravel() for v in np.meshgrid(
    [0.0, -0.0, 0.5, 2.5, 1e3, np.inf, np.nan, -1.0], [0.0, 1e-300, 1.0, 7.0, np.inf, np.nan,
                                                        -1.0]))


@pytest.mark.parametrize("name", ["gammainc", "gammaincc", "chdtr", "chdtrc"])
def test_incomplete_gamma_edges(backend, name):
    """SciPy's values at a = 0 (P(0, x > 0) = 1), x = inf and a = inf, where a log(x) - x is
    inf - inf; NaN at the corners (0, 0) and (inf, inf)."""
    got = dl.jit(lambda a, x: getattr(a.__array_namespace__().special, name)(a, x))(EDGE_A,
                                                                                   EDGE_X)
    err = _error(got, getattr(ss, name)(EDGE_A, EDGE_X), 1e-300)
    assert err.max() <= 2e-13, f"{err.max():.2e} at {EDGE_A[err.argmax()]}, " \
                               f"{EDGE_X[err.argmax()]}"


def test_incomplete_gamma_gradient_at_infinity(backend):
    """The density x^(a-1) e^-x / Gamma(a) is 0 at x = inf, not exp(inf - inf)."""
    x = np.array([np.inf, 1e300, 3.0])
    got = dl.grad(_in_kernel(lambda x: x.__array_namespace__().special.gammaincc(2.5, x).sum()))(x)
    assert_close(got, [0.0, 0.0, -np.exp(1.5 * np.log(3.0) - 3.0 - ss.gammaln(2.5))], rtol=1e-13)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py", "zeta"])
def test_nan_where_scipy_gives_nan(backend, name):
    """x = 0 makes xlogy 0 unless y is NaN; Hurwitz's zeta is NaN below x = 1 in SciPy."""
    x = np.array([0.0, 0.0, 0.0, 0.0, 0.5, 2.0])
    y = np.array([np.nan, 0.0, np.inf, -3.0, 2.0, np.nan])
    got = dl.jit(lambda x, y: getattr(x.__array_namespace__().special, name)(x, y))(x, y)
    assert _error(got, getattr(ss, name)(x, y), 1e-300).max() <= 5e-16


@pytest.mark.parametrize("name", ["i0", "i1", "i0e", "i1e", "exprel"])
def test_near_overflow(backend, name):
    """Finite where an intermediate exp(|x|) overflows first (i0 = i0e exp(|x|) was inf * 0 at
    1e308, float32's i0(90) and exprel(90) inf), and the asymptotic series' 2 pi x not
    overflowing (i0e(1e308) was 0)."""
    def fn(x):
        return getattr(x.__array_namespace__().special, name)(x)

    x = np.array([1e308, -1e308, 1e300, 700.0, -705.0])
    assert _error(dl.jit(fn)(x), getattr(ss, name)(x), 1e-300).max() <= 5e-15
    x32 = np.array([90.0, -88.5, 60.0, 3.0], np.float32)
    got = dl.jit(fn)(x32)
    assert got.dtype == np.float32
    assert _error(got, getattr(ss, name)(x32.astype(np.float64)), 1e-300).max() <= 2e-6


def test_sinc_gradient_near_zero(backend):
    """(pi x cos(pi x) - sin(pi x)) / (pi x^2), the quotient's derivative, cancels near 0."""
    x = np.array([1e-7, -3e-4, 0.02, -0.0999, 0.1, 0.3])
    got = dl.grad(_in_kernel(lambda x: x.__array_namespace__().special.sinc(x).sum()))(x)
    expected = _mp(lambda mp, x: mp.diff(lambda t: mp.sinc(mp.pi * t), x), x)
    assert_close(got, expected, rtol=1e-13, atol=1e-300)


def test_ndtri_subnormal_tail(backend):
    """erfc of the root is subnormal there: the root is found from log erfc (ndtri(5e-324)
    was 1.2e-4 off)."""
    p = np.array([5e-324, 1e-320, 1e-310, 2.2250738585072014e-308, 1e-300, 1 - 1e-16])
    got = dl.jit(lambda p: p.__array_namespace__().special.ndtri(p))(p)
    assert _error(got, ss.ndtri(p), 1e-300).max() <= 3e-14


def test_boxcox_gradient_in_x_far_below_zero(backend):
    """x^(lambda - 1) where expm1(lambda log x) is -1 to the last bit: expm1's derivative as
    expm1(t) + 1 was 0 there."""
    x, lmbda = np.array([1e10, 319.0, 3.0]), np.array([-3.0, -1.86, 0.4])
    got = dl.grad(_in_kernel(lambda x: x.__array_namespace__().special.boxcox(x, lmbda).sum()))(x)
    assert_close(got, _mp(lambda mp, x, l: x ** (l - 1), x, lmbda), rtol=1e-14, atol=1e-300)
