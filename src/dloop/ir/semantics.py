"""STAGE 2 — the reference meaning of each elementwise primitive, as NumPy on whole arrays.
Constant folding, the interpreter and every compiled backend agree with these."""

import numpy as np

from .elementwise import BY_NAME, ROWS

NUMPY = {r.name: r.numpy for r in ROWS if r.expansion is None}


class NumpyMath:
    """The `m` of ir/special.py's expansions, on NumPy arrays."""

    @staticmethod
    def op(name, *args):
        return NUMPY[name](*args)

    @staticmethod
    def lit(value, like):
        return np.asarray(like).dtype.type(value)


def convert(x, dtype):
    """x as `dtype`. Float to integer saturates: NaN gives 0, values beyond the integer type's
    range give its min or max (LLVM's fptosi.sat), so no backend meets undefined behaviour."""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if x.dtype.kind == "c" and dtype == bool:
        return x != 0            # nonzero in either part, as NumPy's astype(bool)
    if x.dtype.kind == "c" and dtype.kind != "c":
        x = x.real               # the real part, as np.real: what the real dtype can hold
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
        expansion = BY_NAME[name].expansion
        if expansion is not None:
            return expansion(NumpyMath, *(np.asarray(a) for a in args), **params)
        return NUMPY[name](*args)
