"""STAGE 1 — NumPy's own functions and ufuncs on traced arrays, through __array_ufunc__ and
__array_function__, so existing NumPy code is traced unchanged."""

import inspect

import numpy as np

from ..errors import DloopNotImplementedError
from ..ir import elementwise
from . import array_api as xp
from . import numpy_functions as nf
from . import arrays, fft, linalg, ops, special
from ..source import user_location

_UFUNCS = {r.ufunc: getattr(xp, r.api) for r in elementwise.ROWS if r.ufunc is not None}
_UFUNCS.update({
    np.power: xp.pow, np.positive: xp.positive, np.square: xp.square, np.hypot: xp.hypot,
    np.logaddexp: xp.logaddexp, np.isnan: xp.isnan, np.isinf: xp.isinf,
    np.isfinite: xp.isfinite, np.signbit: xp.signbit, np.conjugate: xp.conj,
    np.logical_and: xp.logical_and, np.logical_or: xp.logical_or,
    np.logical_xor: xp.logical_xor, np.logical_not: xp.logical_not,
    # NumPy 2's matmul is a ufunc: A @ x with a NumPy A arrives here.
    np.matmul: xp.matmul, np.exp2: nf.exp2, np.heaviside: nf.heaviside,
    # NumPy's rint is a float function (an int32 array gives float64); xp.round keeps ints.
    np.rint: lambda x: xp.round(ops.convert(x, ops._floating(ops.result_dtype(x)))),
})
# array_ufunc makes results distinct itself: the namespace's own wrappers would do it twice.
_UFUNCS = {ufunc: inspect.unwrap(fn) for ufunc, fn in _UFUNCS.items()}
_REDUCERS = {np.add: xp.sum, np.multiply: xp.prod, np.maximum: xp.max, np.minimum: xp.min}


def _no_kwargs(name, kwargs, allowed=()):
    extra = [k for k, v in kwargs.items() if k not in allowed and v is not None]
    if extra:
        raise DloopNotImplementedError(f"np.{name}: argument(s) {', '.join(extra)} not supported "
                                       "on traced arrays", user_location())


def array_ufunc(ufunc, method, inputs, kwargs):
    return ops.distinct(_ufunc(ufunc, method, inputs, kwargs), inputs)


def _ufunc(ufunc, method, inputs, kwargs):
    if method == "__call__" and ufunc is getattr(np, "vecdot", None):      # a ufunc in NumPy 2
        _no_kwargs("vecdot", kwargs, ("axis",))
        return xp.vecdot(*inputs, axis=kwargs.get("axis", -1))
    if method == "__call__" and ufunc in _UFUNCS:
        _no_kwargs(ufunc.__name__, kwargs)
        return _UFUNCS[ufunc](*inputs)
    if method == "__call__" and ufunc.__name__ in special.FUNCTIONS:
        # scipy.special's ufuncs (erf, gammaln, ...) and np.cbrt, called on traced arrays.
        _no_kwargs(ufunc.__name__, kwargs)
        return special.FUNCTIONS[ufunc.__name__](*inputs)
    if method == "reduce" and ufunc in _REDUCERS:
        _no_kwargs(f"{ufunc.__name__}.reduce", kwargs, ("axis", "keepdims"))
        axis = kwargs.get("axis", 0)
        return _REDUCERS[ufunc](inputs[0], axis=axis, keepdims=kwargs.get("keepdims", False))
    raise DloopNotImplementedError(f"np.{ufunc.__name__}" + ("" if method == "__call__" else
                                   f".{method}") + " is not supported on traced arrays yet",
                                   user_location())


def _reduction(fn, accumulates=False):
    """np.sum and kin; dtype= is the accumulator's dtype for sum, prod and mean (as NumPy's),
    the input's conversion for max and min."""
    def call(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        _no_kwargs(fn.__name__, dict(kw, out=out))
        if accumulates:
            return fn(a, axis=axis, dtype=dtype, keepdims=keepdims)
        if dtype is not None:
            a = ops.astype(a, dtype)
        return fn(a, axis=axis, keepdims=keepdims)
    return call


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    _no_kwargs("clip", dict(kw, out=out), ("min", "max"))
    return ops.clip(a, kw.get("min", a_min), kw.get("max", a_max))


def _strong(x):
    """x as NumPy's functions take it: a Python number (or the loop index, which stands for
    one) becomes an array, which is not weak."""
    return np.asarray(x) if type(x) in (bool, int, float, complex) else ops.strong(x)


_FUNCTIONS = {
    np.sum: _reduction(ops.sum, True), np.prod: _reduction(ops.prod, True),
    np.mean: _reduction(ops.mean, True),
    np.max: _reduction(xp.max), np.min: _reduction(xp.min), np.amax: _reduction(xp.max),
    np.amin: _reduction(xp.min),
    np.where: lambda c, a, b: ops.where(c, a, b), np.clip: _clip,
    np.result_type: lambda *args: xp.result_type(*args),
    np.take: lambda a, indices, axis=None: xp.take(a, indices, axis=axis),
    np.roll: lambda a, shift, axis=None: xp.roll(a, shift, axis=axis),
    np.concatenate: lambda arrays, axis=0: xp.concat(arrays, axis=axis),
    np.stack: lambda arrays, axis=0: xp.stack(arrays, axis=axis),
    np.expand_dims: lambda a, axis: xp.expand_dims(a, axis=axis),
    np.squeeze: lambda a, axis=None: xp.squeeze(a, axis=tuple(
        k for k, d in enumerate(a.shape) if d == 1) if axis is None else axis),
    np.flip: lambda a, axis=None: xp.flip(a, axis=axis),
    np.moveaxis: lambda a, source, destination: xp.moveaxis(a, source, destination),
    np.tile: lambda a, reps: xp.tile(a, reps),
    np.repeat: lambda a, repeats, axis=None: xp.repeat(a, repeats, axis=axis),
    np.broadcast_arrays: lambda *arrays: xp.broadcast_arrays(*arrays),
    # np.dot makes a Python number an array (np.dot(float32, 2.0) is float64): not weak.
    np.matmul: lambda a, b: xp.matmul(a, b), np.dot: lambda a, b: xp.multiply(
        _strong(a), _strong(b)) if np.ndim(a) == 0 or np.ndim(b) == 0 else xp.matmul(a, b)
    if np.ndim(a) <= 2 and np.ndim(b) <= 2 else _unsupported("np.dot of 3-d arrays"),
    np.tensordot: lambda a, b, axes=2: xp.tensordot(a, b, axes=axes),
    np.matrix_transpose: lambda x: xp.matrix_transpose(x),
    np.cumsum: lambda a, axis=None, dtype=None: xp.cumulative_sum(
        a if axis is not None or np.ndim(a) == 1 else xp.reshape(a, (-1,)), axis=axis,
        dtype=dtype),
    np.var: nf.spread("var"), np.std: nf.spread("std"),
    np.count_nonzero: lambda a, axis=None, keepdims=False: xp.count_nonzero(a, axis=axis,
                                                                            keepdims=keepdims),
    np.argmax: lambda a, axis=None, keepdims=False: xp.argmax(a, axis=axis, keepdims=keepdims),
    np.argmin: lambda a, axis=None, keepdims=False: xp.argmin(a, axis=axis, keepdims=keepdims),
    np.searchsorted: lambda a, v, side="left": xp.searchsorted(a, v, side=side),
    np.tril: lambda m, k=0: xp.tril(m, k=k), np.triu: lambda m, k=0: xp.triu(m, k=k),
    np.round: lambda a, decimals=0: xp.round(a) if decimals == 0 else
    _unsupported("np.round with decimals"),
    np.broadcast_to: lambda a, shape: ops.broadcast_to(a, shape),
    np.reshape: lambda a, shape=None, order="C", *, newshape=None, copy=None: nf.reshape(
        a, shape if newshape is None else newshape, order, copy=copy),
    np.transpose: lambda a, axes=None: ops.transpose(a) if axes is None else
    ops.permute_dims(a, axes),
    np.astype: lambda x, dtype, copy=True: ops.astype(x, dtype),
    np.zeros_like: lambda a, dtype=None: xp.zeros_like(a, dtype),
    np.ones_like: lambda a, dtype=None: xp.ones_like(a, dtype),
    np.full_like: lambda a, fill_value, dtype=None: xp.full_like(a, fill_value, dtype),
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim, np.size: lambda a: a.size,
    np.linalg.norm: nf.norm, np.interp: nf.interp, np.einsum: nf.einsum, np.outer: nf.outer,
    np.atleast_1d: nf.atleast_1d, np.hstack: nf.hstack, np.vstack: nf.vstack, np.pad: nf.pad,
    np.diff: nf.diff, np.cumprod: nf.cumprod, np.sort: nf.sort, np.argsort: nf.argsort,
    np.ravel: nf.ravel, np.exp2: nf.exp2, np.heaviside: nf.heaviside,
    np.any: lambda a, axis=None, keepdims=False: xp.any(a, axis=axis, keepdims=keepdims),
    np.all: lambda a, axis=None, keepdims=False: xp.all(a, axis=axis, keepdims=keepdims),
    np.take_along_axis: lambda a, indices, axis=-1: xp.take_along_axis(
        a if axis is not None else xp.reshape(a, (-1,)), indices,
        axis=axis if axis is not None else 0),
    np.copy: lambda a, order="K", subok=False: xp.asarray(a, copy=True),
    np.real: xp.real, np.imag: xp.imag, np.angle: arrays.angle,
    np.iscomplexobj: lambda x: ops.result_dtype(x).kind == "c",
}
# np.fft's functions in NumPy's signatures (n / s, axis / axes, norm=None for "backward").
_FUNCTIONS.update({getattr(np.fft, name): (lambda fn: lambda a, *args, **kw: fn(
    a, **_fft_kwargs(fn.__name__, args, kw)))(getattr(fft, name)) for name in fft.__all__
    if name not in ("fftfreq", "rfftfreq")})
# fft2 and kin: NumPy's n-d transforms over the last two axes by default.
_FUNCTIONS.update({getattr(np.fft, name + "2"): (lambda fn: lambda a, s=None, axes=(-2, -1),
                                                 norm=None: fn(a, s=s, axes=axes,
                                                               norm=norm or "backward"))(
    getattr(fft, name + "n")) for name in ("fft", "ifft", "rfft", "irfft")})

_FUNCTIONS.update(linalg.NUMPY_FUNCTIONS)


def _fft_kwargs(name, args, kw):
    names = ("axes",) if name.endswith("shift") else \
        ("s", "axes", "norm") if name.endswith("n") else ("n", "axis", "norm")
    kw = dict(zip(names, args), **kw)
    if kw.get("norm", 0) is None:
        kw["norm"] = "backward"
    return kw


def _unsupported(what):
    raise DloopNotImplementedError(f"{what} is not supported on traced arrays yet",
                                   user_location())


def array_function(func, args, kwargs):
    impl = _FUNCTIONS.get(func)
    if impl is None:
        # np.fft.fft2's module is numpy.fft; np.sum's is numpy (whatever its private home).
        parts = (getattr(func, "__module__", None) or "numpy").split(".")
        space = f"np.{parts[1]}." if parts[1:] in (["fft"], ["linalg"]) else "np."
        raise DloopNotImplementedError(f"{space}{func.__name__} is not supported on traced "
                                       "arrays yet", user_location())
    out = impl(*args, **kwargs)
    if func in _VIEWS:
        return out if func is np.real else ops.strong(out)   # np.real(3) is the int 3
    return ops.distinct(out, args)


# NumPy functions that return views (an update of the result writes the argument); the
# others return new arrays.
_VIEWS = {getattr(np, name) for name in (
    "reshape", "transpose", "ravel", "squeeze", "expand_dims", "moveaxis", "swapaxes", "real",
    "asarray", "asanyarray", "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d",
    "matrix_transpose", "permute_dims", "flip") if hasattr(np, name)}
