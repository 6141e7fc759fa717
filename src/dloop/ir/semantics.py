"""STAGE 2 — the reference meaning of each elementwise primitive, as NumPy on whole arrays.
Constant folding, the interpreter and every compiled backend agree with these."""

import numpy as np

from .elementwise import ROWS

NUMPY = {r.name: r.numpy for r in ROWS}
# Primitives whose meaning is given by a function of their own (ir/special.py registers the
# special functions here): fn(*args, **params).
EXTRA = {}


def convert(x, dtype):
    """x as `dtype`. Float to integer saturates: NaN gives 0, values beyond the integer type's
    range give its min or max (LLVM's fptosi.sat), so no backend meets undefined behaviour."""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if not (np.issubdtype(x.dtype, np.floating) and np.issubdtype(dtype, np.integer)):
        return x.astype(dtype)
    info = np.iinfo(dtype)
    # float(info.max) rounds up to 2**63 for int64: compare against that bound, not clip to it.
    high = x >= np.float64(info.max) + 1.0 if dtype.itemsize < 8 else x >= 2.0 ** 63
    low = x < np.float64(info.min)
    safe = np.where(np.isnan(x) | high | low, 0, x).astype(dtype)
    return np.where(high, info.max, np.where(low, info.min, safe)).astype(dtype)


def stable_argsort(x, *, axis, descending):
    """argsort along `axis`; equal elements keep their order, descending too (the reversed
    array's ascending order, mapped back)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(x.shape[axis] - 1 - order, axis)


def evaluate(name, args, params):
    """Apply elementwise primitive `name` to NumPy arrays."""
    if name == "convert":
        return convert(args[0], params["dtype"])
    if name == "broadcast_to":
        return np.broadcast_to(args[0], params["shape"])
    with np.errstate(all="ignore"):
        if name in EXTRA:
            return EXTRA[name](*args, **params)
        return NUMPY[name](*args)
