"""STAGE 5 — cuda: CUDA C types, constants and the expression of each core kernel-IR op
(kernel/core.py states their semantics; render() legalizes first, so nothing else arrives).
Signed integer arithmetic goes through unsigned types: wrapping is defined there, while
signed overflow is undefined behaviour that NVRTC may exploit."""

import math

import numpy as np

from ...kernel.core import DEVICE_MATH, TRANSCENDENTAL

CTYPE = {"float64": "double", "float32": "float", "int64": "long long", "int32": "int",
         "bool": "bool"}
UNSIGNED = {"int64": "unsigned long long", "int32": "unsigned int"}
_BITS_TYPE = {"float64": "long long", "float32": "int"}


def ctype(dtype):
    return CTYPE[np.dtype(dtype).name]


def storage_ctype(dtype):
    """bool is one byte in memory, as in NumPy and CuPy."""
    return "unsigned char" if np.dtype(dtype) == bool else ctype(dtype)


def is_float(dtype):
    return np.issubdtype(dtype, np.floating)


def const(value, dtype):
    """A literal that means exactly `value` in `dtype` (hex floats round-trip every bit)."""
    dtype = np.dtype(dtype)
    if dtype == bool:
        return "true" if value else "false"
    if is_float(dtype):
        value = float(value)
        if not math.isfinite(value):
            bits = np.array(value, dtype).view(f"i{dtype.itemsize}").item()
            fn = "__longlong_as_double" if dtype == np.float64 else "__int_as_float"
            return f"{fn}({bits}{'LL' if dtype == np.float64 else ''})"
        return value.hex() + ("f" if dtype == np.float32 else "")
    value = int(value)
    if dtype == np.int64:
        # -2^63 has no literal: the positive part would overflow first.
        return "(-9223372036854775807LL - 1)" if value == -(1 << 63) else f"{value}LL"
    return "(-2147483647 - 1)" if value == -(1 << 31) else f"{value}"


def _math(name, dtype):
    return name if np.dtype(dtype) == np.float64 else name + "f"


def _wrapping(sym):
    def e(a, dt, out):
        if is_float(dt):
            return f"({a[0]} {sym} {a[1]})"
        u = UNSIGNED[np.dtype(dt).name]
        return f"({ctype(dt)})(({u}){a[0]} {sym} ({u}){a[1]})"
    return e


def _neg(a, dt, out):
    if is_float(dt):
        return f"(-({a[0]}))"     # not --0x1p+1 for a negative constant
    return f"({ctype(dt)})(0u - ({UNSIGNED[np.dtype(dt).name]}){a[0]})"


def _bitwise(sym):
    # On bools, & | ^ of 0/1 values are the logical operations.
    return lambda a, dt, out: f"({a[0]} {sym} {a[1]})"


def _shl(a, dt, out):
    # The amount is in [0, bits) after legalization; shifting the unsigned value keeps a
    # negative left operand defined.
    return f"({ctype(dt)})(({UNSIGNED[np.dtype(dt).name]}){a[0]} << {a[1]})"


def _bitcast(a, dt, out):
    src, dst = np.dtype(dt).name, np.dtype(out).name
    fn = {("float64", "int64"): "__double_as_longlong",
          ("int64", "float64"): "__longlong_as_double",
          ("float32", "int32"): "__float_as_int",
          ("int32", "float32"): "__int_as_float"}[src, dst]
    return f"{fn}({a[0]})"


def _convert(a, dt, out):
    """Only the always-defined conversions reach here; C's casts do exactly those (int ->
    narrower int wraps, int -> float and float -> float round to nearest even)."""
    return a[0] if np.dtype(dt) == np.dtype(out) else f"(({ctype(out)}){a[0]})"


EXPR = {
    "add": _wrapping("+"),
    "sub": _wrapping("-"),
    "mul": _wrapping("*"),
    "div": lambda a, dt, out: f"({a[0]} / {a[1]})",
    "neg": _neg,
    "and": _bitwise("&"),
    "or": _bitwise("|"),
    "xor": _bitwise("^"),
    "not": lambda a, dt, out: f"(!{a[0]})" if np.dtype(dt) == bool else f"(~{a[0]})",
    "select": lambda a, dt, out: f"({a[0]} ? {a[1]} : {a[2]})",
    # Divisors are never 0 or -1 here (legalize guarantees it), so C's truncating / and %.
    "idiv": lambda a, dt, out: f"({a[0]} / {a[1]})",
    "irem": lambda a, dt, out: f"({a[0]} % {a[1]})",
    "ishl": _shl,
    "ishr": lambda a, dt, out: f"({a[0]} >> {a[1]})",
    "ftoi": lambda a, dt, out: f"(({ctype(out)}){a[0]})",
    "bitcast": _bitcast,
    "convert": _convert,
    # round is half-to-even: rint under the default rounding mode.
    "round": lambda a, dt, out: f"{_math('rint', dt)}({a[0]})",
    "abs": lambda a, dt, out: f"{_math('fabs', dt)}({a[0]})",
    "frem": lambda a, dt, out: f"{_math('fmod', dt)}({a[0]}, {a[1]})",
}
# C comparisons on floats are ordered, except !=, which is unordered: core's exact rules.
for _name, _sym in {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
                    "ne": "!="}.items():
    EXPR[_name] = (lambda sym: lambda a, dt, out: f"({a[0]} {sym} {a[1]})")(_sym)
for _name in TRANSCENDENTAL + ("floor", "ceil", "trunc", "sqrt", "copysign"):
    EXPR[_name] = (lambda name: lambda a, dt, out: f"{_math(name, dt)}({', '.join(a)})")(_name)
for _name in DEVICE_MATH:                          # the backend's own sin and cos (core.py)
    EXPR[_name] = (lambda name: lambda a, dt, out: f"{_math(name, dt)}({a[0]})")(
        _name[len("device_"):])


def expr(op, args, dtype, out_dtype):
    return EXPR[op](args, dtype, out_dtype)
