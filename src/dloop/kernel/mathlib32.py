"""STAGE 4 — float32 sin and cos computed mostly in float32, for backends that expand them
(legalize.py): Vulkan, whose GLSL.std.450 sin may be 2^-11 off; and on devices without
float64, atan, atan2, asin, acos (GLSL allows them 4096 ulps), exp, log, expm1, log1p, and
the hyperbolic functions and their inverses in float32. mathlib's float32 functions widen to
float64 and take its double-double reduction and series to x^17: about 100 float64
operations for sin and cos, each at float64's rate (half of float32's on an H100, a
sixteenth or less on consumer GPUs). Here, for |x| < LIMIT:

* k = round(x 2/pi) and r = x - k pi/2 in float64, with pi/2 in two parts of 41 bits: k has
  at most 12 bits, so each k * part is exact, and so is x - k * part1 (Sterbenz); the one
  rounding, of a difference no larger than r plus k 2^-82, keeps r's relative error near
  2^-53, and the parts' truncation adds k 2^-83: 2^-43 of the smallest r there is (the
  float32 below 4096 closest to a multiple of pi/2, 252.89821, is 2^-27.8 from it: found
  by a search of every float32 in [pi/4, 4096) in 80-bit arithmetic). r then splits into
  float32 rh + rl.
* mathlib's kernels for sin and cos of rh + rl on [-pi/4, pi/4] in float32, with Taylor
  series to x^9 and x^10 (truncation below 2^-28 relative).

About a dozen float64 and 25 float32 operations. Larger |x| take mathlib's float64 path
(Payne-Hanek included) in a branch, so only where an element needs it.

A device without float64 (Vulkan on Apple's and Intel's GPUs and many phones) reduces in
float32: pi/2 in four 12-bit parts (each k * part exact) and a 24-bit tail, the first
difference exact and each later one's rounding error gathered by a two-sum into rl (72 bits
of pi/2: the truncation is 2^-33 of the smallest r), about 30 float32 operations more. Its
larger |x| take the device's own float32 sin and cos (core.py's device_sin and device_cos,
which legalize leaves alone: GLSL's, allowed 2^-11 absolute error, what such a device had
for every argument before). Its atan
family is mathlib's code in float32 pairs where mathlib has double-doubles; exp, expm1, log
and log1p are mathlib's functions themselves, in float32's format (mathlib.FORMATS).
Measured error: docs/math.md (tests/kernel/test_mathlib.py keeps it within MAX_ULPS;
tools/check_trig32.py runs every positive float32 below 4096)."""

import math
from fractions import Fraction
from math import factorial

import numpy as np

from . import mathlib as m

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
LIMIT = 4096.0                 # |k| <= round(4096 * 2/pi) = 2608 < 2^12


# pi/2 to 168 bits (mathlib's seven float64 parts, summed exactly), in two 41-bit parts for
# the float64 reduction, and in float32 parts for the float32 one.
PIO2 = sum(map(Fraction, m.PIO2_PARTS))
PIO2_PARTS41 = m.split_bits(PIO2, (41, 41))
PIO2_PARTS12 = m.split_bits(PIO2, (12, 12, 12, 12, 24))
assert all(float(np.float32(p)) == p for p in PIO2_PARTS12)
INVPIO2_32 = float(np.float32(m.INVPIO2))
SIN_SERIES32 = [(-1.0) ** j / factorial(2 * j + 1) for j in range(2, 5)]   # 1/5! .. 1/9!
COS_SERIES32 = [(-1.0) ** j / factorial(2 * j) for j in range(2, 6)]       # 1/4! .. -1/10!


def _reduce(e, x, caps):
    """float32 x with |x| < LIMIT: (rh, rl, q) with x = q pi/2 + rh + rl, q an int32."""
    if not _has_float64(caps):
        return _reduce_narrow(e, x)
    w = e.convert(x, m.F64)
    k, q = m.nearest_quadrant(e, w * m.INVPIO2)
    r = (w - k * PIO2_PARTS41[0]) - k * PIO2_PARTS41[1]
    rh = e.convert(r, F32)
    rl = e.convert(r - e.convert(rh, m.F64), F32)         # the difference is exact
    return rh, rl, e.convert(q, I32)


def _reduce_narrow(e, x):
    """_reduce in float32 arithmetic only (the module docstring)."""
    k, q = m.nearest_quadrant(e, x * INVPIO2_32)
    a = x - k * PIO2_PARTS12[0]       # exact: a two-sum's error was 0 for every float32 x
    lo = e.const(0.0, F32)            # in (0, 4096), and k and the products are odd in x
    for part in PIO2_PARTS12[1:]:
        a, err = m._two_sum(a, -(k * part))               # k * part exact but the tail's
        lo = lo + err
    rh, rl = m._fast_two_sum(a, lo)
    return rh, rl, q


def _trig(e, x, caps, *which):
    """The functions `which` ("sin", "cos") of float32 x from one argument reduction."""
    ax = m._abs(e, x)
    finite = ax < m.INF
    small = ax < LIMIT
    rh, rl, q = _reduce(e, e.select(small, x, 0.0), caps)
    s = m._sin_kernel(rh, rl, SIN_SERIES32)
    c = m._cos_kernel(rh, rl, COS_SERIES32)
    outs = [m.by_quadrant(e, f, q, s, c) for f in which]

    def wide():
        if not _has_float64(caps):
            return [e.op("device_" + f, x) for f in which]       # never expanded
        # Threads that run this masked (beside a large element) get a harmless argument.
        w = e.convert(e.select(small | ~finite, LIMIT, x), m.F64)
        natives = [(f, "float64") in caps.native_math for f in which]
        got = m._trig(e, w, *which) if not any(natives) else \
            [e.op(f, w) if native else m.FLOAT64[f](e, w) for f, native in zip(which, natives)]
        return [e.convert(v, F32) for v in got]
    outs = e.branch(finite & ~small, wide, outs)
    return [e.select(finite, out, x - x) for out in outs]


def sin(e, x, caps):
    return m._tiny(e, x, _trig(e, x, caps, "sin")[0], 2.0 ** -12)


def cos(e, x, caps):
    return _trig(e, x, caps, "cos")[0]


def sincos(e, x, caps):
    """(sin x, cos x) from one reduction, each bit for bit what sin and cos give."""
    s, c = _trig(e, x, caps, "sin", "cos")
    return m._tiny(e, x, s, 2.0 ** -12), c


FLOAT32 = {"sin": sin, "cos": cos}


# -- atan, atan2, asin, acos on devices without float64 (where GLSL allows 4096 ulps) --

def _pair(hi, lo=0.0):
    """A float64 double-double as a float32 pair: hi rounded, then the rest rounded."""
    h = float(np.float32(hi))
    return h, float(np.float32((hi - h) + lo))


# atan(j/16), j = 0..16: float64's atan is within an ulp of float64, far inside a pair's 48 bits.
ATAN_J16_32 = [_pair(math.atan(j / 16)) for j in range(17)]
PI_32, PIO2_32 = _pair(m.PI_HI, m.PI_LO), _pair(m.PIO2_HI, m.PIO2_LO)
ATAN_SERIES32 = [(-1.0) ** j / (2 * j + 1) for j in range(1, 4)]     # -1/3, 1/5, -1/7
def _atan_unit(e, u):
    """atan(u) as hi + lo for u in [0, 1] (mathlib._atan_unit in float32, with a table of
    sixteenths). t = (u - c) / (1 + c u) carries its rounding errors in t_lo (the
    denominator as an exact pair, the quotient's residual exact): float32's t alone, 1.5
    ulps of t off, took atan to 2 ulps where t is half the result."""
    jf = e.op("floor", u * 16.0)
    c = jf * 0.0625
    n = u - c                                             # exact
    p, pe = m._two_prod(c, u)
    dh, dl = m._two_sum(e.const(1.0, F32), p)
    t = n / dh                                            # 0 <= t < 1/16
    r, re = m._two_prod(t, dh)
    t_lo = (((n - r) - re) - t * (dl + pe)) / dh
    z = t * t
    at = t + (t_lo + t * z * m._poly(z, ATAN_SERIES32))   # truncation below 2^-35 t
    hi, lo = e.const(0.0, F32), e.const(0.0, F32)
    for j, (h, lw) in enumerate(ATAN_J16_32[1:], start=1):
        hit = jf.eq(float(j))
        hi, lo = e.select(hit, h, hi), e.select(hit, lw, lo)
    return hi, lo + at


def _atan2(e, y, x, y_lo=None, x_lo=None):
    """mathlib.atan2 in float32: the quotient of the smaller by the larger magnitude with its
    rounding error, atan of it from the table, and 0, pi/2 or pi added as float32 pairs.
    y_lo, x_lo: low words of non-negative y and x (asin and acos pass the cosine as a pair)."""
    swap, num, den, num_lo, den_lo, both_inf, degenerate = m.atan2_operands(e, y, x, y_lo, x_lo)
    zero = e.const(0.0, F32)
    # Scaled by a power of two where the split would overflow, the residual underflow, or
    # the numerator is subnormal (a refined division keeps a rough quotient of such operands
    # in float32: exactdiv.div_refined): the quotient of the scaled operands is the same.
    up = (den < 2.0 ** -90) | ((num < 2.0 ** -90) & (den < 2.0 ** 60))
    s = e.select(den > 2.0 ** 90, 2.0 ** -50, e.select(up, 2.0 ** 50, e.const(1.0, F32)))
    sn, sd = num * s, e.select(degenerate, 1.0, den * s)
    q = e.select(degenerate, 0.0, sn / sd)
    p, pe = m._two_prod(q, sd)
    rest = ((sn - p) - pe) + s * (num_lo - q * den_lo)
    q_lo = e.select(degenerate | (sn < 2.0 ** -90), 0.0, rest / sd)
    hi, lo = _atan_unit(e, q)
    lo = lo + q_lo / (1.0 + q * q)
    left = e.bitcast(x, I32) < 0
    flip = swap ^ left
    hi, lo = e.select(flip, -hi, hi), e.select(flip, -lo, lo)
    base_hi = e.select(swap, PIO2_32[0], e.select(left, PI_32[0], zero))
    base_lo = e.select(swap, PIO2_32[1], e.select(left, PI_32[1], zero))
    sh, se = m._two_sum(base_hi, hi)                      # hi's rounding kept: se
    a = sh + ((se + base_lo) + lo)
    a = e.select(both_inf, e.select(left, float(np.float32(3 * m.PIO4)),
                                    e.const(m.PIO4, F32)), a)
    out = e.op("copysign", a, y)
    return e.select(m._isnan(x) | m._isnan(y), x + y, out)


def _cosine_of_asin(e, x):
    """sqrt(1 - x^2) as a float32 pair (NaN for |x| > 1)."""
    ax = m._abs(e, x)
    x2h, x2l = m._two_prod(ax, ax)
    wh, wl = m._two_sum(e.const(1.0, F32), -x2h)
    wl = wl - x2l
    ch = e.op("sqrt", wh)
    p, pe = m._two_prod(ch, ch)
    cl = e.select(ch > 0.0, (((wh - p) - pe) + wl) / (2.0 * ch), e.const(0.0, F32))
    return ch, cl


def atan(e, x):
    return m._tiny(e, x, _atan2(e, x, e.const(1.0, F32)), 2.0 ** -12)


def asin(e, x):
    ch, cl = _cosine_of_asin(e, x)
    return m._tiny(e, x, _atan2(e, x, ch, x_lo=cl), 2.0 ** -12)


def acos(e, x):
    ch, cl = _cosine_of_asin(e, x)
    return _atan2(e, ch, x, y_lo=cl)


def tan(e, x):
    """tan on a device without float64: sin r and cos r of _reduce_narrow's r as float32
    pairs (the kernels' last sums kept), and their quotient with its residual (each
    kernel's rounding alone took the ratio past 1 ulp). From LIMIT, the device's own sin
    and cos, as for those functions."""
    ax = m._abs(e, x)
    finite, small = ax < m.INF, ax < LIMIT
    rh, rl, q = _reduce_narrow(e, e.select(small, x, 0.0))
    z = rh * rh
    v = z * rh
    s_rest = -((z * (0.5 * rl - v * m._poly(z, SIN_SERIES32)) - rl) - v * m.SIN_S1)
    sh, sl = m._fast_two_sum(rh, s_rest)
    hz = 0.5 * z
    w = 1.0 - hz
    ch, cl = m._fast_two_sum(w, ((1.0 - w) - hz) + (z * (z * m._poly(z, COS_SERIES32))
                                                      - rh * rl))
    odd = (q & 1).ne(0)                                   # tan(r + pi/2) = -cos r / sin r
    nh, nl = e.select(odd, -ch, sh), e.select(odd, -cl, sl)
    dh, dl = e.select(odd, sh, ch), e.select(odd, sl, cl)
    t = nh / dh
    p, pe = m._two_prod(t, dh)
    out = t + (((nh - p) - pe) + (nl - t * dl)) / dh
    out = e.branch(finite & ~small, lambda: [e.op("device_sin", x) / e.op("device_cos", x)],
                   [out])[0]
    return m._tiny(e, x, e.select(finite, out, x - x), 2.0 ** -12)


# Without float64 only: with it, mathlib's widened code rounds once. exp, log, log2, log10,
# pow and the hyperbolic functions are mathlib's own code, in float32's format
# (mathlib.FORMATS).
NARROW = {"tan": tan, "atan": atan, "atan2": _atan2, "asin": asin, "acos": acos,
          "exp": m.exp, "log": m.log, "expm1": m.expm1, "log1p": m.log1p, "log2": m.log2,
          "log10": m.log10, "pow": m.pow, "sinh": m.sinh, "cosh": m.cosh, "tanh": m.tanh,
          "asinh": m.asinh, "acosh": m.acosh, "atanh": m.atanh}


def _has_float64(caps):
    return getattr(caps, "float64", True)


def expansion(op, caps):
    """The rule (emitter, *args) for float32 `op`, or None where mathlib's applies."""
    if op in FLOAT32:
        return lambda e, x: FLOAT32[op](e, x, caps)
    return NARROW.get(op) if not _has_float64(caps) else None


def sincos_expansion(caps):
    """The rule (emitter, x) -> (sin x, cos x) for float32, or None where one of the two is
    native."""
    if any((op, "float32") in caps.native_math for op in FLOAT32):
        return None
    return lambda e, x: sincos(e, x, caps)
