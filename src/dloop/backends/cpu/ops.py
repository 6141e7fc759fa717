"""STAGE 5 — cpu: LLVM instructions for each elementwise kernel-IR op, matching the NumPy
semantics of ir/semantics.py (NaN propagation, Python-style integer division, ...)."""

import math

import numpy as np

from .types import is_float, llvm_type

EMITTERS = {}


def emit(r, op, args, dtypes, out_dtype):
    return EMITTERS[op](r, args, dtypes[0] if dtypes else None, out_dtype)


def _fp(name):
    """A float math function (intrinsic or libm); integer operands never reach these."""
    return lambda r, a, dt, out: r.math(name, *a)


for _name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
              "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "atan2",
              "pow", "copysign"):
    EMITTERS[_name] = _fp(_name)
EMITTERS["round"] = lambda r, a, dt, out: r.math("roundeven", a[0]) if is_float(dt) else a[0]
EMITTERS["trunc"] = lambda r, a, dt, out: r.math("trunc", a[0]) if is_float(dt) else a[0]


def _shift(left):
    def e(r, a, dt, out):
        x, n = a
        b = r.b
        bits = x.type(x.type.width)
        negative = b.icmp_signed("<", n, x.type(0))
        clamped = b.select(negative, x.type(0), b.select(b.icmp_signed(">=", n, bits),
                                                          x.type(x.type.width - 1), n))
        if left:
            out_of_range = b.or_(negative, b.icmp_signed(">=", n, bits))
            return b.select(out_of_range, x.type(0), b.shl(x, clamped))
        return b.select(negative, x.type(0), b.ashr(x, clamped))
    return e


EMITTERS["shl"] = _shift(True)
EMITTERS["shr"] = _shift(False)


def _arith(fop, iop):
    def e(r, a, dt, out):
        return getattr(r.b, fop)(*a) if is_float(dt) else getattr(r.b, iop)(*a)
    return e


EMITTERS["add"] = _arith("fadd", "add")
EMITTERS["sub"] = _arith("fsub", "sub")
EMITTERS["mul"] = _arith("fmul", "mul")
EMITTERS["div"] = lambda r, a, dt, out: r.b.fdiv(*a)


def _neg(r, a, dt, out):
    return r.b.fneg(a[0]) if is_float(dt) else r.b.sub(a[0].type(0), a[0])


def _abs(r, a, dt, out):
    if is_float(dt):
        return r.math("fabs", a[0])
    x = a[0]
    return r.b.select(r.b.icmp_signed("<", x, x.type(0)), r.b.sub(x.type(0), x), x)


def _sign(r, a, dt, out):
    x, b = a[0], r.b
    if is_float(dt):
        pos = b.select(b.fcmp_ordered(">", x, x.type(0)), x.type(1), x)
        return b.select(b.fcmp_ordered("<", x, x.type(0)), x.type(-1), pos)
    pos = b.select(b.icmp_signed(">", x, x.type(0)), x.type(1), x)
    return b.select(b.icmp_signed("<", x, x.type(0)), x.type(-1), pos)


EMITTERS["neg"] = _neg
EMITTERS["abs"] = _abs
EMITTERS["sign"] = _sign
EMITTERS["floor"] = lambda r, a, dt, out: r.math("floor", a[0]) if is_float(dt) else a[0]
EMITTERS["ceil"] = lambda r, a, dt, out: r.math("ceil", a[0]) if is_float(dt) else a[0]


def _maxmin(fcmp, icmp):
    def e(r, a, dt, out):
        x, y = a
        b = r.b
        if is_float(dt):
            pick = b.select(b.fcmp_ordered(fcmp, x, y), x, y)
            return b.select(b.fcmp_unordered("uno", x, x), x, pick)   # NaN in x wins too
        if dt == bool:
            return b.or_(x, y) if fcmp == ">" else b.and_(x, y)
        return b.select(b.icmp_signed(icmp, x, y), x, y)
    return e


EMITTERS["max"] = _maxmin(">", ">")
EMITTERS["min"] = _maxmin("<", "<")

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _compare(sym):
    def e(r, a, dt, out):
        if is_float(dt):
            # NumPy: every comparison with NaN is False, except != which is True.
            return r.b.fcmp_unordered(sym, *a) if sym == "!=" else r.b.fcmp_ordered(sym, *a)
        if dt == bool:
            return r.b.icmp_unsigned(sym, *a)
        return r.b.icmp_signed(sym, *a)
    return e


for _name, _sym in _CMP.items():
    EMITTERS[_name] = _compare(_sym)
EMITTERS["and"] = lambda r, a, dt, out: r.b.and_(*a)
EMITTERS["or"] = lambda r, a, dt, out: r.b.or_(*a)
EMITTERS["xor"] = lambda r, a, dt, out: r.b.xor(*a)
EMITTERS["not"] = lambda r, a, dt, out: r.b.not_(a[0])
EMITTERS["select"] = lambda r, a, dt, out: r.b.select(*a)


def _int_divmod(r, x, y):
    """Python floor division and modulo; division by zero gives 0 (as NumPy)."""
    b = r.b
    zero = x.type(0)
    is_zero = b.icmp_signed("==", y, zero)
    safe_y = b.select(is_zero, x.type(1), y)
    q, m = b.sdiv(x, safe_y), b.srem(x, safe_y)
    adjust = b.and_(b.icmp_signed("!=", m, zero),
                    b.icmp_signed("!=", b.icmp_signed("<", m, zero), b.icmp_signed("<", y, zero)))
    q = b.select(adjust, b.sub(q, x.type(1)), q)
    m = b.select(adjust, b.add(m, safe_y), m)
    return b.select(is_zero, zero, q), b.select(is_zero, zero, m)


def _float_divmod(r, x, y):
    """NumPy's npy_divmod: floor division and modulo with the sign of the divisor."""
    b = r.b
    zero, one = x.type(0), x.type(1)
    mod = b.frem(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    fix = b.and_(b.fcmp_unordered("!=", mod, zero),
                 b.icmp_unsigned("!=", b.fcmp_ordered("<", y, zero),
                                 b.fcmp_ordered("<", mod, zero)))
    mod = b.select(fix, b.fadd(mod, y), mod)
    div = b.select(fix, b.fsub(div, one), div)
    floordiv = r.math("floor", div)
    floordiv = b.select(b.fcmp_ordered(">", b.fsub(div, floordiv), x.type(0.5)),
                        b.fadd(floordiv, one), floordiv)
    y_zero = b.fcmp_ordered("==", y, zero)
    return (b.select(y_zero, b.fdiv(x, y), floordiv),
            b.select(y_zero, x.type(math.nan), mod))


def _divmod(which):
    def e(r, a, dt, out):
        pair = _float_divmod(r, *a) if is_float(dt) else _int_divmod(r, *a)
        return pair[which]
    return e


EMITTERS["floordiv"] = _divmod(0)
EMITTERS["mod"] = _divmod(1)


def _convert(r, a, dt, out):
    x, b = a[0], r.b
    src, dst = np.dtype(dt), np.dtype(out)
    to = llvm_type(dst)
    if src == dst:
        return x
    if dst == bool:
        return b.fcmp_unordered("!=", x, x.type(0)) if is_float(src) else \
            b.icmp_signed("!=", x, x.type(0))
    if is_float(dst):
        if is_float(src):
            return b.fpext(x, to) if dst.itemsize > src.itemsize else b.fptrunc(x, to)
        return b.uitofp(x, to) if src == bool else b.sitofp(x, to)
    if is_float(src):
        # Saturating: NaN and out-of-range values give defined results, never poison.
        name = f"llvm.fptosi.sat.i{dst.itemsize * 8}.f{src.itemsize * 8}"
        return b.call(r.function(name, to, [x.type]), [x])
    if src == bool:
        return b.zext(x, to)
    return b.sext(x, to) if dst.itemsize > src.itemsize else b.trunc(x, to)


EMITTERS["convert"] = _convert
