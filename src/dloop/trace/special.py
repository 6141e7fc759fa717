"""STAGE 1 — `xp.special` of the traced namespace, found by SciPy as it finds `torch.special`:
special functions with their derivatives, elementwise, in every backend's kernels. The
non-elementary ones are primitives expanded at lowering (ir/special.py); the rest are written
here from them. Where a formula is only finite on part of the domain, each branch of `where`
gets an argument that is safe there, so that no NaN reaches the gradient of the other."""

import math

import numpy as np

from ..errors import DloopNotImplementedError, DloopTypeError
from ..ir.special import BERNOULLI, SHIFT, ZETA_REFLECT
from . import ops
from .ops import where
from ..source import user_location

_SQRT2 = math.sqrt(2.0)


def _float(*xs):
    xs = [ops._check_operand(x) for x in xs]
    dt = ops._floating(ops.result_dtype(*xs))
    if dt.kind == "c":
        raise DloopTypeError(f"xp.special's functions take real values, got {dt.name}; apply "
                             "them to xp.real(z), xp.imag(z) or xp.abs(z)", user_location())
    return [ops.convert(x, dt) for x in xs]


def _prim(name, x, **params):
    (x,) = _float(x)
    return ops._apply(name, [x], **params)


def _safe(cond, x, value):
    return where(cond, x, value)


def _lt(a, b):
    return ops.compare("lt", a, b)


def _gt(a, b):
    return ops.compare("gt", a, b)


def _eq(a, b):
    return ops.compare("eq", a, b)


def _and(a, b):
    return ops.logical_op("and", a, b)


def _log(x):
    return ops.unary("log", x, float_only=True)


def _exp(x):
    return ops.unary("exp", x, float_only=True)


def _horner(t, coefs):
    """coefs[0] + coefs[1] t + coefs[2] t^2 + ..."""
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = ops.add(ops.multiply(t, out), c)
    return out


def erf(x):
    return _prim("erf", x)


def erfc(x):
    return _prim("erfc", x)


def erfinv(x):
    return _prim("erfinv", x)


def ndtri(x):
    return _prim("ndtri", x)


def gammaln(x):
    return _prim("gammaln", x)


def digamma(x):
    return _prim("polygamma", x, n=0)


psi = digamma


def polygamma(n, x):
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise DloopNotImplementedError("polygamma needs its order n as a non-negative Python "
                                       "int on traced arrays", user_location())
    return _prim("polygamma", x, n=int(n))


def gammainc(a, x):
    a, x = _float(a, x)
    return ops._apply("gammainc", [a, x])


def gammaincc(a, x):
    a, x = _float(a, x)
    return ops._apply("gammaincc", [a, x])


def chdtr(v, x):
    v, x = _float(v, x)        # first: v * 0.5 of a Python float v was a float64 constant
    return gammainc(ops.multiply(v, 0.5), ops.multiply(x, 0.5))


def chdtrc(v, x):
    v, x = _float(v, x)
    return gammaincc(ops.multiply(v, 0.5), ops.multiply(x, 0.5))


def zeta(x, q=None):
    """The Riemann zeta function, or Hurwitz's with q (NaN below x = 1, as in SciPy)."""
    if q is None:
        return _riemann_zeta(x)
    x, q = _float(x, q)
    return where(_lt(x, 1.0), math.nan, ops._apply("zeta", [x, q]))


def _sin_half_pi(s):
    """sin(pi s / 2), reduced before pi s is rounded: (-1)^n sin(pi f), s / 2 = n + f; exactly
    0 at the even integers."""
    h = ops.multiply(s, 0.5)
    n = ops.unary("round", h)
    sine = ops.unary("sin", ops.multiply(ops.subtract(h, n), math.pi), float_only=True)
    half_n = ops.multiply(n, 0.5)
    odd = ops.compare("ne", half_n, ops.unary("floor", half_n))
    return where(odd, ops.subtract(0.0, sine), sine)         # +0 at the zeros, as SciPy


def _gamma_over_2pi_power(z):
    """Gamma(z) (2 pi)^-z for z > 1 as (c, p), the value being c p^2: at w = z (z >= 10, else
    z + 10, and c divided by z (z+1) ... (z+9)), sqrt(2 pi / w) exp(stirling tail) and
    p = (w / (2 pi e))^(w/2). The power stays in two halves: it overflows before zeta's
    product does (zeta(-259) is 8.8e306)."""
    shift = _lt(z, float(SHIFT))
    w = where(shift, ops.add(z, float(SHIFT)), z)
    c = ops.multiply(ops.unary("sqrt", ops.divide(2 * math.pi, w), float_only=True),
                     _exp(_stirling_tail(w)))
    rising = 1.0
    for k in range(SHIFT):
        rising = ops.multiply(rising, ops.add(z, float(k)))
    c = where(shift, ops.divide(ops.multiply(c, (2 * math.pi) ** SHIFT),
                                _safe(shift, rising, 1.0)), c)
    return c, ops.power(ops.divide(w, 2 * math.pi * math.e), ops.multiply(w, 0.5))


def _riemann_zeta(s):
    """zeta(s) from the expansion (Euler-Maclaurin) down to ZETA_REFLECT; below, where its sum
    cancels, by the reflection zeta(s) = 2 Gamma(z) (2 pi)^-z sin(pi s / 2) zeta(z), z = 1 - s."""
    s, one = _float(s, 1.0)
    reflect = _lt(s, float(ZETA_REFLECT))
    direct = ops._apply("zeta", [_safe(reflect, 2.0, s), one])
    sr = _safe(reflect, s, -1.0)
    z = ops.subtract(1.0, sr)
    c, half = _gamma_over_2pi_power(z)
    sine = _sin_half_pi(sr)
    small = ops.multiply(ops.multiply(c, 2.0), ops.multiply(sine, ops._apply("zeta", [z, one])))
    reflected = ops.multiply(ops.multiply(small, half), half)
    # 0 * inf past s = -520 at the even integers, where zeta is 0.
    reflected = where(_and(_eq(sine, 0.0), _eq(half, math.inf)), 0.0, reflected)
    return where(reflect, reflected, where(_eq(s, math.inf), 1.0, direct))


def i0e(x):
    return _prim("i0e", x)


def i1e(x):
    return _prim("i1e", x)


def _unscaled(scaled, x):
    """scaled(x) exp(|x|), as (scaled(x) exp(|x|/2)) exp(|x|/2): exp(|x|) alone overflows
    where the product is still finite (i0 from 710 in float64, from 89 in float32)."""
    (x,) = _float(x)
    half = _exp(ops.multiply(ops.unary("abs", x), 0.5))
    return ops.multiply(ops.multiply(scaled(x), half), half)


def i0(x):
    return _unscaled(i0e, x)


def i1(x):
    return _unscaled(i1e, x)


def ndtr(x):
    (x,) = _float(x)
    return ops.multiply(erfc(ops.divide(x, -_SQRT2)), 0.5)


def log_ndtr(x):
    """log(ndtr(x)): log1p(-ndtr(-x)) above 0, log(ndtr(x)) down to -37 (where erfc is still
    a normal float; -10 in float32), then erfc's asymptotic form, with z = -x/sqrt(2):
    log(ndtr) = -z^2 - log(2 z sqrt(pi)) + log(1 - 1/(2z^2) + 3/(4z^4) - 15/(8z^6) + ...)."""
    (x,) = _float(x)
    # float32's ndtr underflows near -13: its series starts at -10, where 5 terms are exact
    # to float32 (the next is 1e-7 of the result).
    cut = -37.0 if x.dtype == np.float64 else -10.0
    far, positive = _lt(x, cut), _gt(x, 0.0)
    upper = ops.unary("log1p", ops.multiply(ndtr(ops.multiply(_safe(positive, x, 0.0), -1.0)),
                                            -1.0), float_only=True)
    middle = _log(ndtr(_safe(far, cut, x)))
    z = ops.divide(_safe(far, x, cut - 3.0), -_SQRT2)
    w = ops.divide(1.0, ops.multiply(z, z))
    series = 0.0
    for coef in (105 / 16, -15 / 8, 3 / 4, -1 / 2):
        series = ops.add(coef, ops.multiply(w, series))
    series = ops.add(1.0, ops.multiply(w, series))
    tail = ops.add(ops.subtract(ops.multiply(ops.multiply(z, z), -1.0),
                                _log(ops.multiply(z, 2 * math.sqrt(math.pi)))), _log(series))
    return where(positive, upper, where(far, tail, middle))


def expit(x):
    """1 / (1 + exp(-x)), each side written with exp of a non-positive argument only."""
    (x,) = _float(x)
    negative = _lt(x, 0.0)
    e_neg = _exp(_safe(negative, x, 0.0))
    e_pos = _exp(ops.multiply(_safe(negative, 0.0, x), -1.0))
    return where(negative, ops.divide(e_neg, ops.add(e_neg, 1.0)),
                 ops.divide(1.0, ops.add(e_pos, 1.0)))


def logit(p):
    (p,) = _float(p)
    return ops.subtract(_log(p), ops.unary("log1p", ops.multiply(p, -1.0), float_only=True))


def _x_times(x, log_of_y, y, low):
    """x * log_of_y(y), defined as 0 where x = 0 even if the log is not finite (y <= low or
    y = inf); elsewhere the plain product, so that its derivative in x is log_of_y(y)."""
    x, y = _float(x, y)
    # y <= low or y = inf rather than "log not finite": a NaN y keeps the product, NaN, as
    # in SciPy.
    infinite = ops.logical_op("or", ops.compare("le", y, low), _eq(y, math.inf))
    special = _and(_eq(x, 0.0), infinite)
    product = ops.multiply(x, log_of_y(_safe(special, 1.0, y)))
    return where(special, 0.0, product)


def xlogy(x, y):
    return _x_times(x, _log, y, 0.0)


def xlog1py(x, y):
    return _x_times(x, lambda y: ops.unary("log1p", y, float_only=True), y, -1.0)


def _stirling_tail(z):
    """log Gamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2), for z >= 10."""
    inv = ops.divide(1.0, z)
    inv2, out = ops.multiply(inv, inv), 0.0
    for k, b in reversed(list(enumerate(BERNOULLI[:7], start=1))):
        out = ops.add(ops.multiply(out, inv2), b / (2 * k * (2 * k - 1)))
    return ops.multiply(out, inv)


def betaln(a, b):
    """gammaln(a) + gammaln(b) - gammaln(a + b); where the larger argument L is 10 or more,
    gammaln(L) - gammaln(L + s) from Stirling's formula as a difference, since the plain
    sum cancels (1e6 - 1e6 + 4.5 at L = 1e5, s = 0.01: every ulp of 1e6 is 3e-11 of it)."""
    a, b = _float(a, b)
    plain = ops.subtract(ops.add(gammaln(a), gammaln(b)), gammaln(ops.add(a, b)))
    first = _gt(a, b)
    big, small = where(first, a, b), where(first, b, a)
    use = _and(_and(ops.compare("ge", big, float(SHIFT)), _lt(big, math.inf)),
               _gt(small, 0.0))
    big, small = _safe(use, big, float(SHIFT)), _safe(use, small, 1.0)
    total = ops.add(big, small)
    diff = ops.add(ops.subtract(small, ops.add(
        ops.multiply(ops.subtract(big, 0.5), ops.unary("log1p", ops.divide(small, big))),
        ops.multiply(small, _log(total)))), ops.subtract(_stirling_tail(big),
                                                         _stirling_tail(total)))
    return where(use, ops.add(gammaln(small), diff), plain)


# sin(z) / z = sum (-1)^k z^2k / (2k+1)!, for |z| < pi / 10: the quotient's derivative
# (z cos z - sin z) / z^2 cancels there (-z/3 from terms of order z).
_SINC_CUT = 0.1
_SIN_OVER = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(7)]


def sinc(x):
    """sin(pi x) / (pi x); by its series below |x| = 0.1, so that its derivative is right
    near 0."""
    (x,) = _float(x)
    near = _lt(ops.unary("abs", x), _SINC_CUT)
    px = ops.multiply(_safe(near, 1.0, x), math.pi)
    z = ops.multiply(_safe(near, x, 0.0), math.pi)
    series = _horner(ops.multiply(z, z), _SIN_OVER)
    return where(near, series, ops.divide(ops.unary("sin", px, float_only=True), px))


def entr(x):
    (x,) = _float(x)
    pos = _gt(x, 0.0)
    inside = ops.multiply(ops.multiply(x, -1.0), _log(_safe(pos, x, 1.0)))
    return where(pos, inside, where(_eq(x, 0.0), 0.0, where(_lt(x, 0.0), -math.inf, x)))


def rel_entr(x, y):
    x, y = _float(x, y)
    both = _and(_gt(x, 0.0), _gt(y, 0.0))
    # log1p((x - y) / y) where x is near y: x - y is exact there, where log(x / y) loses
    # digits. Elsewhere log(x / y): (x - y) / y rounds to -1 once x / y < eps (log1p(-1) is
    # -inf) and loses the digits of x / y below 1e-3; log x - log y where x / y over- or
    # underflows.
    xs, ys = _safe(both, x, 1.0), _safe(both, y, 1.0)
    d = ops.divide(ops.subtract(xs, ys), ys)
    near = _lt(ops.unary("abs", d), 0.5)
    ratio = ops.divide(xs, ys)
    normal = _and(ops.compare("ge", ratio, float(np.finfo(ratio.dtype).tiny)),
                  _lt(ratio, math.inf))
    far = where(normal, _log(_safe(normal, ratio, 1.0)), ops.subtract(_log(xs), _log(ys)))
    inside = ops.multiply(x, where(near, ops.unary("log1p", _safe(near, d, 0.0),
                                                   float_only=True), far))
    zero = _and(_eq(x, 0.0), ops.compare("ge", y, 0.0))
    nan = ops.logical_op("or", ops.compare("ne", x, x), ops.compare("ne", y, y))
    return where(nan, math.nan, where(both, inside, where(zero, ops.convert(0.0, x.dtype),
                                                          math.inf)))


def kl_div(x, y):
    x, y = _float(x, y)
    both = _and(_gt(x, 0.0), _gt(y, 0.0))
    zero = _and(_eq(x, 0.0), ops.compare("ge", y, 0.0))
    extra = ops.subtract(y, _safe(both, x, 0.0))
    return where(both, ops.add(rel_entr(x, y), extra), where(zero, y, rel_entr(x, y)))


def huber(delta, r):
    delta, r = _float(delta, r)
    ar = ops.unary("abs", r)
    quad = ops.multiply(ops.multiply(r, r), 0.5)
    lin = ops.multiply(delta, ops.subtract(ar, ops.multiply(delta, 0.5)))
    out = where(ops.compare("le", ar, delta), quad, lin)
    return where(_lt(delta, 0.0), math.inf, out)


def pseudo_huber(delta, r):
    delta, r = _float(delta, r)
    ok = _gt(delta, 0.0)
    d = _safe(ok, delta, 1.0)
    ratio = ops.divide(r, d)
    out = ops.multiply(ops.multiply(d, d), ops.unary("expm1", ops.multiply(ops.unary(
        "log1p", ops.multiply(ratio, ratio), float_only=True), 0.5), float_only=True))
    return where(ok, out, where(_eq(delta, 0.0), ops.convert(0.0, out.dtype), math.inf))


# The series below for |t| < 0.1, where the quotients lose up to half the digits of their
# derivatives in lambda (t e^t - expm1(t), of order t^2, from terms of order t) and all of
# them at lambda = 0. The first term left out is below 1e-17 of the sum there.
_SERIES_CUT = 0.1
_EXPREL = [1.0 / math.factorial(k + 1) for k in range(10)]     # expm1(t) / t
_LOG1P_OVER = [(-1.0) ** k / (k + 1) for k in range(16)]       # log1p(t) / t


def boxcox(x, lmbda):
    """(x^lmbda - 1) / lmbda as expm1(lmbda log x) / lmbda; near lmbda log x = 0 as
    log(x) expm1(t) / t with t = lmbda log x by its series; log(x) at lmbda = 0."""
    x, lmbda = _float(x, lmbda)
    zero = _eq(lmbda, 0.0)
    logx = _log(x)
    t = ops.multiply(lmbda, logx)
    near = _lt(ops.unary("abs", t), _SERIES_CUT)              # false at 0 * inf = NaN
    l = _safe(ops.logical_op("or", zero, near), 1.0, lmbda)
    series = ops.multiply(logx, _horner(_safe(near, t, 0.0), _EXPREL))
    return where(near, series, where(zero, logx, ops.divide(
        ops.unary("expm1", ops.multiply(l, logx), float_only=True), l)))


def inv_boxcox(y, lmbda):
    """exp(log1p(lmbda y) / lmbda); near lmbda y = 0, exp(y log1p(t) / t) with t = lmbda y by
    its series; exp(y) at lmbda = 0."""
    y, lmbda = _float(y, lmbda)
    zero = _eq(lmbda, 0.0)
    t = ops.multiply(lmbda, y)
    near = _lt(ops.unary("abs", t), _SERIES_CUT)
    l = _safe(ops.logical_op("or", zero, near), 1.0, lmbda)
    series = ops.multiply(y, _horner(_safe(near, t, 0.0), _LOG1P_OVER))
    return _exp(where(near, series, where(zero, y, ops.divide(ops.unary(
        "log1p", ops.multiply(l, y), float_only=True), l))))


def cbrt(x):
    (x,) = _float(x)
    zero = _eq(x, 0.0)
    ax = ops.unary("abs", _safe(zero, 1.0, x))
    # Far from 1, |x| is scaled by 2^(-/+3k) and the root by 2^(+/-k), exactly: r^3 of the
    # Newton step overflowed near the largest float (cbrt(3.4e38f) was inf), and subnormals
    # kept too few bits (cbrt(5e-324) was 62 ulps off).
    k = 32 if ops.result_dtype(x) == np.float32 else 300
    large, small = _lt(2.0 ** (3 * k), ax), _lt(ax, 2.0 ** (-3 * k))
    scaled = where(large, ops.multiply(ax, 2.0 ** (-3 * k)),
                   where(small, ops.multiply(ax, 2.0 ** (3 * k)), ax))
    root = ops.power(scaled, 1.0 / 3.0)
    # One Newton step on r^3 = |x| takes pow's rounding of 1/3 out of the result.
    refined = ops.subtract(root, ops.divide(ops.subtract(ops.multiply(ops.multiply(
        root, root), root), scaled), ops.multiply(ops.multiply(root, root), 3.0)))
    root = where(_lt(scaled, math.inf), refined, root)
    root = where(large, ops.multiply(root, 2.0 ** k),
                 where(small, ops.multiply(root, 2.0 ** -k), root))
    return where(zero, x, ops.binary("copysign", root, x, float_only=True))


def exprel(x):
    """expm1(x) / x; below |x| = 1e-5 its series 1 + x/2 + x^2/6, exact there and with the
    right derivative at 0. Above 50, where expm1(x) is exp(x) to the last bit, exp(x/2)
    (exp(x/2) / x): exp(x) overflows before the quotient does (float32's exprel(90) is
    1.4e37)."""
    (x,) = _float(x)
    small, big = _lt(ops.unary("abs", x), 1e-5), _gt(x, 50.0)
    s = _safe(ops.logical_op("or", small, big), 1.0, x)
    series = ops.add(1.0, ops.multiply(x, ops.add(0.5, ops.multiply(x, 1.0 / 6.0))))
    b = _safe(big, x, 50.0)
    half = _exp(ops.multiply(b, 0.5))
    out = where(small, series, where(big, ops.multiply(half, ops.divide(half, b)), ops.divide(
        ops.unary("expm1", s, float_only=True), s)))
    return where(_eq(x, math.inf), math.inf, out)


def multigammaln(a, d):
    (a,) = _float(a)
    out = d * (d - 1) / 4.0 * math.log(math.pi)
    for j in range(d):
        out = ops.add(gammaln(ops.subtract(a, j / 2.0)), out)
    return out


# What __array_ufunc__ maps scipy.special's ufuncs (and np.cbrt) onto, by name.
FUNCTIONS = {name: fn for name, fn in dict(globals()).items()
             if callable(fn) and not name.startswith("_") and fn.__module__ == __name__}
