"""STAGE 1 — `x[idx] = v` on a traced array, done functionally: the tracer is rebound to a new
traced value that equals x except at idx, as PyTorch users expect from in-place updates.
Static keys (integers, slices, None, ...), boolean masks of x's shape, and keys with integer
arrays or traced integers (mixed with slices as in x[key] reads) are supported. Where an index
repeats, the last write wins, as NumPy's assignment does; only that write gets a gradient."""

import builtins

import numpy as np

from ..errors import DloopNotImplementedError, DloopTypeError
from . import arrays, indexing, ops, utilities
from ..source import user_location
from .tracer import Tracer, bind1


def updated(x, key, value):
    """x with x[key] replaced by value (broadcast), as a new traced value."""
    value = ops.convert(ops._check_operand(value), x.dtype)
    mask = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    if _is_mask(mask, x):
        if np.ndim(value) != 0:
            raise DloopNotImplementedError(
                "x[mask] = v with an array v needs the mask's True count, which is data; "
                "write x = xp.where(mask, v_full, x) with v_full of x's shape", user_location())
        return ops.where(mask, value, x)
    key = indexing.captured_indices(key if isinstance(key, tuple) else (key,))
    if not builtins.all(indexing.is_static(k) for k in key):
        return _scattered(x, key, value)
    try:
        hit = np.zeros(x.shape, dtype=bool)
        hit[key] = True
        shape = hit[key].shape
    except (IndexError, TypeError) as e:
        raise DloopTypeError(f"unsupported index {key!r}: {e}", user_location()) from None
    placed = bind1(ops.P["static_slice_vjp"], [ops.broadcast_to(_traced(value, x), shape)],
                   {"key": key, "shape": x.shape})
    return ops.where(hit, placed, x)


def _traced(value, like):
    """A concrete value as a constant of like's trace, so the placement is a graph op."""
    if isinstance(value, Tracer):
        return value
    return Tracer(like.builder, like.builder.lift(np.asarray(value)))


def _is_mask(key, x):
    dtype = getattr(key, "dtype", None)
    return dtype == np.bool_ and np.shape(key) == x.shape


def _scattered(x, key, value):
    """x[key] = value for a key with index arrays: the flat positions key reads (a gather of
    a constant grid, so indices are checked as reads are), then for each position of x the
    last write to it: a stable sort of the positions and a search for each run's end."""
    size = int(np.prod(x.shape, dtype=np.int64))
    positions = indexing.gather(np.arange(size).reshape(x.shape), indexing._entries(x, key))
    flat = ops.reshape(positions, (-1,))
    count = int(np.prod(np.shape(positions), dtype=np.int64))
    if count == 0:
        return x
    values = ops.reshape(ops.broadcast_to(_traced(value, x), np.shape(positions)), (-1,))
    if isinstance(flat, Tracer):
        order = utilities.argsort(flat)
        ordered = indexing.getitem(flat, (order,))
        cells = np.arange(size)
        end = arrays.searchsorted(ordered, cells, side="right")
        hit = ops.compare("gt", end, arrays.searchsorted(ordered, cells, side="left"))
        last = indexing.getitem(order, (ops.clip(ops.subtract(end, 1), 0, None),))
    else:
        last = np.full(size, -1)
        np.maximum.at(last, flat, np.arange(count))
        hit = last >= 0
        last = np.maximum(last, 0)
    placed = indexing.getitem(values, (last,))
    return ops.reshape(ops.where(hit, placed, ops.reshape(x, (-1,))), x.shape)
