"""STAGE 1 — NumPy's own functions and ufuncs on traced arrays, through __array_ufunc__ and
__array_function__, so existing NumPy code is traced unchanged."""

import numpy as np

from ..errors import DloopNotImplementedError
from . import array_api as xp
from . import ops
from .source import user_location

_UFUNCS = {
    np.add: xp.add, np.subtract: xp.subtract, np.multiply: xp.multiply,
    np.true_divide: xp.divide, np.floor_divide: xp.floor_divide, np.remainder: xp.remainder,
    np.power: xp.pow, np.negative: xp.negative, np.positive: xp.positive,
    np.absolute: xp.abs, np.sign: xp.sign, np.floor: xp.floor, np.ceil: xp.ceil,
    np.sin: xp.sin, np.cos: xp.cos, np.tan: xp.tan, np.arcsin: xp.asin, np.arccos: xp.acos,
    np.arctan: xp.atan, np.arctan2: xp.atan2, np.sinh: xp.sinh, np.cosh: xp.cosh,
    np.tanh: xp.tanh, np.exp: xp.exp, np.expm1: xp.expm1, np.log: xp.log, np.log1p: xp.log1p,
    np.log2: xp.log2, np.log10: xp.log10, np.sqrt: xp.sqrt, np.square: xp.square,
    np.maximum: xp.maximum, np.minimum: xp.minimum,
    np.less: xp.less, np.less_equal: xp.less_equal, np.greater: xp.greater,
    np.greater_equal: xp.greater_equal, np.equal: xp.equal, np.not_equal: xp.not_equal,
    np.logical_and: xp.logical_and, np.logical_or: xp.logical_or,
    np.logical_xor: xp.logical_xor, np.logical_not: xp.logical_not,
    np.bitwise_and: xp.bitwise_and, np.bitwise_or: xp.bitwise_or,
    np.bitwise_xor: xp.bitwise_xor, np.invert: xp.bitwise_invert,
}
_REDUCERS = {np.add: xp.sum, np.multiply: xp.prod, np.maximum: xp.max, np.minimum: xp.min}


def _no_kwargs(name, kwargs, allowed=()):
    extra = [k for k, v in kwargs.items() if k not in allowed and v is not None]
    if extra:
        raise DloopNotImplementedError(f"np.{name}: argument(s) {', '.join(extra)} not supported "
                                       "on traced arrays", user_location())


def array_ufunc(ufunc, method, inputs, kwargs):
    if method == "__call__" and ufunc in _UFUNCS:
        _no_kwargs(ufunc.__name__, kwargs)
        return _UFUNCS[ufunc](*inputs)
    if method == "reduce" and ufunc in _REDUCERS:
        _no_kwargs(f"{ufunc.__name__}.reduce", kwargs, ("axis", "keepdims"))
        axis = kwargs.get("axis", 0)
        return _REDUCERS[ufunc](inputs[0], axis=axis, keepdims=kwargs.get("keepdims", False))
    raise DloopNotImplementedError(f"np.{ufunc.__name__}" + ("" if method == "__call__" else
                                   f".{method}") + " is not supported on traced arrays yet",
                                   user_location())


def _reduction(fn):
    def call(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        _no_kwargs(fn.__name__, dict(kw, out=out))
        if dtype is not None:
            a = ops.astype(a, dtype)
        return fn(a, axis=axis, keepdims=keepdims)
    return call


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    _no_kwargs("clip", dict(kw, out=out), ("min", "max"))
    return ops.clip(a, kw.get("min", a_min), kw.get("max", a_max))


_FUNCTIONS = {
    np.sum: _reduction(xp.sum), np.prod: _reduction(xp.prod), np.mean: _reduction(xp.mean),
    np.max: _reduction(xp.max), np.min: _reduction(xp.min), np.amax: _reduction(xp.max),
    np.amin: _reduction(xp.min),
    np.where: lambda c, a, b: ops.where(c, a, b), np.clip: _clip,
    np.take: lambda a, indices, axis=None: ops.take(a, indices, axis),
    np.broadcast_to: lambda a, shape: ops.broadcast_to(a, shape),
    np.reshape: lambda a, shape=None, **kw: ops.reshape(a, kw.get("newshape", shape)),
    np.transpose: lambda a, axes=None: ops.transpose(a) if axes is None else
    ops.permute_dims(a, axes),
    np.astype: lambda x, dtype, copy=True: ops.astype(x, dtype),
    np.zeros_like: lambda a, dtype=None: xp.zeros_like(a, dtype),
    np.ones_like: lambda a, dtype=None: xp.ones_like(a, dtype),
    np.full_like: lambda a, fill_value, dtype=None: xp.full_like(a, fill_value, dtype),
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim, np.size: lambda a: a.size,
}


def array_function(func, args, kwargs):
    impl = _FUNCTIONS.get(func)
    if impl is None:
        raise DloopNotImplementedError(f"np.{func.__name__} is not supported on traced arrays "
                                       "yet", user_location())
    return impl(*args, **kwargs)
