"""STAGE 4 — software float math: the transcendentals as core ops (kernel/core.py), for
backends that lack them natively (SPIR-V's GLSL.std.450 has no float64 sin/exp/log) or have
only scalar ones (a SIMD renderer: LLVM splits vector sin into libm calls). legalize() calls
expansion() for each (op, dtype) that caps.native_math does not list.

Every function is straight-line code (selects, no branches) but the rare reductions of sin,
cos and tan: the four-part one near multiples of pi/2, and for |x| >= 2^20 the seven-part one
and, from 2^28, Payne-Hanek (794 of sin's 873 core ops) run under Emitter.branch, so only
where an element needs them (SIMD lanes and GPU threads beside such an element run them
masked; the Vulkan renderer emits them as selections, not loops).
Remainders by the constants 2 and 4 are exact without frem (_rem_pow2). float64:
  * exp, expm1, sinh, cosh, pow: x = k ln2 + r with Cody-Waite constants (k ln2_hi
    exact), a degree-16 Taylor polynomial for e^r - 1 (|r| <= 1/2), and 2^k applied in two
    exact halves, so overflow and subnormal results round once.
  * log family: x = 2^k m with m in [sqrt(2)/2, sqrt(2)) from the bits (subnormals scaled by
    2^54 first); log(m) = 2 atanh(s), s = (m-1)/(m+1), Taylor in s^2, combined as
    f - (f^2/2 - s (f^2/2 + R)) so the rounding errors stay in the small terms.
  * pow: log|x| and y log|x| in double-double (Veltkamp splitting, no FMA needed), then e^t
    with the low word folded into the reduced argument. C99 special cases, as NumPy.
  * sin, cos, tan: k = round(x 2/pi) and x - k pi/2 as a double-double, by Cody-Waite:
    below 2^20 with pi/2 as a 33-bit head and a float64 tail (in four parts, each k*part
    exact, near multiples of pi/2), below 2^28 in seven 24-bit parts; above, Payne-Hanek with
    the bits of 2/pi as 24-bit chunks chosen by x's exponent. Then Taylor kernels for sin and
    cos on [-pi/4, pi/4].
  * atan, atan2, asin, acos: a ratio u in [0, 1], c = floor(8u) / 8, atan(c) from a
    double-double table plus Taylor on (u - c) / (1 + c u); asin and acos go through atan2
    with sqrt(1 - x^2) as a double-double.
  * tanh: below 1, (e^(2x) - 1) / (e^(2x) + 1) with the series and the quotient in
    double-double; sinh, cosh, asinh, acosh, atanh: the usual expm1 / log1p identities.
float32: the float64 code (or the backend's native float64 op) on the widened argument,
rounded once to float32; but sin and cos, where the backend has float64: mathlib32.py. Where
it has not, mathlib32 runs exp, expm1, log and log1p from here in float32's own format
(FORMATS: its constants, series and ranges).

Measured error against NumPy (max ulps over 10^6 points per function, log-uniform magnitudes
over the whole range plus special values; tests/kernel/test_mathlib.py keeps each within the
bound in MAX_ULPS): see docs/math.md.
"""

from dataclasses import dataclass
from fractions import Fraction
from math import factorial

import numpy as np

from .core import TRANSCENDENTAL

F64, F32, I64 = np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int64)
INF, NAN = float("inf"), float("nan")

# Constants (mpmath, 400 bits). LN2_HI and LOG10_2_HI have 42 bits, so k * HI is exact for
# any exponent k; IVLN*_HI have 32 bits, to multiply a 21-bit head exactly.
LN2_HI, LN2_LO = 0.6931471805598903, 5.497923018708371e-14
LN2 = 0.6931471805599453
LOG2E = 1.4426950408889634
IVLN2_HI, IVLN2_LO = 1.4426950407214463, 1.6751713164886512e-10
IVLN10_HI, IVLN10_LO = 0.4342944818781689, 2.5082946711645275e-11
LOG10_2_HI, LOG10_2_LO = 0.30102999566395283, 2.8363394551044964e-14
SQRT2 = 1.4142135623730951
INVPIO2 = 0.6366197723675814
# pi/2 = sum of these, each with at most 24 significant bits (error < 3e-55).
PIO2_PARTS = (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15,
              1.056299898220315e-23, 8.478427566216846e-32, 9.415205271428978e-40,
              1.1687495018667348e-47)
# 2/pi = sum of C_j 2^(-24 (j + 1)) (mpmath, 1400 bits): enough for every float64 exponent.
TWO_OVER_PI_24 = (
    10680707, 7228996, 1387004, 2578385, 16069853, 12639074, 9804092, 4427841, 16666979,
    11263675, 12935607, 2387514, 4345298, 14681673, 3074569, 13734428, 16653803, 1880361,
    10960616, 8533493, 3062596, 8710556, 7349940, 6258241, 3772886, 3769171, 3798172,
    8675211, 12450088, 3874808, 9961438, 366607, 15675153, 9132554, 7151469, 3571407,
    2607881, 12013382, 4155038, 6285869, 7677882, 13102053, 15825725, 473591, 9065106,
    15363067, 6271263, 9264392)
HUGE_CHUNKS = 8
CODY_WAITE_LIMIT = 2.0 ** 28          # below it, the seven-part pi/2 reduction is exact
# pi/2 = sum of these, three of 33 significant bits and a float64 (error < 8e-49): below
# MEDIUM_LIMIT, |k| < 2^20 and each of the first three products k part is exact.
PIO2_MEDIUM = (1.5707963267341256, 6.077100506303966e-11, 2.0222662487111665e-21,
               8.4784276603689e-32)
MEDIUM_LIMIT = 2.0 ** 20
# pi/2 less PIO2_MEDIUM's head, rounded to float64: the two-part reduction's tail.
PIO2_MEDIUM_TAIL = float(sum(map(Fraction, PIO2_PARTS)) - Fraction(PIO2_MEDIUM[0]))
PI_HI, PI_LO = 3.141592653589793, 1.2246467991473532e-16
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17
PIO4 = 0.7853981633974483
ATAN_J8 = ((0.0, 0.0), (0.12435499454676144, -3.1253241424539383e-18),
           (0.24497866312686414, 1.0698755618734451e-17),
           (0.35877067027057225, -2.4623815582638635e-17),
           (0.4636476090008061, 2.2698777452961687e-17),
           (0.5585993153435624, -5.4556305485916264e-18),
           (0.6435011087932844, 1.5834785051444286e-17),
           (0.7188299996216245, -2.1478388444456983e-17),
           (0.7853981633974483, 3.061616997868383e-17))   # atan(j/8), hi and lo
TWO_THIRDS_HI, TWO_THIRDS_LO = 0.6666666666666666, 3.700743415417188e-17


EXP_SERIES = [1.0 / factorial(n) for n in range(2, 17)]                   # 1/2! .. 1/16!
SIN_S1 = -1.0 / 6.0
TANH_EXP_SERIES = [1.0 / factorial(n) for n in range(2, 26)]             # e^r, |r| <= 2
SINH_SERIES = [1.0 / factorial(2 * j + 1) for j in range(1, 10)]           # 1/3! .. 1/19!
SIN_SERIES = [(-1.0) ** j / factorial(2 * j + 1) for j in range(2, 9)]     # 1/5! .. 1/17!
COS_SERIES = [(-1.0) ** j / factorial(2 * j) for j in range(2, 9)]         # 1/4! .. 1/16!
LOG_SERIES = [2.0 / (2 * j + 1) for j in range(1, 13)]    # 2/3, 2/5, ..., 2/25
LOG_SERIES5 = LOG_SERIES[1:]                              # 2/5, 2/7, ...
ATAN_SERIES = [(-1.0) ** j / (2 * j + 1) for j in range(1, 10)]  # -1/3, 1/5, ..., 1/19


def split_bits(value, widths):
    """value (a Fraction) as floats of `widths` significant bits each, greedily: their sum
    is value to within the last part's rounding."""
    parts = []
    for bits in widths:
        scale = Fraction(2) ** (bits - 1 - (value.numerator.bit_length()
                                            - value.denominator.bit_length()))
        parts.append(float(Fraction(round(value * scale)) / scale))   # exact: <= 53 bits
        value -= Fraction(parts[-1])
    return tuple(parts)


def _exact(hi, lo):
    return Fraction(hi) + Fraction(lo)


@dataclass(frozen=True)
class Format:
    """What the code that works on a float's bits, and exp and log, need of its format
    (float32's: mathlib32 runs exp and log in it on devices without float64)."""
    int_t: np.dtype          # the integer of its width
    bits: int                # fraction bits
    bias: int                # exponent bias
    pre: int                 # subnormals are scaled by 2^pre before their bits are read
    split: float             # Veltkamp's 2^ceil(p / 2) + 1 (_two_prod)
    ln2: tuple               # (head, tail), k * head exact for every exponent k
    exp_series: list         # e^r - 1 from r^2 for |r| <= ln2 / 2
    expm1_series: list       # the same for |r| < 1/2
    log_series: list         # 2 atanh(s) / s - 2 from s^2 for |s| <= 0.172
    exp_range: tuple         # e^x is 0 below the first, infinite above the second
    expm1_range: tuple       # e^x - 1 is -1 below the first, e^x above the second
    expm1_cap: int           # 2^-k is below e^x - 1's ulp from k = expm1_cap
    tiny: float              # log1p(x) and expm1(x) round to x below it
    log_head: int            # a mask of the bits of a log1p head that times the next
    #                          three constants' heads is exact (fdlibm's log2 and log10)
    ivln2: tuple             # 1 / ln 2, (head, tail)
    ivln10: tuple            # 1 / ln 10
    log10_2: tuple           # log10(2), k * head exact for every exponent k
    two_thirds: tuple        # pow's log as a double-double: the s^3 term's coefficient
    pow_log_series: list     # and the rest of the series, from s^5


FORMATS = {
    F64: Format(I64, 52, 1023, 54, 134217729.0, (LN2_HI, LN2_LO), EXP_SERIES, EXP_SERIES,
                LOG_SERIES, (-746.0, 710.0), (-40.0, 40.0), 60, 2.0 ** -54, -(1 << 32),
                (IVLN2_HI, IVLN2_LO), (IVLN10_HI, IVLN10_LO), (LOG10_2_HI, LOG10_2_LO),
                (TWO_THIRDS_HI, TWO_THIRDS_LO), LOG_SERIES5),
    # ln 2 with a 16-bit head: k * head is exact for every float32 exponent (|k| < 2^8).
    F32: Format(np.dtype(np.int32), 23, 127, 24, 4097.0,
                split_bits(Fraction(LN2_HI) + Fraction(LN2_LO), (16, 24)),
                [1.0 / factorial(n) for n in range(2, 9)],         # to r^8: below 2^-30
                [1.0 / factorial(n) for n in range(2, 11)],        # to r^10
                [2.0 / (2 * j + 1) for j in range(1, 6)],          # to s^11
                (-104.0, 89.0), (-18.0, 18.0), 30, 2.0 ** -24,
                # fdlibm's log2f and log10f: a 12-bit head times 12-bit heads.
                -(1 << 12), split_bits(_exact(IVLN2_HI, IVLN2_LO), (12, 24)),
                split_bits(_exact(IVLN10_HI, IVLN10_LO), (12, 24)),
                split_bits(_exact(LOG10_2_HI, LOG10_2_LO), (16, 24)),
                split_bits(Fraction(2, 3), (24, 24)),
                LOG_SERIES5[:6]),                  # to s^15: below 2^-40 of the log
}


# -- small helpers over core.V values (float64 unless named) --

def _poly(x, coeffs):
    """coeffs[0] + coeffs[1] x + ..., Horner."""
    p = x * coeffs[-1] + coeffs[-2]
    for c in reversed(coeffs[:-2]):
        p = p * x + c
    return p


def _abs(e, x):
    return e.op("abs", x)


def _isnan(x):
    return x.ne(x)


def _signbit(e, x):
    return e.bitcast(x, FORMATS[x.dtype].int_t) < 0


def _min(e, x, bound):
    return e.select(x < bound, x, bound)


def _tiny(e, x, result, bound=2.0 ** -54):
    """x itself where |x| is so small that f(x) rounds to x (keeps -0.0 and subnormals)."""
    return e.select(_abs(e, x) < bound, x, result)


def _pow2(e, k, dtype=F64):
    """2^k of `dtype` for an integer k (of its width) in its normal exponents, built from
    the exponent field."""
    fmt = FORMATS[np.dtype(dtype)]
    return e.bitcast(e.op("ishl", k + fmt.bias, fmt.bits), dtype)


def _scale(e, y, k):
    """y * 2^k for y in [0.5, 2) and k up to twice the exponent range (|k| <= 1078 in
    float64), rounding once: two exact halves."""
    k1 = e.op("ishr", k, 1)
    return y * _pow2(e, k1, y.dtype) * _pow2(e, k - k1, y.dtype)


def _rem_pow2(e, x, p):
    """C's fmod(x, p) for a constant p = 2^j >= 1, without frem (Vulkan's frem is a loop with
    divisions): x - p t with t = trunc(x / p), given x's sign. Exact for every x:
    * x / p = x * 2^-j is exact, or underflows; then |x / p| < 1, so t = 0 however it rounded.
    * p t is an integer times 2^j with |p t| <= |x|: exact, no overflow.
    * x - p t is exact: t = 0 leaves x; otherwise |p t| > |x| - p and |p t| >= p give
      |x| / 2 <= |p t| <= |x| (for |x| < 2p, |p t| = p; above, |x| - p >= |x| / 2), and
      Sterbenz's lemma makes that difference exact.
    A zero remainder takes x's sign, as fmod's; inf gives inf - inf = NaN, and NaN stays."""
    assert p >= 1 and float(p).hex().startswith("0x1.0000000000000p")
    t = e.op("trunc", x * (1.0 / p))
    return e.op("copysign", x - t * p, x)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):
    """For |a| >= |b|."""
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = a * FORMATS[a.dtype].split                        # Veltkamp
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dd_add(a, b):
    s, err = _two_sum(a[0], b[0])
    return _fast_two_sum(s, err + (a[1] + b[1]))


# -- exp --

def _exp_reduce(e, hi_in, lo_in=None, direct_below=None, series=None):
    """For finite x = hi_in + lo_in within the format's exp_range: (em, k, k as float) with
    e^x = (1 + em) 2^k. k = 0 where |x| < direct_below (<= 1/2, which the series, by default
    the format's exp_series, covers): no cancellation."""
    fmt = FORMATS[hi_in.dtype]
    ln2_hi, ln2_lo = fmt.ln2
    kf = e.op("round", hi_in * LOG2E)
    if direct_below is not None:
        kf = e.select(_abs(e, hi_in) < direct_below, 0.0, kf)
    hi = hi_in - kf * ln2_hi                              # exact
    lo = kf * ln2_lo if lo_in is None else kf * ln2_lo - lo_in
    r = hi - lo
    corr = (hi - r) - lo
    p = r + r * r * _poly(r, fmt.exp_series if series is None else series)
    return p + (corr + corr * p), e.op("ftoi", kf, dtype=fmt.int_t), kf


def _clamp_exp_arg(e, x, lo, hi):
    return e.select(_isnan(x), 0.0, e.select(x > hi, hi, e.select(x < lo, lo, x)))


def exp(e, x):
    em, k, _ = _exp_reduce(e, _clamp_exp_arg(e, x, *FORMATS[x.dtype].exp_range))
    return e.select(_isnan(x), x, _scale(e, 1.0 + em, k))


def expm1(e, x):
    fmt = FORMATS[x.dtype]
    (lo, big_from), cap = fmt.expm1_range, fmt.expm1_cap
    xc = _clamp_exp_arg(e, x, lo, fmt.exp_range[1])
    em, k, kf = _exp_reduce(e, xc, direct_below=0.5, series=fmt.expm1_series)
    t = _pow2(e, e.select(k < cap, k, cap), x.dtype)
    above = t * (em + (1.0 - _pow2(e, e.select(k < cap, -k, -cap), x.dtype)))  # k >= 1
    below = t * em + (t - 1.0)                                        # k <= 0
    big = _scale(e, 1.0 + em, k)                                      # e^x - 1 == e^x
    out = e.select(xc > big_from, big, e.select(kf >= 1.0, above, below))
    return e.select(_isnan(x), x, _tiny(e, x, out, fmt.tiny))


# -- log --

def log_parts(e, x):
    """x positive, finite (subnormal too): (k, f) with x = 2^k (1 + f), 1 + f in
    [sqrt(2)/2, sqrt(2)), k as a float."""
    fmt = FORMATS[x.dtype]
    int_t, bits, bias, pre = fmt.int_t, fmt.bits, fmt.bias, fmt.pre
    sub = x < 2.0 ** (1 - bias)
    ix = e.bitcast(e.select(sub, x * 2.0 ** pre, x), int_t)
    k = e.op("ishr", ix, bits) - e.select(sub, e.const(bias + pre, int_t), bias)
    m = e.bitcast((ix & ((1 << bits) - 1)) | (bias << bits), x.dtype)
    big = m > SQRT2
    m = e.select(big, m * 0.5, m)
    k = k + e.select(big, e.const(1, int_t), 0)
    return e.convert(k, x.dtype), m - 1.0


def _log1p_terms(f):
    """(hfsq, s, R): log(1 + f) = f - (hfsq - s (hfsq + R))."""
    s = f / (2.0 + f)
    z = s * s
    return 0.5 * f * f, s, z * _poly(z, FORMATS[f.dtype].log_series)


def _log_special(e, x, ok, out, zero_at=0.0):
    """NumPy's log at the edges: -inf at zero_at, NaN below, x itself for +inf and NaN."""
    edge = e.select(x.eq(zero_at), -INF, e.select(x < zero_at, NAN, x))
    return e.select(ok, out, edge)


def _positive(e, x):
    ok = (x > 0.0) & (x < INF)
    return ok, e.select(ok, x, 1.0)


def log(e, x):
    ok, xs = _positive(e, x)
    kf, f = log_parts(e, xs)
    hfsq, s, r = _log1p_terms(f)
    ln2_hi, ln2_lo = FORMATS[x.dtype].ln2
    out = kf * ln2_hi + (f - (hfsq - (s * (hfsq + r) + kf * ln2_lo)))
    return _log_special(e, x, ok, out)


def log1p(e, x):
    fmt = FORMATS[x.dtype]
    ok = (x > -1.0) & (x < INF)
    xs = e.select(ok, x, 0.0)
    u, err = _two_sum(e.const(1.0, x.dtype), xs)          # 1 + x = u + err exactly
    kf, f = log_parts(e, u)
    near = (xs > SQRT2 / 2 - 1) & (xs < SQRT2 - 1)        # then f = x exactly, k = 0
    f = e.select(near, xs, f)
    kf = e.select(near, 0.0, kf)
    c = e.select(near, 0.0, err / u)
    hfsq, s, r = _log1p_terms(f)
    out = kf * fmt.ln2[0] + (f - (hfsq - (s * (hfsq + r) + (kf * fmt.ln2[1] + c))))
    return _tiny(e, x, _log_special(e, x, ok, out, zero_at=-1.0), fmt.tiny)


def _log_split(e, x):
    """log(x) / ln(base) needs the log1p part as hi + lo with hi of 21 bits (12 in float32)."""
    fmt = FORMATS[x.dtype]
    ok, xs = _positive(e, x)
    kf, f = log_parts(e, xs)
    hfsq, s, r = _log1p_terms(f)
    hi = e.bitcast(e.bitcast(f - hfsq, fmt.int_t) & fmt.log_head, x.dtype)
    lo = (f - hi) - hfsq + s * (hfsq + r)
    return fmt, ok, kf, hi, lo


def log2(e, x):
    fmt, ok, kf, hi, lo = _log_split(e, x)
    (iv_hi, iv_lo) = fmt.ivln2
    val_hi = hi * iv_hi
    val_lo = (lo + hi) * iv_lo + lo * iv_hi
    w = kf + val_hi
    val_lo = val_lo + ((kf - w) + val_hi)
    return _log_special(e, x, ok, val_lo + w)


def log10(e, x):
    fmt, ok, kf, hi, lo = _log_split(e, x)
    (iv_hi, iv_lo), (l2_hi, l2_lo) = fmt.ivln10, fmt.log10_2
    y2 = kf * l2_hi
    val_hi = hi * iv_hi
    val_lo = kf * l2_lo + (lo + hi) * iv_lo + lo * iv_hi
    w = y2 + val_hi
    val_lo = val_lo + ((y2 - w) + val_hi)
    return _log_special(e, x, ok, val_lo + w)


# -- pow --

def _log_dd(e, x):
    """log(x) as a double-double, for x positive and finite."""
    kf, f = log_parts(e, x)
    d = 2.0 + f
    dl = f - (d - 2.0)                                    # d + dl = 2 + f exactly
    sh = f / d
    p, pe = _two_prod(sh, d)
    sl = (((f - p) - pe) - sh * dl) / d                   # s = f / (2 + f) = sh + sl
    zh, zl = _two_prod(sh, sh)
    ch, cl = _two_prod(zh, sh)
    cl = cl + zl * sh + 3.0 * zh * sl                     # s^3
    fmt = FORMATS[x.dtype]
    (two_thirds_hi, two_thirds_lo), (ln2_hi, ln2_lo) = fmt.two_thirds, fmt.ln2
    t3h, t3l = _two_prod(ch, e.const(two_thirds_hi, x.dtype))
    t3l = t3l + (ch * two_thirds_lo + cl * two_thirds_hi)
    t5 = ch * zh * _poly(zh, fmt.pow_log_series)         # s^5 (2/5 + 2 s^2/7 + ...)
    acc = _dd_add((2.0 * sh, 2.0 * sl), (t3h, t3l))
    acc = _dd_add(acc, (kf * ln2_lo, t5))
    return _dd_add((kf * ln2_hi, e.const(0.0, x.dtype)), acc)


def pow(e, x, y):
    ax, ay = _abs(e, x), _abs(e, y)
    finite = (ax > 0.0) & (ax < INF) & (ay < INF) & ax.ne(1.0)    # |x| = 1: no y log|x|
    lh, ll = _log_dd(e, e.select(finite, ax, 1.0))
    t0 = y * lh
    inside = finite & (_abs(e, t0) < -FORMATS[x.dtype].exp_range[0])
    ys = e.select(inside, y, 0.0)
    th, tl = _two_prod(ys, lh)
    th, tl = _fast_two_sum(th, tl + ys * ll)
    em, k, _ = _exp_reduce(e, th, tl)
    inf, zero = e.const(INF, x.dtype), e.const(0.0, x.dtype)
    mag = e.select(inside, _scale(e, 1.0 + em, k), e.select(t0 > 0.0, inf, zero))
    # Zero or infinite x or y: 0 or inf, by whether |x| > 1 agrees with y > 0.
    edge = e.select(ax.eq(1.0), 1.0, e.select((ax > 1.0) ^ (y > 0.0), zero, INF))
    mag = e.select(finite, mag, edge)
    odd = _abs(e, _rem_pow2(e, y, 2.0)).eq(1.0)
    out = e.select(_signbit(e, x) & odd, -mag, mag)
    negative_base = (x < 0.0) & (x > -INF) & (ay < INF) & e.op("trunc", y).ne(y)
    out = e.select(negative_base, NAN, out)
    out = e.select(_isnan(x) | _isnan(y), x + y, out)
    return e.select(y.eq(0.0) | x.eq(1.0), 1.0, out)


# -- sin, cos, tan --

def nearest_quadrant(e, t):
    """(k, q): t rounded to the nearest integer k (ties to even, as core round) and k mod 4
    as an integer of t's width, for |t| < 2^(p - 1) (p: the fraction bits). Adding
    1.5 * 2^p rounds t to an integer, which the sum's low fraction bits then hold (the
    fraction is k + 2^(p - 1), and 2^(p - 1) is 0 mod 4): two adds and an and, where round,
    trunc and ftoi run at a quarter of float64's add rate on NVIDIA's GPUs (the CUDA
    programming guide's throughput table, compute capability 9.0: conversions 16 a cycle
    per multiprocessor, float64 adds 64). W1's float64 kernel on the H100's Vulkan driver:
    1.076 ms against 1.115 with round, trunc and ftoi (float32, whose reduction is in
    float64: 0.692 against 0.703; GPU timestamps, medians of 21)."""
    fmt = FORMATS[t.dtype]
    magic = 1.5 * 2.0 ** fmt.bits
    s = t + magic
    return s - magic, e.bitcast(s, fmt.int_t) & 3


def _reduce_pio2(e, x, parts):
    """x finite: (rh, rl, q) with x = q pi/2 + rh + rl, |rh| <= ~pi/4, q mod 4 right, for
    `parts` of pi/2 whose products with q are exact (PIO2_PARTS: |q| < 2^29; PIO2_MEDIUM's
    first three: |q| < 2^20, its last product rounding below 2^-130)."""
    kf, q = nearest_quadrant(e, x * INVPIO2)
    a = x - kf * parts[0]                                 # exact: both within 2x of each other
    lo = e.const(0.0, F64)
    for part in parts[1:]:
        a, err = _two_sum(a, -(kf * part))
        lo = lo + err
    rh, rl = _fast_two_sum(a, lo)
    return rh, rl, q


def _reduce_medium(e, x):
    """_reduce_pio2 for |x| < MEDIUM_LIMIT with pi/2 in two parts, not four: its 33-bit head
    (k head exact, and x - k head by Sterbenz) and one float64 tail, whose product with k
    rounds. rh + rl is then within |k| 2^-86 of x - k pi/2 (that rounding and the tail's
    truncation), at most 2^-62 of it wherever |rh| >= |k| 2^-24; nearer a multiple of pi/2
    (rarely: |x - k pi/2| < |k| 2^-24) the four-part reduction runs instead, in a branch.
    With this and _reduce_huge's chunks, W1's float64 gradient on the H100's Vulkan driver
    took 2.15 to 2.18 ms against 2.57 to 2.76 (docs/math.md)."""
    kf, q = nearest_quadrant(e, x * INVPIO2)
    a = x - kf * PIO2_MEDIUM[0]                           # exact, as in _reduce_pio2
    w = kf * PIO2_MEDIUM_TAIL
    rh = a - w
    rl = (a - rh) - w                                     # a - rh exact: |w| << |a| here
    close = _abs(e, rh) < _abs(e, kf) * 2.0 ** -24
    return e.branch(close, lambda: list(_reduce_pio2(e, x, PIO2_MEDIUM)), [rh, rl, q])


def _sin_kernel(x, y, series=None):
    """sin(x + y) for |x| <= ~pi/4, |y| tiny; series: the Taylor terms from x^5 (SIN_SERIES;
    shorter for float32)."""
    z = x * x
    v = z * x
    r = _poly(z, SIN_SERIES if series is None else series)
    return x - ((z * (0.5 * y - v * r) - y) - v * SIN_S1)


def _cos_kernel(x, y, series=None):
    """cos(x + y), as _sin_kernel; series: the terms from x^4 (COS_SERIES)."""
    z = x * x
    r = z * _poly(z, COS_SERIES if series is None else series)
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


def _reduce_huge(e, ax):
    """Payne-Hanek for ax >= 2^28: ax 2/pi = 4n + q + f, with ax = M 2^(E-52) and only the
    2/pi bits that can reach q or f: products of M's halves (27 and 26 bits) with 24-bit
    chunks are exact, and so is each one's remainder mod 4. (fh, fl, q)."""
    ix = e.bitcast(ax, I64)
    exp2 = e.op("ishr", ix, 52) - 1023
    j0 = e.op("idiv", e.select(exp2 > 54, exp2 - 54, e.const(0, I64)), 24)
    scale = exp2 - 52 - 24 * (j0 + 1)                     # weight of chunk j0's last bit
    m = e.bitcast((ix & 0x000FFFFFFFFFFFFF) | (1075 << 52), F64)   # M, an integer
    m_hi = e.bitcast(e.bitcast(m, I64) & -(1 << 26), F64)
    m_lo = m - m_hi
    # Chunks j0 .. j0 + 7, picked in one pass over j0's values, each comparison used at once
    # by all eight chains: the 41 comparisons made first and read by each chain in turn were
    # live together, in registers every thread of a kernel calling sin reserved, taken or not.
    chunks = [e.const(0.0, F64)] * HUGE_CHUNKS
    for j in range(len(TWO_OVER_PI_24) - HUGE_CHUNKS + 1):
        hit = j0.eq(j)
        chunks = [e.select(hit, float(TWO_OVER_PI_24[j + i]), chunk)
                  for i, chunk in enumerate(chunks)]
    hi, lo = e.const(0.0, F64), e.const(0.0, F64)
    for i, chunk in enumerate(chunks):
        w = _pow2(e, scale - 24 * i)
        for half in (m_hi, m_lo):
            hi, err = _two_sum(hi, _rem_pow2(e, half * chunk * w, 4.0))
            lo = lo + err
    hi = _rem_pow2(e, hi, 4.0)
    k = e.op("round", hi)
    fh, fl = _two_sum(hi - k, lo)
    return fh, fl, e.op("ftoi", k, dtype=I64)


def _reduce(e, x):
    """(rh, rl, q): x = (4n + q) pi/2 + rh + rl for finite x. Below 2^20, Cody-Waite with
    pi/2 in two parts (four near multiples of pi/2: _reduce_medium); in a branch taken only
    where some |x| is larger, seven parts below
    2^28 and Payne-Hanek (most of sin's code) beyond, in a branch of its own. The four-part
    reduction has 27 fewer operations than the seven-part one, which every argument paid
    for: sin was about 120 operations, most of a GPU loop's time that calls it."""
    ax = _abs(e, x)
    large = ax >= MEDIUM_LIMIT
    reduced = _reduce_medium(e, e.select(large, 0.0, x))

    def beyond():
        # Threads that run this masked (SIMD lanes, GPU threads beside a large one) see
        # |x| < 2^20: give them a harmless argument.
        xl = e.select(large, x, MEDIUM_LIMIT)
        al = _abs(e, xl)
        huge = al >= CODY_WAITE_LIMIT
        rh, rl, q = _reduce_pio2(e, e.select(huge, 0.0, xl), PIO2_PARTS)

        def payne_hanek():
            fh, fl, hq = _reduce_huge(e, e.select(huge, al, CODY_WAITE_LIMIT))
            ph, pl = _two_prod(fh, e.const(PIO2_HI, F64))
            ph, pl = _fast_two_sum(ph, pl + (fh * PIO2_LO + fl * PIO2_HI))
            negative = xl < 0.0
            return (e.select(negative, -ph, ph), e.select(negative, -pl, pl),
                    e.select(negative, -hq, hq))
        return list(e.branch(huge, payne_hanek, [rh, rl, q]))
    return e.branch(large, beyond, list(reduced))


def _trig(e, x, *which):
    """The functions `which` of x ("sin", "cos" or "tan") from one argument reduction."""
    finite = _abs(e, x) < INF
    rh, rl, q = _reduce(e, e.select(finite, x, 0.0))
    s, c = _sin_kernel(rh, rl), _cos_kernel(rh, rl)
    outs = []
    for f in which:
        out = e.select((q & 1).ne(0), -c / s, s / c) if f == "tan" else \
            by_quadrant(e, f, q, s, c)
        outs.append(e.select(finite, out, x - x))
    return outs


def by_quadrant(e, f, q, s, c):
    """sin ("sin") or cos ("cos") of x = (4n + q) pi/2 + r from s = sin r and c = cos r (also
    mathlib32's, for its float32 kernels)."""
    quadrant = q + (1 if f == "cos" else 0)
    out = e.select((quadrant & 1).ne(0), c, s)
    return e.select((quadrant & 2).ne(0), -out, out)


def sin(e, x):
    return _tiny(e, x, _trig(e, x, "sin")[0], 2.0 ** -30)


def cos(e, x):
    return _trig(e, x, "cos")[0]


def sincos(e, x):
    """(sin x, cos x) from one argument reduction, the reduction being most of either: each
    bit for bit what sin and cos give (legalize.py pairs them)."""
    s, c = _trig(e, x, "sin", "cos")
    return _tiny(e, x, s, 2.0 ** -30), c


def tan(e, x):
    return _tiny(e, x, _trig(e, x, "tan")[0], 2.0 ** -30)


# -- atan family --

def _atan_unit(e, u):
    """atan(u) as hi + lo for u in [0, 1] (NaN passes through). Rounding j down keeps
    atan(j/8) and atan(t) of one sign: no cancellation."""
    jf = e.op("floor", u * 8.0)
    c = jf * 0.125
    t = (u - c) / (1.0 + c * u)                           # 0 <= t < 1/8, u - c exact
    z = t * t
    at = t + t * z * _poly(z, ATAN_SERIES)
    hi, lo = e.const(0.0, F64), e.const(0.0, F64)
    for j, (h, lw) in enumerate(ATAN_J8[1:], start=1):
        hit = jf.eq(float(j))
        hi, lo = e.select(hit, h, hi), e.select(hit, lw, lo)
    return hi, lo + at


def atan2_operands(e, y, x, y_lo, x_lo):
    """atan2's operands, the smaller magnitude over the larger, in x's dtype (mathlib32's
    float32 atan2 too): (swap, num, den, num_lo, den_lo, both infinite, den 0 or infinite).
    y_lo, x_lo: low words of non-negative y and x, or None."""
    ax, ay = _abs(e, x), _abs(e, y)
    swap = ay > ax
    num, den = e.select(swap, ax, ay), e.select(swap, ay, ax)
    zero = e.const(0.0, x.dtype)
    y_lo, x_lo = (zero if lo is None else lo for lo in (y_lo, x_lo))
    num_lo, den_lo = e.select(swap, x_lo, y_lo), e.select(swap, y_lo, x_lo)
    return swap, num, den, num_lo, den_lo, ax.eq(INF) & ay.eq(INF), den.eq(0.0) | den.eq(INF)


def atan2(e, y, x, y_lo=None, x_lo=None):
    """y_lo and x_lo: low words of non-negative y and x (asin and acos pass the cosine as a
    double-double), so that the quotient's correction includes them."""
    swap, num, den, num_lo, den_lo, both_inf, degenerate = atan2_operands(e, y, x, y_lo, x_lo)
    q = e.select(degenerate, 0.0, num / e.select(degenerate, 1.0, den))
    # The quotient's rounding error, from operands scaled so that splitting cannot overflow.
    s = e.select(den > 2.0 ** 900, 2.0 ** -600, e.select(den < 2.0 ** -900, 2.0 ** 600,
                                                          e.const(1.0, F64)))
    sn, sd = num * s, e.select(degenerate, 1.0, den * s)
    p, pe = _two_prod(q, sd)
    rest = ((sn - p) - pe) + s * (num_lo - q * den_lo)
    q_lo = e.select(degenerate | (sn < 2.0 ** -900), 0.0, rest / sd)
    hi, lo = _atan_unit(e, q)
    lo = lo + q_lo / (1.0 + q * q)                        # atan(q + q_lo), to first order
    # atan(q), pi/2 - atan(q), pi/2 + atan(q) or pi - atan(q): one rounding at the end.
    left = _signbit(e, x)
    flip = swap ^ left
    hi, lo = e.select(flip, -hi, hi), e.select(flip, -lo, lo)
    base_hi = e.select(swap, PIO2_HI, e.select(left, PI_HI, e.const(0.0, F64)))
    base_lo = e.select(swap, PIO2_LO, e.select(left, PI_LO, e.const(0.0, F64)))
    a = (base_hi + hi) + (base_lo + lo)
    a = e.select(both_inf, e.select(left, 3 * PIO4, e.const(PIO4, F64)), a)
    out = e.op("copysign", a, y)
    return e.select(_isnan(x) | _isnan(y), x + y, out)


def atan(e, x):
    return _tiny(e, x, atan2(e, x, e.const(1.0, F64)))


def _cosine_of_asin(e, x):
    """sqrt(1 - x^2) as a double-double (NaN for |x| > 1)."""
    ax = _abs(e, x)
    x2h, x2l = _two_prod(ax, ax)
    wh, wl = _two_sum(e.const(1.0, F64), -x2h)
    wl = wl - x2l
    ch = e.op("sqrt", wh)
    p, pe = _two_prod(ch, ch)
    cl = e.select(ch > 0.0, (((wh - p) - pe) + wl) / (2.0 * ch), e.const(0.0, F64))
    return ch, cl


def asin(e, x):
    ch, cl = _cosine_of_asin(e, x)
    return _tiny(e, x, atan2(e, x, ch, x_lo=cl))


def acos(e, x):
    ch, cl = _cosine_of_asin(e, x)
    return atan2(e, ch, x, y_lo=cl)


# -- hyperbolic --

def _half_exp(e, ax):
    """(e^ax, e^ax / 2) for ax >= 0, each rounded once."""
    # Past the format's exp range, where e^ax / 2 overflows too (711 for float64).
    em, k, _ = _exp_reduce(e, _min(e, ax, FORMATS[ax.dtype].exp_range[1] + 1.0))
    return _scale(e, 1.0 + em, k), _scale(e, 1.0 + em, k - 1)


def _sinh_series(x):
    """sinh(x) for |x| < 1: Taylor, the last term below 2^-60 of the first."""
    z = x * x
    return x + x * z * _poly(z, SINH_SERIES)


def sinh(e, x):
    ax = _abs(e, x)
    em = expm1(e, _min(e, ax, 22.0))
    small = _sinh_series(ax)
    mid = 0.5 * (em + em / (em + 1.0))
    big = _half_exp(e, e.select(_isnan(x), 0.0, ax))[1]
    out = e.select(ax < 1.0, small, e.select(ax < 22.0, mid, big))
    out = e.select(_isnan(x), x, e.op("copysign", out, x))
    return _tiny(e, x, out, 2.0 ** -28)


def cosh(e, x):
    ax = _abs(e, x)
    em = expm1(e, _min(e, ax, 0.5))
    small = 1.0 + em * em / (2.0 * (1.0 + em))
    t, half = _half_exp(e, e.select(_isnan(x), 0.0, ax))
    mid = 0.5 * t + 0.5 / t
    out = e.select(ax < LN2 / 2, small, e.select(ax < 22.0, mid, half))
    return e.select(_isnan(x), x, out)


def _tanh_small(e, ax):
    """tanh for ax < 1 as em / (em + 2), em = e^(2 ax) - 1, all in double-double: the
    plain quotient loses up to 3 ulps here."""
    r = 2.0 * ax
    eh, el = _two_sum(r, r * r * _poly(r, TANH_EXP_SERIES))
    dh, dl = _two_sum(e.const(2.0, ax.dtype), eh)
    dl = dl + el
    q = eh / dh
    p, pe = _two_prod(q, dh)
    return q + ((((eh - p) - pe) + el) - q * dl) / dh


def tanh(e, x):
    ax = _abs(e, x)
    axc = _min(e, ax, 22.0)
    em = expm1(e, 2.0 * axc)
    out = e.select(ax < 1.0, _tanh_small(e, _min(e, ax, 1.0)), 1.0 - 2.0 / (em + 2.0))
    out = e.select(ax < 22.0, out, 1.0)
    out = e.select(_isnan(x), x, e.op("copysign", out, x))
    return _tiny(e, x, out)


def asinh(e, x):
    ax = _abs(e, x)
    big = ax > 2.0 ** 28
    sq = e.op("sqrt", ax * ax + 1.0)
    far = log(e, e.select(big, ax, 2.0 * ax + 1.0 / (sq + ax)))
    far = e.select(big, far + LN2, far)
    near = log1p(e, ax + ax * ax / (1.0 + sq))
    out = e.select(ax > 2.0, far, near)
    out = e.select(_isnan(x), x, e.op("copysign", out, x))
    return _tiny(e, x, out, 2.0 ** -28)


def acosh(e, x):
    big = x > 2.0 ** 28
    far = log(e, e.select(big, x, 2.0 * x - 1.0 / (x + e.op("sqrt", x * x - 1.0))))
    far = e.select(big, far + LN2, far)
    t = x - 1.0
    near = log1p(e, t + e.op("sqrt", 2.0 * t + t * t))
    out = e.select(x > 2.0, far, near)
    return e.select(x < 1.0, NAN, e.select(_isnan(x), x, out))


def atanh(e, x):
    ax = _abs(e, x)
    arg = e.select(ax < 0.5, 2.0 * ax + 2.0 * ax * ax / (1.0 - ax), 2.0 * ax / (1.0 - ax))
    out = 0.5 * log1p(e, arg)
    out = e.select(_isnan(x), x, e.op("copysign", out, x))
    return _tiny(e, x, out)


FLOAT64 = {"exp": exp, "expm1": expm1, "log": log, "log1p": log1p, "log2": log2,
           "log10": log10, "pow": pow, "sin": sin, "cos": cos, "tan": tan, "atan": atan,
           "atan2": atan2, "asin": asin, "acos": acos, "sinh": sinh, "cosh": cosh,
           "tanh": tanh, "asinh": asinh, "acosh": acosh, "atanh": atanh}
assert set(FLOAT64) == set(TRANSCENDENTAL)


def sincos_expansion(dtype, caps):
    """The rule (emitter, x) -> (sin x, cos x) for a backend that expands both (as
    expansion() would, each bit for bit), or None where one of them is native."""
    names = (dtype, "float64")
    if any((op, name) in caps.native_math for op in ("sin", "cos") for name in names):
        return None
    if dtype == "float64":
        return sincos
    if dtype != "float32":
        raise NotImplementedError(f"sincos on {dtype}")

    def widened(e, x):
        return tuple(e.convert(out, F32) for out in sincos(e, e.convert(x, F64)))
    return widened


def expansion(op, dtype, caps):
    """The rule (emitter, *args) -> value computing `op` on `dtype` from core ops."""
    if dtype == "float64":
        return FLOAT64[op]
    if dtype != "float32":
        raise NotImplementedError(f"{op} on {dtype}")
    native = (op, "float64") in caps.native_math

    def widened(e, *args):
        wide = [e.convert(a, F64) for a in args]
        out = e.op(op, *wide) if native else FLOAT64[op](e, *wide)
        return e.convert(out, F32)
    return widened
