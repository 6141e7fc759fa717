"""STAGE 1 — whole-array operations: manipulation, linear algebra, statistics, searching and
creation. Most are compositions of primitives; roll, concat, matmul, cumsum, argmax/argmin
and searchsorted are host primitives of their own."""

import builtins
import math
import operator

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ..errors import DloopNotImplementedError, DloopTypeError, DloopValueError
from . import indexing, ops
from .ops import P, bind1, convert, is_traced, result_dtype
from ..source import user_location
from .tracer import Tracer, current_builder, is_tracing


def _axis(axis, ndim):
    try:
        return normalize_axis_index(axis, ndim)
    except (np.exceptions.AxisError, TypeError):
        raise DloopValueError(f"axis {axis} is out of range for {ndim} dimensions",
                              user_location()) from None


def _operand(x):
    return ops._check_operand(x)


# ---- manipulation ----

def roll(x, shift, axis=None):
    x = _operand(x)
    if not isinstance(x, Tracer):
        return np.roll(x, shift, axis)
    if axis is None:
        return ops.reshape(roll(ops.reshape(x, (-1,)), shift, 0), x.shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if isinstance(shift, Tracer) or (isinstance(shift, (tuple, list)) and
                                     builtins.any(isinstance(s, Tracer) for s in shift)):
        raise DloopNotImplementedError("roll by a traced shift", user_location())
    shifts = (shift,) * len(axes) if isinstance(shift, (int, np.integer)) else tuple(shift)
    if len(shifts) != len(axes):
        raise DloopValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes; give one "
                              "shift per axis", user_location())
    total = {}
    for a, s in zip(axes, shifts):          # an axis named twice is rolled by the sum
        a = _axis(a, x.ndim)
        total[a] = total.get(a, 0) + int(s)
    return bind1(P["roll"], [x], {"shift": tuple(total.values()), "axes": tuple(total)})


def concat(arrays, axis=0):
    arrays = [_operand(a) for a in arrays]
    dt = result_dtype(*arrays)
    arrays = [convert(a, dt) for a in arrays]
    if axis is None:
        arrays, axis = [ops.reshape(a, (-1,)) for a in arrays], 0
    if not is_traced(*arrays):
        return np.concatenate(arrays, axis=axis)
    axis = _axis(axis, np.ndim(arrays[0]))
    shapes = [np.shape(a) for a in arrays]
    if builtins.any(len(s) != len(shapes[0]) or
                    builtins.any(d != e for k, (d, e) in enumerate(zip(s, shapes[0]))
                                 if k != axis) for s in shapes):
        raise DloopValueError(f"concat needs equal shapes except along axis {axis}: {shapes}",
                              user_location())
    arrays = [a if isinstance(a, Tracer) else np.asarray(a) for a in arrays]
    return bind1(P["concat"], arrays, {"axis": axis})


def expand_dims(x, axis=0):
    """axis: an int or, as NumPy allows, a tuple of the new axes' positions."""
    shape = list(np.shape(x))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    try:
        axes = normalize_axis_tuple(axes, len(shape) + len(axes))
    except (np.exceptions.AxisError, TypeError, ValueError):
        raise DloopValueError(f"axis {axis} is out of range for {len(shape)} dimensions, or "
                              "repeated", user_location()) from None
    for a in sorted(axes):
        shape.insert(a, 1)
    return ops.reshape(x, tuple(shape))


def squeeze(x, axis):
    axes = normalize_axis_tuple(axis, np.ndim(x))
    if builtins.any(np.shape(x)[a] != 1 for a in axes):
        raise DloopValueError("squeeze of an axis whose length is not 1", user_location())
    return ops.reshape(x, tuple(d for k, d in enumerate(np.shape(x)) if k not in axes))


def stack(arrays, axis=0):
    ndim = np.ndim(arrays[0]) + 1
    axis = _axis(axis, ndim)
    return concat([expand_dims(a, axis) for a in arrays], axis=axis)


def unstack(x, axis=0):
    axis = _axis(axis, np.ndim(x))
    return tuple(indexing.getitem(x, (slice(None),) * axis + (k,)) for k in range(np.shape(x)[axis]))


def flip(x, axis=None):
    axes = range(np.ndim(x)) if axis is None else normalize_axis_tuple(axis, np.ndim(x))
    key = tuple(slice(None, None, -1) if k in axes else slice(None) for k in range(np.ndim(x)))
    if not key:
        return x
    # NumPy's flip is a view: an update of it writes x (Tracer.__getitem__ makes the view).
    return x[key] if isinstance(x, Tracer) else indexing.getitem(x, key)


def moveaxis(x, source, destination):
    src = normalize_axis_tuple(source, np.ndim(x))
    dst = normalize_axis_tuple(destination, np.ndim(x))
    order = [k for k in range(np.ndim(x)) if k not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return ops.permute_dims(x, order)


def matrix_transpose(x):
    if np.ndim(x) < 2:
        raise DloopValueError("matrix_transpose needs 2 or more dimensions", user_location())
    order = list(range(np.ndim(x)))
    order[-2:] = order[-1], order[-2]
    return ops.permute_dims(x, order)


def tile(x, reps):
    # NumPy's: one count (a NumPy integer, a 0-d array) or a sequence of them.
    reps = (operator.index(reps),) if np.ndim(reps) == 0 else tuple(map(operator.index, reps))
    shape = np.shape(x)
    nd = builtins.max(len(shape), len(reps))
    shape = (1,) * (nd - len(shape)) + tuple(shape)
    reps = (1,) * (nd - len(reps)) + reps
    x = ops.reshape(x, shape)
    wide = tuple(d for pair in zip(reps, shape) for d in pair)
    x = ops.reshape(x, tuple(d for s in shape for d in (1, s)))
    return ops.reshape(ops.broadcast_to(x, wide), tuple(r * s for r, s in zip(reps, shape)))


def repeat(x, repeats, axis=None):
    if np.ndim(repeats) != 0 or isinstance(repeats, Tracer):
        raise DloopNotImplementedError("repeat with per-element counts", user_location())
    repeats = operator.index(repeats)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    axis = _axis(axis, np.ndim(x))
    idx = np.repeat(np.arange(np.shape(x)[axis]), repeats)
    return take(x, idx, axis=axis)


def take(x, indices, axis=None):
    """x's elements at `indices` along `axis` (the flattened x when axis is None)."""
    x = _operand(x)
    if axis is None:
        x, axis = (ops.reshape(x, (-1,)) if np.ndim(x) != 1 else x), 0
    axis = _axis(axis, np.ndim(x))
    indices = _operand(indices)
    shape, ishape = np.shape(x), np.shape(indices)
    nd, ni = len(shape), len(ishape)
    out_nd = nd - 1 + ni
    key = []
    for k in range(nd):
        if k == axis:
            key.append(ops.reshape(indices, (1,) * axis + ishape + (1,) * (nd - axis - 1)))
        else:
            pos = k if k < axis else k - 1 + ni
            key.append(np.arange(shape[k]).reshape((1,) * pos + (shape[k],) +
                                                   (1,) * (out_nd - pos - 1)))
    return indexing.take_nd(x, tuple(key))


def broadcast_arrays(*arrays):
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    return [ops.broadcast_to(a, shape) for a in arrays]


# ---- linear algebra ----

def matmul(a, b):
    a, b = _operand(a), _operand(b)
    dt = result_dtype(a, b)
    a, b = convert(a, dt), convert(b, dt)
    if not is_traced(a, b):
        return np.matmul(a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        raise DloopValueError("matmul needs operands of 1 or more dimensions", user_location())
    a2 = expand_dims(a, 0) if np.ndim(a) == 1 else a
    b2 = expand_dims(b, 1) if np.ndim(b) == 1 else b
    if np.shape(a2)[-1] != np.shape(b2)[-2]:
        raise DloopValueError(f"matmul: shapes {np.shape(a)} and {np.shape(b)} do not align",
                              user_location())
    out = bind1(P["matmul"], [a2 if isinstance(a2, Tracer) else np.asarray(a2),
                              b2 if isinstance(b2, Tracer) else np.asarray(b2)])
    if np.ndim(a) == 1:
        out = squeeze(out, -2)
    if np.ndim(b) == 1:
        out = squeeze(out, -1)
    return out


def tensordot(a, b, axes=2):
    nd_a, nd_b = np.ndim(a), np.ndim(b)
    if isinstance(axes, int):
        axes_a, axes_b = list(range(nd_a - axes, nd_a)), list(range(axes))
    else:
        axes_a = [int(k) % nd_a for k in np.atleast_1d(axes[0])]
        axes_b = [int(k) % nd_b for k in np.atleast_1d(axes[1])]
    free_a = [k for k in range(nd_a) if k not in axes_a]
    free_b = [k for k in range(nd_b) if k not in axes_b]
    sa, sb = np.shape(a), np.shape(b)
    if len(axes_a) != len(axes_b) or any(sa[i] != sb[j] for i, j in zip(axes_a, axes_b)):
        raise DloopValueError(f"tensordot: the contracted axes {tuple(axes_a)} of shape {sa} and "
                              f"{tuple(axes_b)} of shape {sb} differ in length", user_location())
    m = int(np.prod([sa[k] for k in free_a], dtype=np.int64))
    n = int(np.prod([sb[k] for k in free_b], dtype=np.int64))
    k = int(np.prod([sa[j] for j in axes_a], dtype=np.int64))
    a2 = ops.reshape(ops.permute_dims(a, free_a + axes_a), (m, k))
    b2 = ops.reshape(ops.permute_dims(b, axes_b + free_b), (k, n))
    return ops.reshape(matmul(a2, b2), tuple(sa[j] for j in free_a) + tuple(sb[j] for j in free_b))


def vecdot(a, b, axis=-1):
    """sum(conj(a) * b): the standard conjugates the first vector (a no-op on reals)."""
    product = ops.multiply(conj(a), b)      # summed in its dtype (int32 stays int32)
    return ops.sum(product, axis=axis, dtype=ops.result_dtype(product))


# ---- statistics ----

def cumulative_sum(x, axis=None, dtype=None, include_initial=False):
    return cumulative("cumulative_sum", P["cumsum"], np.cumsum, 0, x, axis, dtype,
                      include_initial)


def cumulative(name, prim, np_fn, identity, x, axis, dtype, include_initial):
    """cumulative_sum and cumulative_prod: the array API's rules for axis, dtype and the
    leading identity element."""
    x = _operand(x)
    if axis is None:
        if np.ndim(x) != 1:
            raise DloopValueError(f"{name} needs an axis for arrays of 2 or more dimensions",
                                  user_location())
        axis = 0
    if dtype is not None:
        x = convert(x, dtype)
    elif x.dtype == bool or np.issubdtype(x.dtype, np.integer):
        x = convert(x, np.int64)
    axis = _axis(axis, np.ndim(x))
    out = bind1(prim, [x], {"axis": axis}) if isinstance(x, Tracer) else np_fn(x, axis=axis)
    if include_initial:
        shape = list(np.shape(x))
        shape[axis] = 1
        out = concat([ops.broadcast_to(convert(identity, out.dtype), tuple(shape)), out],
                     axis=axis)
    return out


def var(x, axis=None, correction=0.0, keepdims=False):
    x = _operand(x)
    mean = ops.mean(x, axis=axis, keepdims=True)
    count = int(np.prod([np.shape(x)[a] for a in ops._axes(x, axis)], dtype=np.int64))
    centered = ops.subtract(x, mean)
    # |x - mean|^2: a real variance of complex values, as NumPy's.
    total = ops.sum(real(ops.multiply(conj(centered), centered)), axis=axis, keepdims=keepdims)
    return ops.divide(total, builtins.max(count - correction, 0))


def std(x, axis=None, correction=0.0, keepdims=False):
    return ops.unary("sqrt", var(x, axis, correction, keepdims), float_only=True)


def count_nonzero(x, axis=None, keepdims=False):
    return ops.sum(ops.compare("ne", x, 0), axis=axis, keepdims=keepdims)


# ---- searching ----

def _argreduce(op, x, axis, keepdims):
    x = _operand(x)
    if not isinstance(x, Tracer):
        fn = np.argmax if op == "max" else np.argmin
        return fn(x, axis=axis, keepdims=keepdims)
    if axis is None:
        out = _argreduce(op, ops.reshape(x, (-1,)), 0, False)
        return ops.reshape(out, (1,) * x.ndim) if keepdims else out
    if x.shape[_axis(axis, x.ndim)] == 0:
        raise DloopValueError(f"arg{op} along an axis of length 0 has no answer",
                              user_location())
    return bind1(P["argreduce"], [x], {"op": op, "axis": _axis(axis, x.ndim),
                                        "keepdims": bool(keepdims)})


def argmax(x, axis=None, keepdims=False):
    return _argreduce("max", x, axis, keepdims)


def argmin(x, axis=None, keepdims=False):
    return _argreduce("min", x, axis, keepdims)


def searchsorted(x1, x2, side="left", sorter=None):
    if sorter is not None:
        raise DloopNotImplementedError("searchsorted with a sorter", user_location())
    x1, x2 = _operand(x1), _operand(x2)
    if not is_traced(x1, x2):
        return np.searchsorted(x1, x2, side=side)
    dt = result_dtype(x1, x2)
    return bind1(P["searchsorted"], [convert(x1, dt), convert(x2, dt)], {"side": side})


# ---- creation: constants, traced while tracing so that they can be updated in place
# (out = xp.zeros(n); out[1:] = v) and indexed by traced indices (xp.arange(n)[i]) ----

def _concrete(name, *args):
    if is_traced(*args):
        raise DloopTypeError(f"{name} needs concrete (untraced) sizes and values",
                             user_location())


def constant(array):
    if not is_tracing():
        return array
    builder = current_builder()
    return Tracer(builder, builder.lift(array))


def arange(start, stop=None, step=1, *, dtype=None, device=None):
    _concrete("arange", start, stop, step)
    return constant(np.arange(start, stop, step, dtype=dtype))


def linspace(start, stop, num, *, dtype=None, device=None, endpoint=True):
    _concrete("linspace", start, stop, num)
    return constant(np.linspace(start, stop, num, dtype=dtype, endpoint=endpoint))


def eye(n_rows, n_cols=None, k=0, *, dtype=None, device=None):
    return constant(np.eye(n_rows, n_cols, k, dtype=dtype or np.float64))


def zeros(shape, *, dtype=None, device=None):
    return constant(np.zeros(shape, dtype=dtype or np.float64))


def ones(shape, *, dtype=None, device=None):
    return constant(np.ones(shape, dtype=dtype or np.float64))


def full(shape, fill_value, *, dtype=None, device=None):
    if is_traced(fill_value):
        return ops.broadcast_to(ops.astype(fill_value, dtype or fill_value.dtype),
                                (shape,) if isinstance(shape, int) else tuple(shape))
    return constant(np.full(shape, fill_value, dtype=dtype))


empty = zeros


# ---- elementwise functions written as compositions ----

def hypot(a, b):
    a, b = _operand(a), _operand(b)
    dt = ops._floating(result_dtype(a, b))       # NEP 50: a Python scalar takes a's dtype
    a, b = ops.convert(a, dt), ops.convert(b, dt)
    a, b = ops.unary("abs", a, float_only=True), ops.unary("abs", b, float_only=True)
    big, small = ops.binary("max", a, b), ops.binary("min", a, b)
    ratio = ops.divide(small, ops.where(ops.compare("eq", big, 0), 1, big))
    scaled = ops.multiply(big, ops.unary("sqrt", ops.add(1, ops.multiply(ratio, ratio)),
                                         float_only=True))
    # IEEE 754: an infinite operand makes hypot infinite, even beside a NaN (inf / inf and
    # max(inf, nan) would make it NaN).
    infinite = ops.logical_op("or", ops.compare("eq", a, math.inf),
                              ops.compare("eq", b, math.inf))
    return ops.where(infinite, math.inf, scaled)


def logaddexp(a, b):
    a, b = _operand(a), _operand(b)
    dt = ops._floating(result_dtype(a, b))
    a, b = ops.convert(a, dt), ops.convert(b, dt)
    big = ops.binary("max", a, b, float_only=True)
    equal = ops.compare("eq", a, b)
    # a == b: inf - inf would be NaN where NumPy gives inf (or -inf); the gradient there,
    # 1/2 to each, comes from max's rule at a tie, the other term's being 0.
    diff = ops.unary("abs", ops.subtract(ops.where(equal, 0, a), ops.where(equal, 0, b)),
                     float_only=True)
    return ops.add(big, ops.unary("log1p", ops.unary("exp", ops.unary("neg", diff),
                                                      float_only=True), float_only=True))


def isnan(x):
    x = _operand(x)
    if not np.issubdtype(result_dtype(x), np.inexact):      # integers are never NaN
        return ops.compare("ne", ops.multiply(x, 0), 0)
    return ops.compare("ne", x, x)


def isinf(x):
    x = _operand(x)
    if not np.issubdtype(result_dtype(x), np.inexact):
        return ops.compare("ne", ops.multiply(x, 0), 0)
    return ops.compare("eq", ops.unary("abs", x), math.inf)


def isfinite(x):
    return ops.logical_op("not", ops.logical_op("or", isnan(x), isinf(x)))


def signbit(x):
    x = ops.convert(_operand(x), ops._floating(result_dtype(x)))
    return ops.compare("lt", ops.binary("copysign", 1.0, x), 0)


def copysign(a, b):
    return ops.binary("copysign", a, b, float_only=True)


def _is_complex(x):
    return ops.result_dtype(_operand(x)).kind == "c"


def real(x):
    return ops.complex_part("real", x) if _is_complex(x) else x


def conj(x):
    return ops.complex_part("conj", x) if _is_complex(x) else x


def imag(x):
    return ops.complex_part("imag", x) if _is_complex(x) else \
        ops.broadcast_to(ops.convert(0, ops.result_dtype(_operand(x))), np.shape(x))


def angle(z, deg=False):
    """NumPy's angle: the argument of z, atan2(imag, real) (0 or pi for reals)."""
    z = ops.convert(_operand(z), ops._floating(ops.result_dtype(_operand(z))))
    out = ops.binary("atan2", imag(z), real(z), float_only=True)
    return ops.multiply(out, 180 / math.pi) if deg else out


Tracer.__matmul__ = lambda self, other: matmul(self, other)
Tracer.__rmatmul__ = lambda self, other: matmul(other, self)
Tracer.mT = property(matrix_transpose)
Tracer.real, Tracer.imag = property(real), property(imag)
