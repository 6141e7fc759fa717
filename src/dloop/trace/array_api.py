"""STAGE 1 — the array-API namespace of traced arrays (what `x.__array_namespace__()` returns).
Functions not listed here are not supported yet and raise a DloopError naming them."""

import math

import numpy as np

from ..errors import DloopNotImplementedError
from . import ops
from .source import user_location
from .tracer import Tracer, current_builder, is_tracing

bool = np.bool_
int32, int64 = np.int32, np.int64
float32, float64 = np.float32, np.float64
pi, e, inf, nan = math.pi, math.e, math.inf, math.nan

_UNARY_FLOAT = {"sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos",
                "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "exp": "exp",
                "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2",
                "log10": "log10", "sqrt": "sqrt"}
_UNARY = {"negative": "neg", "abs": "abs", "sign": "sign", "floor": "floor", "ceil": "ceil"}
_BINARY = {"floor_divide": "floordiv", "remainder": "mod", "maximum": "max", "minimum": "min"}
_COMPARE = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
            "equal": "eq", "not_equal": "ne"}
_BITWISE = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor"}


def _define():
    ns = globals()
    for name, prim in _UNARY_FLOAT.items():
        ns[name] = (lambda p: lambda x: ops.unary(p, x, float_only=True))(prim)
    for name, prim in _UNARY.items():
        ns[name] = (lambda p: lambda x: ops.unary(p, x))(prim)
    for name, prim in _BINARY.items():
        ns[name] = (lambda p: lambda a, b: ops.binary(p, a, b))(prim)
    for name, prim in _COMPARE.items():
        ns[name] = (lambda p: lambda a, b: ops.compare(p, a, b))(prim)
    for name, prim in _BITWISE.items():
        ns[name] = (lambda p: lambda a, b: ops.logical(p, a, b))(prim)
    for name in ("and", "or", "xor"):
        ns[f"logical_{name}"] = (lambda p: lambda a, b: ops.logical_op(p, a, b))(name)


_define()


def atan2(a, b):
    return ops.binary("atan2", a, b, float_only=True)


def logical_not(x):
    return ops.logical_op("not", x)


def bitwise_invert(x):
    return ops.logical("not", x)


def positive(x):
    return x


add, subtract, multiply, divide = ops.add, ops.subtract, ops.multiply, ops.divide
pow, square, clip, where, astype = ops.power, ops.square, ops.clip, ops.where, ops.astype
sum, prod, max, min, mean = ops.sum, ops.prod, ops.max, ops.min, ops.mean
reshape, broadcast_to, permute_dims, take = ops.reshape, ops.broadcast_to, ops.permute_dims, ops.take


def asarray(x, dtype=None, copy=None, device=None):
    """Inside a traced function, an array of this namespace: a tracer, so that a NumPy table
    can be indexed by traced indices (xp.asarray(table)[i])."""
    if not isinstance(x, Tracer) and is_tracing():
        builder = current_builder()
        x = Tracer(builder, builder.lift(x if isinstance(x, (bool, int, float)) else
                                         np.asarray(x)))
    return x if dtype is None else ops.astype(x, dtype)


def zeros_like(x, dtype=None, device=None):
    return full_like(x, 0, dtype=dtype)


def ones_like(x, dtype=None, device=None):
    return full_like(x, 1, dtype=dtype)


def full_like(x, fill_value, dtype=None, device=None):
    dtype = np.dtype(dtype or ops.result_dtype(x))
    return ops.broadcast_to(ops.convert(fill_value, dtype), np.shape(x))


def __getattr__(name):
    raise DloopNotImplementedError(f"the array API function '{name}' is not supported on traced "
                                   "arrays yet", user_location())
