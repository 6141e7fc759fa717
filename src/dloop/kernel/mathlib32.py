"""STAGE 4 — float32 sin and cos computed mostly in float32, for backends that expand them
(legalize.py): Vulkan, whose GLSL.std.450 sin may be 2^-11 off. mathlib's float32 functions
widen to float64 and take its double-double reduction and series to x^19: about 100
float64 operations for sin and cos, each at float64's rate (half of float32's on an H100,
a sixteenth or less on consumer GPUs). Here, for |x| < LIMIT:

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
float32: pi/2 in four 12-bit parts (each k * part exact) and a 24-bit tail, each difference's
rounding error gathered by a two-sum into rl (72 bits of pi/2: the truncation is 2^-33 of
the smallest r), about 40 float32 operations more. Its larger |x| take the device's own
float32 sin and cos (core.py's device_sin and device_cos, which legalize leaves alone: GLSL's,
allowed 2^-11 absolute error, what such a device had for every argument before). Measured
error: docs/math.md (tests/kernel/test_mathlib.py keeps it within MAX_ULPS;
tools/check_trig32.py runs every positive float32 below 4096)."""

from fractions import Fraction
from math import factorial

import numpy as np

from . import mathlib as m

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
LIMIT = 4096.0                 # |k| <= round(4096 * 2/pi) = 2608 < 2^12


def _split(value, widths):
    """value (a Fraction) as floats of `widths` significant bits each, greedily."""
    parts = []
    for bits in widths:
        scale = Fraction(2) ** (bits - 1 - (value.numerator.bit_length()
                                            - value.denominator.bit_length()))
        parts.append(float(Fraction(round(value * scale)) / scale))   # exact: <= 53 bits
        value -= Fraction(parts[-1])
    return tuple(parts)


# pi/2 to 168 bits (mathlib's seven float64 parts, summed exactly), in two 41-bit parts for
# the float64 reduction, and in float32 parts for the float32 one.
PIO2 = sum(map(Fraction, m.PIO2_PARTS))
PIO2_PARTS41 = _split(PIO2, (41, 41))
PIO2_PARTS12 = _split(PIO2, (12, 12, 12, 12, 24))
assert all(float(np.float32(p)) == p for p in PIO2_PARTS12)
INVPIO2_32 = float(np.float32(m.INVPIO2))
SIN_SERIES32 = [(-1.0) ** j / factorial(2 * j + 1) for j in range(2, 5)]   # 1/5! .. 1/9!
COS_SERIES32 = [(-1.0) ** j / factorial(2 * j) for j in range(2, 6)]       # 1/4! .. -1/10!


def _reduce(e, x, caps):
    """float32 x with |x| < LIMIT: (rh, rl, q) with x = q pi/2 + rh + rl, q an int32."""
    if not _has_float64(caps):
        return _reduce_narrow(e, x)
    w = e.convert(x, m.F64)
    k = e.op("round", w * m.INVPIO2)
    r = (w - k * PIO2_PARTS41[0]) - k * PIO2_PARTS41[1]
    rh = e.convert(r, F32)
    rl = e.convert(r - e.convert(rh, m.F64), F32)         # the difference is exact
    return rh, rl, e.op("ftoi", k, dtype=I32)             # q & 3 is q mod 4


def _reduce_narrow(e, x):
    """_reduce in float32 arithmetic only (the module docstring)."""
    k = e.op("round", x * INVPIO2_32)
    a, lo = x, e.const(0.0, F32)
    for part in PIO2_PARTS12:
        a, err = m._two_sum(a, -(k * part))               # k * part exact but the tail's
        lo = lo + err
    rh, rl = m._fast_two_sum(a, lo)
    return rh, rl, e.op("ftoi", k, dtype=I32)


def _trig(e, x, caps, *which):
    """The functions `which` ("sin", "cos") of float32 x from one argument reduction."""
    ax = m._abs(e, x)
    finite = ax < m.INF
    small = ax < LIMIT
    rh, rl, q = _reduce(e, e.select(small, x, 0.0), caps)
    s = m._sin_kernel(rh, rl, SIN_SERIES32)
    c = m._cos_kernel(rh, rl, COS_SERIES32)
    outs = []
    for f in which:
        quadrant = q + (1 if f == "cos" else 0)
        out = e.select((quadrant & 1).ne(0), c, s)
        outs.append(e.select((quadrant & 2).ne(0), -out, out))

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


def _has_float64(caps):
    return getattr(caps, "float64", True)


def expansion(op, caps):
    """The rule (emitter, x) for float32 `op`, or None where mathlib's applies."""
    if op not in FLOAT32:
        return None
    return lambda e, x: FLOAT32[op](e, x, caps)


def sincos_expansion(caps):
    """The rule (emitter, x) -> (sin x, cos x) for float32, or None where one of the two is
    native."""
    if any((op, "float32") in caps.native_math for op in FLOAT32):
        return None
    return lambda e, x: sincos(e, x, caps)
