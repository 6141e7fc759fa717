"""STAGE 1 — NumPy functions that ordinary user code calls on traced arrays and that the array
API does not name (norm, interp, einsum, outer, pad, hstack, heaviside, ...), written with the
traced namespace's operations so that their gradients follow."""

import builtins
import math

import numpy as np

from ..errors import DloopNotImplementedError, DloopValueError
from . import arrays, indexing, ops, utilities
from .tracer import Tracer, layout_of
from ..source import user_location


def norm(x, ord=None, axis=None, keepdims=False):
    x = ops._check_operand(x)
    if ord in (None, 2, "fro") and (axis is None or ord != 2 or np.ndim(x) == 1 or
                                    isinstance(axis, int)):
        square = arrays.real(ops.multiply(arrays.conj(x), x))
        return ops.unary("sqrt", ops.sum(square, axis=axis, keepdims=keepdims), float_only=True)
    if ord in (1, math.inf, -math.inf) and (np.ndim(x) == 1 or isinstance(axis, int)):
        a = ops.unary("abs", x)
        if ord == 1:
            return ops.sum(a, axis=axis, keepdims=keepdims)
        return (ops.max if ord > 0 else ops.min)(a, axis=axis, keepdims=keepdims)
    raise DloopNotImplementedError(f"np.linalg.norm with ord={ord!r} on a {np.ndim(x)}-d traced "
                                   "array (vector norms 1, 2, inf and the Frobenius norm are "
                                   "supported)", user_location())


def interp(x, xp, fp, left=None, right=None):
    """Piecewise-linear interpolation: differentiable in x, xp and fp."""
    x, xp, fp = (ops._check_operand(a) for a in (x, xp, fp))
    n = np.shape(xp)[0]
    if n < 2:
        raise DloopValueError("np.interp needs at least two points", user_location())
    k = ops.clip(ops.subtract(arrays.searchsorted(xp, x, side="right"), 1), 0, n - 2)
    x0, x1 = indexing.take_nd(xp, (k,)), indexing.take_nd(xp, (ops.add(k, 1),))
    f0, f1 = indexing.take_nd(fp, (k,)), indexing.take_nd(fp, (ops.add(k, 1),))
    t = ops.divide(ops.subtract(x, x0), ops.subtract(x1, x0))
    out = ops.add(f0, ops.multiply(t, ops.subtract(f1, f0)))
    first, last = indexing.getitem(fp, 0), indexing.getitem(fp, n - 1)
    out = ops.where(ops.compare("lt", x, indexing.getitem(xp, 0)),
                    first if left is None else left, out)
    return ops.where(ops.compare("gt", x, indexing.getitem(xp, n - 1)),
                     last if right is None else right, out)


def einsum(subscripts, *operands, **kwargs):
    """Explicit or implicit einsum without repeated indices within one operand: each operand
    is laid out on the union of the indices, multiplied, and summed over the others."""
    if kwargs.get("out") is not None:
        raise DloopNotImplementedError("np.einsum(out=...) on traced arrays", user_location())
    spec = subscripts.replace(" ", "")
    inputs, _, output = spec.partition("->")
    names = inputs.split(",")
    if "." in spec or builtins.any(len(set(n)) != len(n) for n in names):
        raise DloopNotImplementedError("np.einsum with '...' or a repeated index within one "
                                       "operand on traced arrays", user_location())
    if "->" not in spec:
        counts = {c: inputs.count(c) for c in set(inputs) - {","}}
        output = "".join(sorted(c for c, k in counts.items() if k == 1))
    order = list(output) + sorted(set(inputs) - set(output) - {","})
    product = None
    for name, a in zip(names, operands):
        a = ops._check_operand(a)
        moved = ops.permute_dims(a, [name.index(c) for c in order if c in name]) \
            if np.ndim(a) else a
        shape = tuple(np.shape(a)[name.index(c)] if c in name else 1 for c in order)
        moved = ops.reshape(moved, shape)
        product = moved if product is None else ops.multiply(product, moved)
    summed = tuple(range(len(output), len(order)))
    return ops.sum(product, axis=summed, dtype=ops.result_dtype(product)) if summed else product


def outer(a, b):
    a, b = ops.reshape(a, (-1,)), ops.reshape(b, (-1,))
    return ops.multiply(ops.reshape(a, (-1, 1)), ops.reshape(b, (1, -1)))


def atleast_1d(*xs):
    out = [ops.reshape(x, (1,)) if np.ndim(x) == 0 else x for x in xs]
    return out[0] if len(out) == 1 else out


def hstack(xs):
    xs = atleast_1d(*xs) if len(xs) > 1 else [atleast_1d(xs[0])]
    return arrays.concat(xs, axis=0 if np.ndim(xs[0]) == 1 else 1)


def vstack(xs):
    xs = [ops.reshape(x, (1, -1)) if np.ndim(x) < 2 else x for x in xs]
    return arrays.concat(xs, axis=0)


def pad(x, pad_width, mode="constant", constant_values=0):
    """Constant and edge padding, as concatenations."""
    if mode not in ("constant", "edge"):
        raise DloopNotImplementedError(f"np.pad(mode={mode!r}) on traced arrays (constant and "
                                       "edge are supported)", user_location())
    x = ops._check_operand(x)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (np.ndim(x), 2))
    for axis, (before, after) in enumerate(widths):
        parts = []
        for count, at in ((before, 0), (after, -1)):
            shape = list(np.shape(x))
            shape[axis] = int(count)
            if mode == "constant":
                block = ops.broadcast_to(ops.convert(constant_values, x.dtype), tuple(shape))
            else:
                key = (slice(None),) * axis + (slice(at, at + 1 if at == 0 else None),)
                block = ops.broadcast_to(indexing.getitem(x, key), tuple(shape))
            parts.append(block)
        x = arrays.concat([parts[0], x, parts[1]], axis=axis)
    return x


def heaviside(x, h0):
    x, h0 = ops._check_operand(x), ops._check_operand(h0)
    dt = ops._floating(ops.result_dtype(x, h0))
    x, h0 = ops.convert(x, dt), ops.convert(h0, dt)
    step = ops.where(ops.compare("lt", x, 0), 0.0, ops.where(ops.compare("gt", x, 0), 1.0, h0))
    return ops.where(ops.compare("ne", x, x), math.nan, step)        # NaN stays NaN


def exp2(x):
    return ops.power(2.0, ops.convert(ops._check_operand(x), ops._floating(ops.result_dtype(x))))


def diff(a, n=1, axis=-1, prepend=None, append=None):
    return utilities.diff(a, n=n, axis=axis, prepend=prepend, append=append)


def _flat_if_none(fn, default):
    """NumPy's axis=None (the flattened array) for an array-API function that needs an axis."""
    def call(a, axis=default, *args, **kwargs):
        if axis is None:
            a, axis = ops.reshape(a, (-1,)), 0
        return fn(a, axis, *args, **kwargs)
    return call


cumprod = _flat_if_none(lambda a, axis, dtype=None: utilities.cumulative_prod(
    a, axis=axis, dtype=dtype), None)
# Always stable, so kind= and stable= (NumPy 2) change nothing.
sort = _flat_if_none(lambda a, axis, kind=None, order=None, *, stable=None: utilities.sort(
    a, axis=axis), -1)
argsort = _flat_if_none(lambda a, axis, kind=None, order=None, *, stable=None:
                        utilities.argsort(a, axis=axis), -1)


def _order(a, order, name):
    """NumPy's index order for reshape / ravel / flatten: 'C' or 'F'. 'A' (F for an array
    contiguous in Fortran order only) and 'K' (memory order) read the memory layout of the
    caller's arrays, which a trace does not know (a program serves arrays of either layout),
    so on traced arrays they are refused."""
    if order is None or order == "C":
        return "C"
    if order == "F":
        return "F"
    if order == "A" and not isinstance(a, Tracer):
        flags = np.asarray(a).flags
        return "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    raise DloopNotImplementedError(
        f"{name}(order={order!r}) on a traced array: its result depends on the caller's "
        "memory layout, which dloop does not trace; write order='C' or order='F'",
        user_location())


def _reversed_axes(a):
    return ops.permute_dims(a, tuple(range(np.ndim(a)))[::-1])


def reshape(a, shape, order="C", copy=None, name="reshape"):
    """NumPy's reshape in order 'C' or 'F': in Fortran order, the C-order reshape of the
    array with its axes reversed, reversed back (views where NumPy's are, as the layout
    of the reversed array decides)."""
    a = ops._check_operand(a)
    if _order(a, order, name) == "C":
        return ops.reshape(a, shape, copy=copy)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return _reversed_axes(ops.reshape(_reversed_axes(a), shape[::-1], copy=copy))


def ravel(a, order="C"):
    # NumPy's ravel is a view only of a C-contiguous array (in order 'F', of an
    # F-contiguous one); of any other (a strided or transposed view, even one that reshape
    # could view) it is a copy.
    a = ops._check_operand(a)
    order = _order(a, order, "ravel")
    if isinstance(a, Tracer):
        flags = layout_of(a).flags
        copy = not (flags.c_contiguous if order == "C" else flags.f_contiguous)
    else:
        copy = False
    return reshape(a, (-1,), order, copy=copy or None, name="ravel")


def flatten(a, order="C"):
    return reshape(a, (-1,), _order(a, order, "flatten"), copy=True, name="flatten")


def _sort_in_place(self, axis=-1, kind=None, order=None):
    # An update like x[...] = v: counts x's version (its views read the sorted values) and
    # writes x's base where x is a view.
    self.refresh()
    self.check_updatable()
    self.rebind(sort(self, axis))


def _no_out(out, name):
    if out is not None:
        raise DloopNotImplementedError(f"{name}(out=...) on a traced array: traced arrays are "
                                       "immutable values; use the returned array",
                                       user_location())


def spread(name):
    """x.var / x.std and np.var / np.std: NumPy's signature (ddof, or the array API's
    correction, which NumPy 2 also accepts)."""
    fn = arrays.var if name == "var" else arrays.std

    def call(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
        _no_out(out, name)
        if correction is not None and ddof != 0:
            raise DloopValueError(f"{name}: give ddof or correction, not both", user_location())
        a = ops._check_operand(a)
        if dtype is not None:
            a = ops.convert(a, dtype)
        return fn(a, axis=axis, correction=ddof if correction is None else correction,
                  keepdims=keepdims)
    return call


def _reduction(fn, name, with_dtype):
    """A reduction method in NumPy's positional order: (axis, dtype, out) or (axis, out)."""
    if with_dtype:
        def method(self, axis=None, dtype=None, out=None, keepdims=False):
            _no_out(out, name)
            return fn(self, axis=axis, dtype=dtype, keepdims=keepdims)
    else:
        def method(self, axis=None, out=None, keepdims=False):
            _no_out(out, name)
            return fn(self, axis=axis, keepdims=keepdims)
    return method


ops.install_methods({
    "sum": _reduction(ops.sum, "sum", True), "prod": _reduction(ops.prod, "prod", True),
    "mean": _reduction(ops.mean, "mean", True), "max": _reduction(ops.max, "max", False),
    "min": _reduction(ops.min, "min", False), "var": spread("var"), "std": spread("std"),
    "clip": lambda self, min=None, max=None: ops.clip(self, min, max),
    "copy": lambda self, order="C": self.copied(),
    "ravel": ravel, "flatten": flatten,
    "any": lambda self, axis=None, keepdims=False: utilities.any(self, axis=axis,
                                                                 keepdims=keepdims),
    "all": lambda self, axis=None, keepdims=False: utilities.all(self, axis=axis,
                                                                 keepdims=keepdims),
    "cumsum": lambda self, axis=None, dtype=None: arrays.cumulative_sum(
        ravel(self) if axis is None else self, axis=0 if axis is None else axis, dtype=dtype),
    "cumprod": cumprod,
    "squeeze": lambda self, axis=None: arrays.squeeze(self, tuple(
        k for k, d in enumerate(self.shape) if d == 1) if axis is None else axis),
    "dot": lambda self, other: arrays.matmul(self, other),
    "argmax": lambda self, axis=None, keepdims=False: arrays.argmax(self, axis, keepdims),
    "argmin": lambda self, axis=None, keepdims=False: arrays.argmin(self, axis, keepdims),
    "argsort": argsort, "sort": _sort_in_place,
    "round": lambda self, decimals=0: ops.unary("round", self) if decimals == 0 else
    ops.divide(ops.unary("round", ops.multiply(self, 10.0 ** decimals)), 10.0 ** decimals),
    "conj": arrays.conj, "conjugate": arrays.conj,
    "swapaxes": lambda self, a, b: ops.permute_dims(self, _swap(self.ndim, a, b)),
})


def _swap(ndim, a, b):
    order = list(range(ndim))
    order[a], order[b] = order[b], order[a]
    return order
