"""STAGE 2 — special functions as expansions into elementwise primitives, so that every backend
runs them inside kernels with no code of its own. Each takes `m`, which applies a primitive
(m.op(name, *args)) and makes a literal of an operand's dtype (m.lit(value, like)); the NumPy
reference (ir/semantics.py) and the kernel lowering (kernel/lower.py) each supply one. Both
branches of every `select` are computed, so each branch must only be finite where it is chosen.

Methods (standard; no code taken from a library): positive-term power series where they
converge without cancellation, continued fractions or asymptotic series for large arguments,
argument shifts by recurrence, and Halley's iteration for the inverses. Accuracy measured
against mpmath and SciPy is in docs/scipy.md."""

import math

SQRT_PI = math.sqrt(math.pi)
ERF_SERIES_TERMS = 60         # erf's series for |x| < 2: relative error below 1e-15
ERFC_FRACTION_DEPTH = 60      # erfc's continued fraction for x >= 2 (in erf)
ERFC_NEAR_DEPTH = 200         # and for x >= 1 (in erfc, relative error 4e-16 there)
SHIFT = 10                    # log-gamma and digamma: recur up to x >= 10, then Stirling
BESSEL_SERIES_TERMS = 80      # I0, I1 power series for |x| <= 20
BESSEL_ASYMPTOTIC_TERMS = 30  # their asymptotic series beyond
# Bernoulli numbers B_2 .. B_16, for the asymptotic series of log-gamma and the polygammas.
BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


class _Ops:
    """Arithmetic sugar over m, so that the formulas below read as formulas."""

    def __init__(self, m, like):
        self.m, self.like = m, like

    def __call__(self, name, *args):
        return self.m.op(name, *(self.c(a) for a in args))

    def c(self, a):
        return self.m.lit(a, self.like) if isinstance(a, (int, float)) else a

    def where(self, cond, a, b):
        return self("select", cond, a, b)


def _exp_neg_square(o, x):
    """exp(-x*x) without the rounding of x*x: x = hi + lo with hi a multiple of 1/16 (so hi*hi
    is exact), exp(-x^2) = exp(-hi^2) exp(-(x - hi)(x + hi))."""
    x = o("min", x, 40.0)                    # exp(-1600) is 0 already; keeps inf out of x - hi
    hi = o("div", o("floor", o("mul", x, 16.0)), 16.0)
    return o("mul", o("exp", o("neg", o("mul", hi, hi))),
             o("exp", o("neg", o("mul", o("sub", x, hi), o("add", x, hi)))))


def _erf_series(o, x):
    """erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)): positive terms."""
    x2 = o("mul", x, x)
    term = total = x
    for n in range(1, ERF_SERIES_TERMS + 1):
        term = o("mul", term, o("mul", x2, 2.0 / (2 * n + 1)))
        total = o("add", total, term)
    return o("mul", o("mul", total, _exp_neg_square(o, x)), 2.0 / SQRT_PI)


def _erfc_denominator(o, x, depth):
    """t = x + (1/2)/(x + 1/(x + (3/2)/(x + ...))), evaluated from the tail: erfc(x) =
    exp(-x^2) / (sqrt(pi) t)."""
    t = x
    for k in range(depth, 0, -1):
        t = o("add", x, o("div", o.c(k / 2.0), t))
    return t


def _erfc_fraction(o, x, depth=ERFC_FRACTION_DEPTH):
    """erfc(x) for x >= 2 by its continued fraction."""
    return o("div", _exp_neg_square(o, x), o("mul", _erfc_denominator(o, x, depth), SQRT_PI))


def erf(m, x):
    o = _Ops(m, x)
    ax = o("abs", x)
    small = o("lt", ax, 2.0)
    big = o("copysign", o("sub", 1.0, _erfc_fraction(o, ax)), x)
    return o.where(small, _erf_series(o, x), big)


def erfc(m, x):
    o = _Ops(m, x)
    ax = o("abs", x)
    tail = _erfc_fraction(o, o("max", ax, 1.0), ERFC_NEAR_DEPTH)
    near = o("sub", 1.0, _erf_series(o, x))
    return o.where(o("lt", ax, 1.0), near,
                   o.where(o("lt", x, 0.0), o("sub", 2.0, tail), tail))


def _halley(o, target, sign, y, c, steps):
    """Solve target(y) = c, where target' = sign * 2/sqrt(pi) exp(-y^2) (erf: +1, erfc: -1), so
    target'' = -2y target' and Halley's step is y -= f / (f' + y f)."""
    for _ in range(steps):
        f = o("sub", target(o, y), c)
        d = o("mul", _exp_neg_square(o, y), sign * 2.0 / SQRT_PI)
        y = o("sub", y, o("div", f, o("add", d, o("mul", y, f))))
    return y


def _initial_inverse(o, log_one_minus_x2, sign_of):
    """Winitzki's closed-form approximation of erfinv (relative error about 2e-3), from
    L = log(1 - x^2) computed by the caller without cancellation."""
    a = 0.147
    b = o("add", 2.0 / (math.pi * a), o("mul", log_one_minus_x2, 0.5))
    inner = o("sub", o("sqrt", o("sub", o("mul", b, b), o("div", log_one_minus_x2, a))), b)
    return o("copysign", o("sqrt", inner), sign_of)


def _erfcinv_small(o, c):
    """y > 0 with erfc(y) = c, for 0 < c <= 0.005 (y >= 1.99), by Halley's iteration on
    g(y) = log erfc(y) - log c: erfc(y) itself is subnormal below c = 2.2e-308, with too few
    bits for the root (ndtri(5e-324) was 1.2e-4 off). With erfc(y) = exp(-y^2) / (sqrt(pi) t),
    g' = -2t and g'' = 4t (y - t), so the step is y += g / (2t - g (y - t))."""
    log_c = o("log", c)
    log_term = o("log", o("mul", c, o("sub", 2.0, c)))        # log(1 - x^2), x = 1 - c
    y = _initial_inverse(o, log_term, o.c(1.0))
    for _ in range(4):
        t = _erfc_denominator(o, y, ERFC_NEAR_DEPTH)
        hi = o("div", o("floor", o("mul", y, 16.0)), 16.0)  # -y^2 as in _exp_neg_square
        log_erfc = o("sub", o("sub", o("neg", o("mul", hi, hi)),
                              o("mul", o("sub", y, hi), o("add", y, hi))),
                     o("log", o("mul", t, SQRT_PI)))
        g = o("sub", log_erfc, log_c)
        y = o("add", y, o("div", g, o("sub", o("mul", t, 2.0), o("mul", g, o("sub", y, t)))))
    return y


def _erfinv_central(o, x):
    """erfinv(x) for |x| < 0.995 (the root lies below 2, where the series is exact)."""
    start = _initial_inverse(o, o("log1p", o("neg", o("mul", x, x))), x)
    return _halley(o, _erf_series, 1.0, start, x, steps=3)


CENTRAL = 0.995


def erfinv(m, x):
    o = _Ops(m, x)
    ax = o("abs", x)
    central = o("lt", ax, CENTRAL)
    c = o("sub", 1.0, ax)                                     # exact for |x| >= 0.5
    tail = o("copysign", _erfcinv_small(o, o.where(o("or", central, o("le", c, 0.0)), 0.5, c)),
             x)
    out = o.where(central, _erfinv_central(o, o.where(central, x, 0.0)), tail)
    out = o.where(o("eq", ax, 1.0), o("copysign", math.inf, x), out)
    return o.where(o("gt", ax, 1.0), math.nan, out)


def ndtri(m, p):
    """ndtri(p) = sqrt(2) erfinv(2p - 1) in the middle (2p - 1 is exact for p >= 1/4), and
    -sqrt(2) erfcinv(2p) or sqrt(2) erfcinv(2 - 2p) in the tails."""
    o = _Ops(m, p)
    x = o("sub", o("mul", p, 2.0), 1.0)
    central = o("lt", o("abs", x), CENTRAL)
    low = o("lt", x, 0.0)
    c = o.where(low, o("mul", p, 2.0), o("sub", 2.0, o("mul", p, 2.0)))
    y = _erfcinv_small(o, o.where(o("or", central, o("le", c, 0.0)), 0.5, c))
    out = o.where(central, _erfinv_central(o, o.where(central, x, 0.0)),
                  o.where(low, o("neg", y), y))
    out = o("mul", out, math.sqrt(2.0))
    out = o.where(o("eq", p, 0.0), -math.inf, o.where(o("eq", p, 1.0), math.inf, out))
    return o.where(o("or", o("lt", p, 0.0), o("gt", p, 1.0)), math.nan, out)


def _frac(o, x):
    """x - round(x), exact: sin(pi x) and tan(pi x) reduced before pi x is rounded (|sin| and tan
    have period 1 in x)."""
    return o("sub", x, o("round", x))


def _stirling(o, z):
    """log Gamma(z) for z >= 10:
    (z - 1/2) log z - z + log(2 pi)/2 + sum_k B_2k / (2k (2k-1) z^(2k-1))."""
    out = o("add", o("sub", o("mul", o("sub", z, 0.5), o("log", z)), z),
            0.5 * math.log(2 * math.pi))
    inv = o("div", 1.0, z)
    inv2 = o("mul", inv, inv)
    power = inv
    for k, b in enumerate(BERNOULLI[:7], start=1):
        out = o("add", out, o("mul", power, b / (2 * k * (2 * k - 1))))
        power = o("mul", power, inv2)
    return out


def _shifted(o, x):
    """(x + SHIFT, x (x+1) ... (x+SHIFT-1)), for the recurrences Gamma(x+1) = x Gamma(x)."""
    product = x
    for k in range(1, SHIFT):
        product = o("mul", product, o("add", x, float(k)))
    return o("add", x, float(SHIFT)), product


def gammaln(m, x):
    """log|Gamma(x)|: Stirling above 10, shifted up below, reflected for x <= 0."""
    o = _Ops(m, x)

    def positive(z):
        big = o("ge", z, float(SHIFT))
        safe_small = o.where(big, 1.0, z)
        z_up, product = _shifted(o, safe_small)
        shifted = o("sub", _stirling(o, z_up), o("log", o("abs", product)))
        return o.where(big, _stirling(o, o.where(big, z, float(SHIFT))), shifted)

    reflected_arg = o("sub", 1.0, x)
    sine = o("abs", o("sin", o("mul", _frac(o, x), math.pi)))
    reflected = o("sub", o("log", o("div", math.pi, sine)),
                  positive(o.where(o("gt", x, 0.0), 1.0, reflected_arg)))
    out = o.where(o("gt", x, 0.0), positive(o.where(o("gt", x, 0.0), x, 1.0)), reflected)
    pole = o("and", o("le", x, 0.0), o("eq", x, o("floor", x)))
    # +inf too: Stirling's (x - 1/2) log x - x is inf - inf there; -inf is SciPy's -inf.
    out = o.where(o("or", pole, o("eq", x, math.inf)), math.inf, out)
    return o.where(o("eq", x, -math.inf), -math.inf, out)


def _digamma_asymptotic(o, z):
    """psi(z) = log z - 1/(2z) - sum B_2k / (2k z^2k), for z >= 10."""
    inv2 = o("div", 1.0, o("mul", z, z))
    out = o("sub", o("log", z), o("div", 0.5, z))
    power = inv2
    for k, b in enumerate(BERNOULLI, start=1):
        out = o("sub", out, o("mul", power, b / (2 * k)))
        power = o("mul", power, inv2)
    return out


def _digamma_positive(o, x):
    big = o("ge", x, float(SHIFT))
    small = o.where(big, 1.0, x)
    total = _digamma_asymptotic(o, o("add", small, float(SHIFT)))
    for k in range(SHIFT):
        total = o("sub", total, o("div", 1.0, o("add", small, float(k))))
    return o.where(big, _digamma_asymptotic(o, o.where(big, x, float(SHIFT))), total)


def digamma(m, x):
    """psi(x); reflected for x < 0: psi(x) = psi(1 - x) - pi / tan(pi x)."""
    o = _Ops(m, x)
    positive = o("gt", x, 0.0)
    direct = _digamma_positive(o, o.where(positive, x, 1.0))
    reflected = o("sub", _digamma_positive(o, o.where(positive, 1.0, o("sub", 1.0, x))),
                  o("div", math.pi, o("tan", o("mul", _frac(o, x), math.pi))))
    out = o.where(positive, direct, reflected)
    out = o.where(o("eq", x, 0.0), o("div", -1.0, x), out)     # -inf at +0, +inf at -0
    integer = o("and", o("lt", x, 0.0), o("eq", x, o("floor", x)))
    return o.where(integer, math.nan, out)


def polygamma(m, x, *, n):
    """psi^(n)(x) for n >= 1 and x > 0: (-1)^(n+1) n! sum_k (x+k)^-(n+1) over a shift, then the
    asymptotic series (n-1)!/z^n + n!/(2 z^(n+1)) + sum B_2k (2k+n-1)!/((2k)! z^(2k+n))."""
    if n == 0:
        return digamma(m, x)
    o = _Ops(m, x)
    shift = SHIFT + 2 * n
    sign = -1.0 if n % 2 == 0 else 1.0

    def power(z, k):
        return o("pow", z, float(-k))

    def asymptotic(z):
        out = o("add", o("mul", power(z, n), float(math.factorial(n - 1))),
                o("mul", power(z, n + 1), math.factorial(n) / 2.0))
        for k, b in enumerate(BERNOULLI, start=1):
            coef = b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
            out = o("add", out, o("mul", power(z, 2 * k + n), coef))
        return out

    total = asymptotic(o("add", x, float(shift)))
    for k in range(shift):
        total = o("add", total, o("mul", power(o("add", x, float(k)), n + 1),
                                  float(math.factorial(n))))
    out = o("mul", total, sign)
    nonpositive_integer = o("and", o("le", x, 0.0), o("eq", x, o("floor", x)))
    return o.where(nonpositive_integer, math.inf if n % 2 == 1 else math.nan, out)


def _bessel_series(o, x, order):
    """I_order(x) for order 0 or 1: (x/2)^order sum_k (x^2/4)^k / (k! (k+order)!)."""
    q = o("mul", o("mul", x, x), 0.25)
    term = total = o.c(1.0)
    for k in range(1, BESSEL_SERIES_TERMS + 1):
        term = o("mul", term, o("mul", q, 1.0 / (k * (k + order))))
        total = o("add", total, term)
    return total if order == 0 else o("mul", total, o("mul", x, 0.5))


def _bessel_asymptotic(o, ax, order):
    """exp(-x) I_order(x) ~ 1/sqrt(2 pi x) sum_k (-1)^k a_k / x^k, a_k = prod_j (4 order^2 -
    (2j-1)^2) / (k! 8^k), for x > 20."""
    inv = o("div", 1.0, ax)
    coef, total, power = 1.0, o.c(1.0), o.c(1.0)
    for k in range(1, BESSEL_ASYMPTOTIC_TERMS + 1):
        coef *= -(4 * order * order - (2 * k - 1) ** 2) / (k * 8.0)
        power = o("mul", power, inv)
        total = o("add", total, o("mul", power, coef))
    # sqrt(x) sqrt(2 pi): 2 pi x overflows above 2.8e307, where the result is still normal.
    return o("div", total, o("mul", o("sqrt", ax), math.sqrt(2 * math.pi)))


def _bessel_scaled(m, x, order):
    o = _Ops(m, x)
    ax = o("abs", x)
    big = o("gt", ax, 20.0)
    small_x = o.where(big, 0.0, x)
    series = o("mul", _bessel_series(o, small_x, order), o("exp", o("neg", o("abs", small_x))))
    asym = _bessel_asymptotic(o, o.where(big, ax, 21.0), order)
    if order == 1:
        asym = o("copysign", asym, x)
    return o.where(big, asym, series)


def i0e(m, x):
    return _bessel_scaled(m, x, 0)


def i1e(m, x):
    return _bessel_scaled(m, x, 1)


GAMMA_SERIES_TERMS = 200     # P(a, x) for x < a + 1 (accurate for a up to about 1000)
GAMMA_FRACTION_DEPTH = 100   # Q(a, x) for x >= a + 1


def _gamma_prefactor(o, a, x, a_shift):
    """x^a e^(-x) / Gamma(a + a_shift), through logarithms."""
    log_gamma = gammaln(o.m, o("add", a, float(a_shift)))
    return o("exp", o("sub", o("sub", o("mul", a, o("log", x)), x), log_gamma))


def _gamma_series(o, a, x):
    """P(a, x) = x^a e^-x / Gamma(a+1) sum_n x^n / ((a+1)...(a+n)): positive terms."""
    term = total = o.c(1.0)
    for n in range(1, GAMMA_SERIES_TERMS + 1):
        term = o("mul", term, o("div", x, o("add", a, float(n))))
        total = o("add", total, term)
    return o("mul", _gamma_prefactor(o, a, x, 1), total)


def _gamma_fraction(o, a, x):
    """Q(a, x) = x^a e^-x / Gamma(a) / (b0 - a1/(b1 - a2/(b2 - ...))), b_n = x + 2n + 1 - a,
    a_n = n (n - a), evaluated from the tail."""
    t = o("add", o("sub", x, a), float(2 * GAMMA_FRACTION_DEPTH + 1))
    for n in range(GAMMA_FRACTION_DEPTH, 0, -1):
        b = o("add", o("sub", x, a), float(2 * n - 1))
        t = o("sub", b, o("div", o("mul", o("sub", a, float(n)), -float(n)), t))
    return o("div", _gamma_prefactor(o, a, x, 0), t)


def _incomplete_gamma(m, a, x, upper):
    o = _Ops(m, x)
    series_side = o("lt", x, o("add", a, 1.0))
    xs = o.where(series_side, x, o("add", a, 0.5))
    xf = o.where(series_side, o("add", a, 2.0), x)
    p = _gamma_series(o, a, o("max", xs, 0.0))
    q = _gamma_fraction(o, a, xf)
    out = o.where(series_side, o("sub", 1.0, p) if upper else p, q if upper else o("sub", 1.0, q))
    # The edges, as SciPy gives them: a log(x) - x is inf - inf at x = inf and at a = inf, and
    # P(0, x) = 1 for x > 0 is SciPy's convention (the limit as a -> 0).
    lower_end, upper_end = (1.0, 0.0) if upper else (0.0, 1.0)
    out = o.where(o("eq", x, 0.0), lower_end, out)
    out = o.where(o("or", o("eq", a, 0.0), o("eq", x, math.inf)), upper_end, out)
    out = o.where(o("eq", a, math.inf), lower_end, out)
    ok = o("and", o("ge", x, 0.0), o("ge", a, 0.0))       # false for a NaN too
    corner = o("or", o("and", o("eq", a, 0.0), o("eq", x, 0.0)),
               o("and", o("eq", a, math.inf), o("eq", x, math.inf)))
    return o.where(o("and", ok, o("not", corner)), out, math.nan)


def gammainc(m, a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return _incomplete_gamma(m, a, x, upper=False)


def gammaincc(m, a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _incomplete_gamma(m, a, x, upper=True)


ZETA_TERMS = 10     # Hurwitz zeta: sum the first terms, then Euler-Maclaurin with 8 corrections
# The expansion's lowest s: below 1 its sum cancels (to 6e-15 of zeta(-0.1), 8e-14 of
# zeta(-1)); there Riemann's zeta reflects to 1 - s (trace/special.py).
ZETA_REFLECT = -0.1


def _zeta_terms(o, s, q, derivative):
    """Euler-Maclaurin for zeta(s, q) = sum_k (q+k)^-s, or (derivative) its derivative in s:
    sum_{k<N} (q+k)^-s + a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) a^(1-s-2j),
    with a = q + N."""
    def term(base, power):          # base^-power, or its derivative in s (power depends on s)
        value = o("pow", base, o("neg", power))
        return o("neg", o("mul", o("log", base), value)) if derivative else value

    total = o.c(0.0)
    for k in range(ZETA_TERMS):
        total = o("add", total, term(o("add", q, float(k)), s))
    a = o("add", q, float(ZETA_TERMS))
    s1 = o("sub", s, 1.0)
    tail = o("div", term(a, s1), s1)
    if derivative:
        tail = o("sub", tail, o("div", o("pow", a, o("neg", s1)), o("mul", s1, s1)))
    total = o("add", o("add", total, tail), o("mul", term(a, s), 0.5))
    rising = o.c(1.0)           # s (s+1) ... (s+2j-2), and its derivative in s
    d_rising = o.c(0.0)
    for j, b in enumerate(BERNOULLI, start=1):
        for i in ((0,) if j == 1 else (2 * j - 3, 2 * j - 2)):
            factor = o("add", s, float(i))
            d_rising = o("add", o("mul", d_rising, factor), rising)
            rising = o("mul", rising, factor)
        power = o("add", s, float(2 * j - 1))
        coef = b / math.factorial(2 * j)
        piece = o("mul", rising, term(a, power))
        if derivative:
            piece = o("add", piece, o("mul", d_rising, o("pow", a, o("neg", power))))
        total = o("add", total, o("mul", piece, coef))
    return total


def _zeta(m, s, q, derivative):
    o = _Ops(m, s)
    ok = o("and", o("ge", s, ZETA_REFLECT), o("gt", q, 0.0))
    out = _zeta_terms(o, o.where(ok, s, 2.0), o.where(ok, q, 1.0), derivative)
    out = o.where(ok, out, math.nan)
    return o.where(o("eq", s, 1.0), -math.inf if derivative else math.inf, out)


def zeta(m, s, q):
    """The Hurwitz zeta function sum_k (q+k)^-s for q > 0, continued below s = 1 down to
    ZETA_REFLECT (xp.special.zeta is NaN there but for Riemann's, q = 1)."""
    return _zeta(m, s, q, derivative=False)


def zeta_ds(m, s, q):
    """d/ds of the Hurwitz zeta function (the VJP of zeta in s)."""
    return _zeta(m, s, q, derivative=True)


EXPANSIONS = {"erf": erf, "erfc": erfc, "erfinv": erfinv, "ndtri": ndtri, "gammaln": gammaln,
              "polygamma": polygamma, "i0e": i0e, "i1e": i1e, "gammainc": gammainc,
              "gammaincc": gammaincc, "zeta": zeta, "zeta_ds": zeta_ds}
