"""STAGE 1 — `x[idx] = v` on a traced array, done functionally: the tracer is rebound to a new
traced value that equals x except at idx, as PyTorch users expect from in-place updates.
Static keys (integers, slices, None, ...) and boolean masks of x's shape are supported."""

import builtins

import numpy as np

from ..errors import DloopNotImplementedError, DloopTypeError
from . import ops
from ..source import user_location
from .tracer import Tracer, bind1


def _static(key):
    return builtins.all(isinstance(k, (int, np.integer, slice, type(None), type(Ellipsis)))
                        and not isinstance(k, builtins.bool) for k in key)


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
    key = key if isinstance(key, tuple) else (key,)
    if not _static(key):
        raise DloopNotImplementedError(
            "x[idx] = v on a traced array supports integers, slices, None, ... and boolean "
            "masks of x's shape; for integer array indices write x = xp.where(hit, v, x)",
            user_location())
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
