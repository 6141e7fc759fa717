"""STAGE 4 — a correctly rounded float division built from a division that is only close.

Vulkan lets OpFDiv be 2.5 ulps off in float32, and a float64 one only as precise as float32
(NVIDIA's driver is not correctly rounded), while NumPy's floor division is pinned bit for
bit: for quotients of 2^p and more it is the correctly rounded quotient itself. Where
caps.rounded_division is False, legalize() builds floor division and modulo on div_rn(), and
gives each quotient and square root of kernel/mathlib.py a Newton step (div_refined,
sqrt_refined), whose error bounds assume rounded ones.

div_rn(a, b): |a| and |b| are scaled by powers of two into [1, 2) (exact, and only adds,
compares, selects and multiplications by powers of two: no 64-bit integers needed). Two
Newton steps q += (ma - q mb) / mb, with the residual from Dekker's exact product, take a
quotient with relative error up to 2^-20 to within half an ulp plus 2^-30 ulps (each step
squares the error), so q is a faithful rounding; then the residual ma - q mb is a float and
is computed exactly (Boldo and Daumas), and comparing it with half an ulp times mb moves q
to its neighbour where the true quotient lies past the midpoint (never on it: a quotient
of two p-bit numbers is never a midpoint). Only adds, subtracts and multiplies must be
correctly rounded and unfused (the Vulkan renderer marks them NoContraction).
"""

import numpy as np

# (mantissa bits p, exponent steps that bring any positive finite float into [1, 2)).
_FORMAT = {4: (24, (64, 32, 16, 8, 4, 2, 1), (64, 64, 32, 16, 8, 4, 2, 1)),
           8: (53, (512, 256, 128, 64, 32, 16, 8, 4, 2, 1),
               (512, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1))}
NEWTON_STEPS = 2


def _normalize(e, x):
    """(m, k): x = m 2^k with m in [1, 2), k a float holding an integer; x positive and
    finite (subnormal too)."""
    _, shrink, grow = _FORMAT[x.dtype.itemsize]
    zero = e.const(0.0, x.dtype)
    k = zero
    for s in shrink:
        big = x >= 2.0 ** s
        x = e.select(big, x * 2.0 ** -s, x)
        k = k + e.select(big, float(s), zero)
    for s in grow:
        small = x < 2.0 ** (1 - s)
        x = e.select(small, x * 2.0 ** s, x)
        k = k - e.select(small, float(s), zero)
    return x, k


def _scale(e, q, k):
    """q 2^k for q in [1/2, 2] and an integer k (a float) whose result is normal or
    overflows: each step is exact or makes the infinity the result rounds to."""
    _, shrink, _ = _FORMAT[q.dtype.itemsize]
    top, zero = shrink[0], e.const(0.0, q.dtype)
    for s in (2 * top, 2 * top) + shrink:
        for sign in (1.0, -1.0):
            hit = k * sign >= s
            factor = 2.0 ** (sign * min(s, top))
            scaled = q * factor
            if s > top:                             # 2^s itself is not a float
                scaled = scaled * factor
            q = e.select(hit, scaled, q)
            k = k - e.select(hit, sign * s, zero)
    return q


def _split(a):
    c = a * (2.0 ** ((_FORMAT[a.dtype.itemsize][0] + 1) // 2) + 1.0)     # Veltkamp
    hi = c - (c - a)
    return hi, a - hi


def _residual(q, a, b):
    """a - q b, the subtraction rounded once; exact when q is a faithful rounding of a / b."""
    p = q * b
    qh, ql = _split(q)
    bh, bl = _split(b)
    err = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl           # q b = p + err exactly
    return (a - p) - err                                          # a - p: exact (Sterbenz)


def div_rn(e, a, b):
    """a / b correctly rounded, for finite nonzero a and b whose quotient is not
    subnormal (it may overflow)."""
    bits = _FORMAT[a.dtype.itemsize][0]
    ma, ka = _normalize(e, e.op("abs", a))
    mb, kb = _normalize(e, e.op("abs", b))
    q = ma / mb                                                   # in (1/2, 2)
    for _ in range(NEWTON_STEPS):
        q = q + _residual(q, ma, mb) / mb
    r = _residual(q, ma, mb)
    up = e.select(q >= 2.0, 2.0 ** (2 - bits), e.select(q >= 1.0, 2.0 ** (1 - bits),
                                                        e.const(2.0 ** -bits, q.dtype)))
    down = e.select(q > 1.0, 2.0 ** (1 - bits), e.select(q > 0.5, 2.0 ** -bits,
                                                         e.const(2.0 ** (-1 - bits), q.dtype)))
    q = e.select(r > mb * (0.5 * up), q + up, e.select(-r > mb * (0.5 * down), q - down, q))
    q = _scale(e, q, ka - kb)
    return e.select((a < 0.0) ^ (b < 0.0), -q, q)


def signed_zero(e, x, y):
    """0 with the sign of x / y (sign bits, so -0.0 counts), without dividing."""
    negative = (e.op("copysign", 1.0, x) < 0.0) ^ (e.op("copysign", 1.0, y) < 0.0)
    return e.op("copysign", 0.0, e.select(negative, -1.0, e.const(1.0, x.dtype)))


def div_by_zero(e, x, y):
    """x / y for y = +-0: NaN for x zero or NaN, else an infinity signed as x / y."""
    inf = e.op("copysign", np.inf, signed_zero(e, x, y))
    return e.select(x.ne(x) | x.eq(0.0), np.nan, inf)


def _safe(e, *values):
    """Each |value| within 2^(+-(emax - 2p)): Dekker's split cannot overflow, and its error
    terms are not subnormal."""
    info = np.finfo(values[0].dtype)
    lo, hi = 2.0 ** (info.minexp + 2 * (info.nmant + 1)), 2.0 ** (info.maxexp - info.nmant - 1)
    safe = e.const(True, bool)
    for v in values:
        av = e.op("abs", v)
        safe = safe & (av >= lo) & (av <= hi)
    return safe


def _near_one(e, x):
    """(x s, s, 1 / s) with s a power of two that brings |x| from beyond 2^(+-0.4 emax)
    back inside (exact), for Newton steps on values of any magnitude."""
    edge = np.finfo(x.dtype).maxexp
    near, far = 2.0 ** (edge * 2 // 5), 2.0 ** (edge * 3 // 5)
    ax = e.op("abs", x)
    small, big, one = ax < 1.0 / near, ax > near, e.const(1.0, x.dtype)
    s = e.select(small, far, e.select(big, 1.0 / far, one))
    return x * s, s, e.select(small, 1.0 / far, e.select(big, far, one))


def div_refined(e, a, b):
    """a / b within half an ulp and a hair (a Newton step from a division a few ulps off),
    for kernel/mathlib.py's quotients, whose error bounds assume a rounded division. The
    operands are scaled near 1 first; the plain quotient is kept where they still are not
    _safe (only in float32, or at zeros, infinities and NaN). Subnormal quotients may round
    twice."""
    (sa, _, ia), (sb, scale_b, _) = _near_one(e, a), _near_one(e, b)
    q = sa / sb
    refined = q + _residual(q, sa, sb) / sb
    q = e.select(_safe(e, sa, sb, q), refined, q)
    # Scales that cancel are not applied at all: one at a time, they could overflow.
    return e.select((ia * scale_b).eq(1.0), q, q * ia * scale_b)


def sqrt_refined(e, x):
    """sqrt(x) within half an ulp and a hair, from one a few ulps off (Vulkan's)."""
    s = e.op("sqrt", x)
    p = s * s
    sh, sl = _split(s)
    err = ((sh * sh - p) + 2.0 * sh * sl) + sl * sl                # s^2 = p + err exactly
    refined = s + ((x - p) - err) / (2.0 * s)
    return e.select(_safe(e, x, s), refined, s)
