"""STAGE 5 — cpu: LLVM instructions for each elementwise kernel-IR op on <W x T> vectors, for
the SIMD renderer, with the NumPy semantics of ir/semantics.py (as backends/cpu/ops.py gives
them for scalars). Transcendentals call glibc's libmvec (`_ZGV<isa>N<W>v_<name>`), whose
functions are within 4 ulp (glibc's manual, "Known Maximum Errors in Math Functions"), where
the host has the function at this width; otherwise the scalar C function, lane by lane."""

import math

import numpy as np
from llvmlite import ir

from .types import I32, is_float, llvm_type

EMITTERS = {}
# Functions LLVM lowers to vector instructions itself.
_INTRINSICS = {"sqrt", "floor", "ceil", "fabs", "roundeven", "trunc", "copysign"}
TRANSCENDENTALS = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                   "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "pow",
                   "atan2")


def emit(r, op, args, dtypes, out_dtype):
    return EMITTERS[op](r, args, dtypes[0] if dtypes else None, out_dtype)


def c(ty, value):
    """A constant of ty (a vector type: every lane)."""
    return ir.Constant(ty, [value] * ty.count)


def suffix(ty):
    """LLVM's name of a vector type in intrinsic names: v8f64, v8i64, ..."""
    elem = str(ty.element)
    name = {"double": "f64", "float": "f32"}[elem] if elem in ("double", "float") else elem
    return f"v{ty.count}{name}"


def mvec_name(name, dtype, width, arity):
    """libmvec's symbol for `name` over `width` lanes of dtype (x86-64 vector ABI)."""
    bits = width * np.dtype(dtype).itemsize * 8
    isa = {128: "b", 256: "d", 512: "e"}.get(bits)
    if isa is None:
        return None
    return f"_ZGV{isa}N{width}{'v' * arity}_{name}{'f' if dtype == np.float32 else ''}"


def math_call(r, name, *args):
    ty = args[0].type
    if name in _INTRINSICS:
        fn = r.function(f"llvm.{name}.{suffix(ty)}", ty, [ty] * len(args))
        return r.b.call(fn, list(args))
    dtype = np.float64 if str(ty.element) == "double" else np.float32
    symbol = mvec_name(name, dtype, ty.count, len(args))
    if symbol in r.mvec:
        return r.b.call(r.function(symbol, ty, [ty] * len(args)), list(args))
    scalar = ty.element
    fname = name if dtype == np.float64 else name + "f"
    fn = r.function(fname, scalar, [scalar] * len(args))
    out = ir.Constant(ty, None)
    for lane in range(ty.count):
        lanes = [r.b.extract_element(a, I32(lane)) for a in args]
        out = r.b.insert_element(out, r.b.call(fn, lanes), I32(lane))
    return out


def _fp(name):
    return lambda r, a, dt, out: math_call(r, name, *a)


for _name in TRANSCENDENTALS + ("sqrt", "copysign"):
    EMITTERS[_name] = _fp(_name)
EMITTERS["round"] = lambda r, a, dt, out: math_call(r, "roundeven", a[0]) if is_float(dt) \
    else a[0]
EMITTERS["trunc"] = lambda r, a, dt, out: math_call(r, "trunc", a[0]) if is_float(dt) else a[0]
EMITTERS["floor"] = lambda r, a, dt, out: math_call(r, "floor", a[0]) if is_float(dt) else a[0]
EMITTERS["ceil"] = lambda r, a, dt, out: math_call(r, "ceil", a[0]) if is_float(dt) else a[0]


def _shift(left):
    def e(r, a, dt, out):
        x, n = a
        b, ty = r.b, a[0].type
        width = ty.element.width
        negative = b.icmp_signed("<", n, c(ty, 0))
        too_far = b.icmp_signed(">=", n, c(ty, width))
        clamped = b.select(negative, c(ty, 0), b.select(too_far, c(ty, width - 1), n))
        if left:
            return b.select(b.or_(negative, too_far), c(ty, 0), b.shl(x, clamped))
        return b.select(negative, c(ty, 0), b.ashr(x, clamped))
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
EMITTERS["neg"] = lambda r, a, dt, out: r.b.fneg(a[0]) if is_float(dt) else \
    r.b.sub(c(a[0].type, 0), a[0])


def _abs(r, a, dt, out):
    x = a[0]
    if is_float(dt):
        return math_call(r, "fabs", x)
    return r.b.select(r.b.icmp_signed("<", x, c(x.type, 0)), r.b.sub(c(x.type, 0), x), x)


def _sign(r, a, dt, out):
    x, b = a[0], r.b
    one, zero, minus = c(x.type, 1), c(x.type, 0), c(x.type, -1)
    if is_float(dt):
        pos = b.select(b.fcmp_ordered(">", x, zero), one, x)
        return b.select(b.fcmp_ordered("<", x, zero), minus, pos)
    pos = b.select(b.icmp_signed(">", x, zero), one, x)
    return b.select(b.icmp_signed("<", x, zero), minus, pos)


EMITTERS["abs"] = _abs
EMITTERS["sign"] = _sign


def _maxmin(sym):
    def e(r, a, dt, out):
        x, y = a
        b = r.b
        if is_float(dt):
            pick = b.select(b.fcmp_ordered(sym, x, y), x, y)
            return b.select(b.fcmp_unordered("uno", x, x), x, pick)   # NaN in x wins too
        if dt == bool:
            return b.or_(x, y) if sym == ">" else b.and_(x, y)
        return b.select(b.icmp_signed(sym, x, y), x, y)
    return e


EMITTERS["max"] = _maxmin(">")
EMITTERS["min"] = _maxmin("<")

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _compare(sym):
    def e(r, a, dt, out):
        if is_float(dt):
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
    """Python floor division and modulo; division by zero gives 0 (as NumPy). Lanes the mask
    leaves out may hold anything, zero divisors included: the divisor is made safe first."""
    b, ty = r.b, x.type
    zero = c(ty, 0)
    is_zero = b.icmp_signed("==", y, zero)
    safe_y = b.select(is_zero, c(ty, 1), y)
    q, m = b.sdiv(x, safe_y), b.srem(x, safe_y)
    adjust = b.and_(b.icmp_signed("!=", m, zero),
                    b.icmp_signed("!=", b.icmp_signed("<", m, zero), b.icmp_signed("<", y, zero)))
    q = b.select(adjust, b.sub(q, c(ty, 1)), q)
    m = b.select(adjust, b.add(m, safe_y), m)
    return b.select(is_zero, zero, q), b.select(is_zero, zero, m)


def _float_divmod(r, x, y):
    """NumPy's npy_divmod: floor division and modulo with the sign of the divisor."""
    b, ty = r.b, x.type
    zero, one = c(ty, 0.0), c(ty, 1.0)
    mod = b.frem(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    fix = b.and_(b.fcmp_unordered("!=", mod, zero),
                 b.icmp_unsigned("!=", b.fcmp_ordered("<", y, zero),
                                 b.fcmp_ordered("<", mod, zero)))
    mod = b.select(fix, b.fadd(mod, y), mod)
    div = b.select(fix, b.fsub(div, one), div)
    floordiv = math_call(r, "floor", div)
    floordiv = b.select(b.fcmp_ordered(">", b.fsub(div, floordiv), c(ty, 0.5)),
                        b.fadd(floordiv, one), floordiv)
    y_zero = b.fcmp_ordered("==", y, zero)
    return (b.select(y_zero, b.fdiv(x, y), floordiv),
            b.select(y_zero, c(ty, math.nan), mod))


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
    to = ir.VectorType(llvm_type(dst), x.type.count)
    if src == dst:
        return x
    if dst == bool:
        zero = c(x.type, 0)
        return b.fcmp_unordered("!=", x, zero) if is_float(src) else b.icmp_signed("!=", x, zero)
    if is_float(dst):
        if is_float(src):
            return b.fpext(x, to) if dst.itemsize > src.itemsize else b.fptrunc(x, to)
        return b.uitofp(x, to) if src == bool else b.sitofp(x, to)
    if is_float(src):
        # Saturating: NaN and out-of-range values give defined results, never poison.
        name = f"llvm.fptosi.sat.{suffix(to)}.{suffix(x.type)}"
        return b.call(r.function(name, to, [x.type]), [x])
    if src == bool:
        return b.zext(x, to)
    return b.sext(x, to) if dst.itemsize > src.itemsize else b.trunc(x, to)


EMITTERS["convert"] = _convert
