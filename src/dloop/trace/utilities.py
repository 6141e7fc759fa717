"""STAGE 1 — the array API's utility, sorting and 2024.12 additions on traced arrays: any, all,
diff, sort, argsort, take_along_axis, cumulative_prod, reciprocal, nextafter."""

import numpy as np

from ..errors import DloopValueError
from ..ir import prims
from ..ir.semantics import stable_argsort
from . import arrays, indexing, ops
from .arrays import _axis, concat
from .ops import P, bind1, convert, is_traced
from ..source import user_location
from .tracer import Tracer


def _count(x, axis, keepdims):
    return ops.sum(convert(ops.compare("ne", x, 0), np.int64), axis=axis, keepdims=keepdims)


def any(x, /, *, axis=None, keepdims=False):
    # A sum of 0/1 counts rather than a max: it has an identity, so empty arrays work.
    return ops.compare("gt", _count(x, axis, keepdims), 0)


def all(x, /, *, axis=None, keepdims=False):
    x = ops._check_operand(x)
    size = int(np.prod([np.shape(x)[a] for a in ops._axes(x, axis)], dtype=np.int64))
    return ops.compare("eq", _count(x, axis, keepdims), size)


def _along(x, axis, start, stop):
    key = (slice(None),) * axis + (slice(start, stop),)
    return indexing.getitem(x, key)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    x = ops._check_operand(x)
    axis = _axis(axis, np.ndim(x))
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        shape = list(np.shape(x))
        parts = [ops.broadcast_to(p, tuple(shape[:axis] + [1] + shape[axis + 1:]))
                 if np.ndim(p) == 0 else p for p in parts]
        x = concat(parts, axis=axis)
    for _ in range(n):
        x = ops.compare("ne", _along(x, axis, 1, None), _along(x, axis, None, -1)) \
            if ops.result_dtype(x) == bool else \
            ops.subtract(_along(x, axis, 1, None), _along(x, axis, None, -1))
    return x


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    x = ops._check_operand(x)
    axis = _axis(axis, np.ndim(x))
    if not isinstance(x, Tracer):
        return stable_argsort(np.asarray(x), axis=axis, descending=descending)
    return bind1(P["argsort"], [x], {"axis": axis, "descending": bool(descending)})


def take_along_axis(x, indices, /, *, axis=-1):
    """x's elements at `indices` along `axis`: a gather, so the gradient scatters back."""
    x, indices = ops._check_operand(x), ops._check_operand(indices)
    nd = np.ndim(x)
    axis = _axis(axis, nd)
    if np.ndim(indices) != nd:
        raise DloopValueError(f"take_along_axis needs indices of {nd} dimensions, got "
                              f"{np.ndim(indices)}", user_location())
    shape = prims.broadcast_shapes(
        tuple(d if k != axis else 1 for k, d in enumerate(np.shape(x))),
        tuple(d if k != axis else 1 for k, d in enumerate(np.shape(indices))))
    key = []
    for k in range(nd):
        if k == axis:
            key.append(indices)
        else:
            key.append(np.arange(shape[k]).reshape((1,) * k + (shape[k],) + (1,) * (nd - k - 1)))
    return indexing.take_nd(x, tuple(key))


def sort(x, /, *, axis=-1, descending=False, stable=True):
    x = ops._check_operand(x)
    if not is_traced(x):
        out = np.sort(x, axis=axis, kind="stable")
        return np.flip(out, axis) if descending else out
    return take_along_axis(x, argsort(x, axis=axis, descending=descending), axis=axis)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return arrays.cumulative("cumulative_prod", P["cumprod"], np.cumprod, 1,
                             ops._check_operand(x), axis, dtype, include_initial)


def reciprocal(x, /):
    return ops.divide(1, x)


def nextafter(x1, x2, /):
    """The next float after x1 toward x2, from the float's exponent: spacing 2**(e - p + 1)
    above |x1| = 2**e * m, half that when stepping down from an exact power of two."""
    x1, x2 = ops._check_operand(x1), ops._check_operand(x2)
    dt = ops._floating(ops.result_dtype(x1, x2))
    x1, x2 = convert(x1, dt), convert(x2, dt)
    info = np.finfo(dt)
    mag = ops.unary("abs", x1)
    safe = ops.where(ops.compare("ge", mag, info.smallest_normal), mag, info.smallest_normal)
    e = ops.unary("floor", ops.unary("log2", safe, float_only=True))
    # log2 can round across a power of two; correct e so that 2**e <= safe < 2**(e+1).
    e = ops.where(ops.compare("gt", ops.power(2.0, e), safe), ops.subtract(e, 1), e)
    e = ops.where(ops.compare("le", ops.power(2.0, ops.add(e, 1)), safe), ops.add(e, 1), e)
    step = ops.power(2.0, ops.subtract(e, info.nmant))
    toward_zero = ops.compare("lt", ops.multiply(ops.subtract(x2, x1), ops.binary(
        "copysign", 1.0, x1)), 0)
    exact_power = ops.logical_op("and", ops.compare("eq", ops.power(2.0, e), mag),
                                 ops.compare("ge", mag, info.smallest_normal * 2))
    step = ops.where(ops.logical_op("and", toward_zero, exact_power),
                     ops.multiply(step, 0.5), step)
    up = ops.compare("gt", x2, x1)
    out = ops.where(up, ops.add(x1, step), ops.subtract(x1, step))
    infinite = ops.compare("eq", mag, np.inf)
    out = ops.where(infinite, ops.binary("copysign", info.max, x1), out)
    out = ops.where(ops.compare("eq", x1, x2), x2, out)
    nan = ops.logical_op("or", ops.compare("ne", x1, x1), ops.compare("ne", x2, x2))
    return ops.where(nan, np.nan, out)
