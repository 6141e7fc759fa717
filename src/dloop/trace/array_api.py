"""STAGE 1 — the array-API namespace of traced arrays (what `x.__array_namespace__()` returns),
for the standard's 2023.12 elementwise, creation, manipulation, searching, statistical and
linear-algebra sections. A name not defined here raises a DloopError naming it."""

import math

import numpy as np

from ..errors import DloopNotImplementedError
from . import arrays, ops
from .source import user_location
from .tracer import Tracer, current_builder, is_tracing

__array_api_version__ = "2023.12"

bool = np.bool_
int32, int64 = np.int32, np.int64
float32, float64 = np.float32, np.float64
pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
newaxis = None

_UNARY_FLOAT = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt")
_UNARY = {"negative": "neg", "abs": "abs", "sign": "sign", "floor": "floor", "ceil": "ceil",
          "round": "round", "trunc": "trunc"}
_BINARY = {"floor_divide": "floordiv", "remainder": "mod", "maximum": "max", "minimum": "min"}
_COMPARE = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
            "equal": "eq", "not_equal": "ne"}
_BITWISE = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
            "bitwise_left_shift": "shl", "bitwise_right_shift": "shr"}


def _define():
    ns = globals()
    for name in _UNARY_FLOAT:
        ns[name] = (lambda p: lambda x: ops.unary(p, x, float_only=True))(name)
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
reshape, broadcast_to, permute_dims = ops.reshape, ops.broadcast_to, ops.permute_dims
hypot, logaddexp = arrays.hypot, arrays.logaddexp
copysign, signbit = arrays.copysign, arrays.signbit
isnan, isinf, isfinite = arrays.isnan, arrays.isinf, arrays.isfinite
real, imag, conj = arrays.real, arrays.imag, arrays.conj
roll, concat, stack, unstack, flip = arrays.roll, arrays.concat, arrays.stack, arrays.unstack, \
    arrays.flip
expand_dims, squeeze, moveaxis, tile = arrays.expand_dims, arrays.squeeze, arrays.moveaxis, \
    arrays.tile
repeat, take, broadcast_arrays = arrays.repeat, arrays.take, arrays.broadcast_arrays
matmul, tensordot, vecdot, matrix_transpose = arrays.matmul, arrays.tensordot, arrays.vecdot, \
    arrays.matrix_transpose
cumulative_sum, var, std, count_nonzero = arrays.cumulative_sum, arrays.var, arrays.std, \
    arrays.count_nonzero
argmax, argmin, searchsorted = arrays.argmax, arrays.argmin, arrays.searchsorted
arange, linspace, eye, zeros, ones, full, empty = arrays.arange, arrays.linspace, arrays.eye, \
    arrays.zeros, arrays.ones, arrays.full, arrays.empty


def asarray(x, dtype=None, copy=None, device=None):
    """Inside a traced function, an array of this namespace: a tracer, so that a NumPy table
    can be indexed by traced indices (xp.asarray(table)[i])."""
    if not isinstance(x, Tracer) and is_tracing():
        builder = current_builder()
        x = Tracer(builder, builder.lift(x if isinstance(x, (int, float)) else np.asarray(x)))
    return x if dtype is None else ops.astype(x, dtype)


def full_like(x, fill_value, dtype=None, device=None):
    dtype = np.dtype(dtype or ops.result_dtype(x))
    return ops.broadcast_to(ops.convert(fill_value, dtype), np.shape(x))


def zeros_like(x, dtype=None, device=None):
    return full_like(x, 0, dtype=dtype)


def ones_like(x, dtype=None, device=None):
    return full_like(x, 1, dtype=dtype)


empty_like = zeros_like


def meshgrid(*arrays_, indexing="xy"):
    shapes = [np.size(a) for a in arrays_]
    if indexing == "xy" and len(shapes) >= 2:
        shapes[0], shapes[1] = shapes[1], shapes[0]
    out = []
    for k, a in enumerate(arrays_):
        axis = k if indexing != "xy" or k >= 2 else 1 - k
        shape = [1] * len(shapes)
        shape[axis] = np.size(a)
        out.append(ops.broadcast_to(ops.reshape(a, tuple(shape)), tuple(shapes)))
    return out


def tril(x, k=0):
    return ops.where(np.tri(*np.shape(x)[-2:], k=k, dtype=np.bool_), x, 0)


def triu(x, k=0):
    return ops.where(np.tri(*np.shape(x)[-2:], k=k - 1, dtype=np.bool_), 0, x)


def __getattr__(name):
    raise DloopNotImplementedError(f"the array API function '{name}' is not supported on traced "
                                   "arrays yet", user_location())
