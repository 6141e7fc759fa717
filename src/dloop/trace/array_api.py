"""STAGE 1 — the array-API namespace of traced arrays (what `x.__array_namespace__()` returns),
for the standard's 2023.12 elementwise, creation, manipulation, searching, statistical and
linear-algebra sections. A name not defined here raises a DloopError naming it."""

import functools
import math

import numpy as np

from ..errors import DloopAttributeError
from ..libraries import is_foreign_array
from ..ir import elementwise
from . import arrays, fft, linalg, ops, special  # noqa: F401  (xp.fft, xp.linalg, xp.special)
from .dtypes import (__array_namespace_info__, can_cast, finfo, iinfo, isdtype,  # noqa: F401
                     result_type)
from .utilities import (all, any, argsort, cumulative_prod, diff, nextafter,  # noqa: F401
                        reciprocal, sort, take_along_axis)
from ..source import user_location
from .tracer import Tracer, captured

__array_api_version__ = "2023.12"

bool = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float32, float64 = np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
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
    return ops.positive(x) if isinstance(x, Tracer) else +x


pow, square, where, astype = ops.power, ops.square, ops.where, ops.astype


def clip(x, /, min=None, max=None):
    return ops.clip(x, min, max, keep_dtype=True)
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
    can be indexed by traced indices (xp.asarray(table)[i]) and updated in place. Scalars
    stay concrete NumPy values, so that checks on them (if xp.any(p < 0)) still run."""
    if isinstance(x, (list, tuple)) and ops.is_traced(*x):
        x = arrays.stack([asarray(v) for v in x])
    if isinstance(x, Tracer):
        # A new object for the same value: an in-place update of the copy must not rebind x.
        x = x.copied() if copy else x
    else:
        if not isinstance(x, np.ndarray) and is_foreign_array(x):
            x = captured(x, user_location())     # a device table stays on the device
        if not isinstance(x, Tracer):
            x = np.asarray(x, dtype=dtype)
            x = arrays.constant(x)     # 0-d too: updatable, and its value still folds
    return x if dtype is None else ops.astype(x, dtype)


def full_like(x, fill_value, dtype=None, device=None):
    """Traced like x, so that it can be updated in place (out[idx] = v) as an array of this
    namespace."""
    dtype = np.dtype(dtype or ops.result_dtype(x))
    return asarray(ops.broadcast_to(ops.convert(fill_value, dtype), ops.shape_of(x)))


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
    zero = ops.convert(0, ops.result_dtype(ops._check_operand(x)))       # bool stays bool
    return ops.where(np.tri(*np.shape(x)[-2:], k=k, dtype=np.bool_), x, zero)


def triu(x, k=0):
    zero = ops.convert(0, ops.result_dtype(ops._check_operand(x)))
    return ops.where(np.tri(*np.shape(x)[-2:], k=k - 1, dtype=np.bool_), zero, x)


def __getattr__(name):
    # An AttributeError too, so that hasattr(xp, "fft") is False, as libraries probe.
    raise DloopAttributeError(f"the array API function '{name}' is not supported on traced "
                              "arrays yet", user_location())


# The standard's functions return new arrays, except these views and conversions: a result
# that is an argument itself (clip without bounds, tile by 1) becomes a new tracer.
_VIEWS = {"asarray", "astype", "reshape", "permute_dims", "matrix_transpose", "squeeze",
          "expand_dims", "broadcast_to", "broadcast_arrays", "real", "moveaxis", "unstack",
          "flip"}
for _name, _fn in list(globals().items()):
    if callable(_fn) and not isinstance(_fn, type) and not _name.startswith("_") and \
            _name not in _VIEWS and getattr(_fn, "__module__", "").startswith("dloop."):
        globals()[_name] = (lambda fn: functools.wraps(fn)(
            lambda *args, **kwargs: ops.distinct(fn(*args, **kwargs), args)))(_fn)
    elif _name in _VIEWS:        # a WeakTracer (the loop index) comes back a NumPy value
        globals()[_name] = (lambda fn: functools.wraps(fn)(
            lambda *args, **kwargs: ops.strong(fn(*args, **kwargs))))(_fn)
