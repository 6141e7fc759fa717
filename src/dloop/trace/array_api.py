"""STAGE 1 — the array-API namespace of traced arrays (what `x.__array_namespace__()` returns),
for the standard's 2023.12 elementwise, creation, manipulation, searching, statistical and
linear-algebra sections. A name not defined here raises a DloopError naming it."""

import math

import numpy as np

from ..errors import DloopNotImplementedError
from ..ir import elementwise
from . import arrays, ops
from .source import user_location
from .tracer import Tracer, current_builder, is_tracing

__array_api_version__ = "2023.12"

bool = np.bool_
int32, int64 = np.int32, np.int64
float32, float64 = np.float32, np.float64
pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
newaxis = None


def _row_function(row):
    if row.spelling == "compare":
        return lambda a, b: ops.compare(row.name, a, b)
    if row.spelling == "bitwise":
        return lambda *xs: ops.logical(row.name, *xs)
    if row.arity == 1:
        return lambda x: ops.unary(row.name, x, float_only=row.float_only)
    return lambda a, b: ops.binary(row.name, a, b, float_only=row.float_only)


def _define():
    ns = globals()
    for row in elementwise.ROWS:
        if row.api is not None:
            ns[row.api] = _row_function(row)
    for name in ("and", "or", "xor"):
        ns[f"logical_{name}"] = (lambda p: lambda a, b: ops.logical_op(p, a, b))(name)


_define()


def logical_not(x):
    return ops.logical_op("not", x)


def positive(x):
    return x


pow, square, clip, where, astype = ops.power, ops.square, ops.clip, ops.where, ops.astype
sum, prod, max, min, mean = ops.sum, ops.prod, ops.max, ops.min, ops.mean
reshape, broadcast_to, permute_dims = ops.reshape, ops.broadcast_to, ops.permute_dims
hypot, logaddexp = arrays.hypot, arrays.logaddexp
signbit = arrays.signbit
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
