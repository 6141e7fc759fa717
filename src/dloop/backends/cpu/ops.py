"""STAGE 5 — cpu: LLVM instructions for each core op of kernel/core.py, for both renderers:
operands are scalars (render.py) or <W x T> vectors (simd.py), and the renderer says which
through r.type_of(dtype) and r.math(name, *args). Composite ops (NumPy's floor division,
NaN-propagating max, saturating conversion, ...) never get here: Backend.compile legalizes
every kernel first."""

import numpy as np
from llvmlite import ir

from ...kernel.core import DEVICE_MATH, TRANSCENDENTAL
from .types import is_float

EMITTERS = {}


def emit(r, op, args, dtypes, out_dtype):
    return EMITTERS[op](r, args, dtypes[0] if dtypes else None, out_dtype)


def _fp(name):
    """A float math function (intrinsic or libm); integer operands never reach these."""
    return lambda r, a, dt, out: r.math(name, *a)


for _name in TRANSCENDENTAL:
    EMITTERS[_name] = _fp(_name)
for _name in DEVICE_MATH:                          # the backend's own sin and cos (core.py)
    EMITTERS[_name] = _fp(_name[len("device_"):])


def _shift(name):
    # Amounts are in [0, bits) after legalization, so LLVM's shifts are defined.
    return lambda r, a, dt, out: getattr(r.b, name)(*a)


EMITTERS["ishl"] = _shift("shl")
EMITTERS["ishr"] = _shift("ashr")


def _arith(fop, iop):
    def e(r, a, dt, out):
        return getattr(r.b, fop)(*a) if is_float(dt) else getattr(r.b, iop)(*a)
    return e


EMITTERS["add"] = _arith("fadd", "add")
EMITTERS["sub"] = _arith("fsub", "sub")
EMITTERS["mul"] = _arith("fmul", "mul")
EMITTERS["div"] = lambda r, a, dt, out: r.b.fdiv(*a)


def _neg(r, a, dt, out):
    return r.b.fneg(a[0]) if is_float(dt) else r.b.sub(ir.Constant(a[0].type, None), a[0])


EMITTERS["neg"] = _neg
for _name in ("floor", "ceil", "trunc", "sqrt", "copysign"):
    EMITTERS[_name] = _fp(_name)
EMITTERS["abs"] = _fp("fabs")
EMITTERS["round"] = _fp("roundeven")

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


EMITTERS["idiv"] = lambda r, a, dt, out: r.b.sdiv(*a)
EMITTERS["irem"] = lambda r, a, dt, out: r.b.srem(*a)
EMITTERS["frem"] = lambda r, a, dt, out: r.b.frem(*a)
# Legalization guarantees an in-range, non-NaN argument: plain fptosi is defined.
EMITTERS["ftoi"] = lambda r, a, dt, out: r.b.fptosi(a[0], r.type_of(out))
EMITTERS["bitcast"] = lambda r, a, dt, out: r.b.bitcast(a[0], r.type_of(out))


def _convert(r, a, dt, out):
    """The conversions core.py keeps: int <-> int, bool -> number, int -> float,
    float <-> float."""
    x, b = a[0], r.b
    src, dst = np.dtype(dt), np.dtype(out)
    to = r.type_of(dst)
    if is_float(dst):
        if is_float(src):
            return b.fpext(x, to) if dst.itemsize > src.itemsize else b.fptrunc(x, to)
        return b.uitofp(x, to) if src == bool else b.sitofp(x, to)
    if src == bool:
        return b.zext(x, to)
    return b.sext(x, to) if dst.itemsize > src.itemsize else b.trunc(x, to)


EMITTERS["convert"] = _convert
