"""Host primitives: whole-array work done by the array library, between kernels. NumPy's
functions dispatch to the arrays' own library (CuPy's on the cuda backend); creation
functions follow an operand through `like=`."""

import numpy as np

from ..ir import prims
from ..ir.semantics import stable_argsort

HOST_IMPLS = {}


def _reduce(x, *, op, axes):
    fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[op]
    return fn(x, axis=axes)


def _unbroadcast(g, *, shape):
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + k] != 1)
    return np.sum(g, axis=axes).reshape(shape) if axes else g.reshape(shape)


def _slice_vjp(g, *, key, shape):
    out = np.zeros(shape, dtype=g.dtype, like=g)
    out[key] = g
    return out


def _prod_vjp(x, g, *, axes):
    """Cotangent of prod(x, axes): g times the product of the other elements, computed by
    exclusive prefix and suffix products so that zeros in x are handled exactly."""
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=x.dtype, like=x)
    before = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1),
                               axis=-1), -1)
    others = (before * after).reshape(moved.shape)
    out = others * np.reshape(g, g.shape + (1,) * len(axes))
    return np.moveaxis(out, range(x.ndim - len(axes), x.ndim), axes)


def _scatter_add(g, *idx, shape):
    out = np.zeros(shape, dtype=g.dtype, like=g)
    idx = tuple(np.where(i < 0, i + d, i) for i, d in zip(idx, shape))
    np.add.at(out, idx, g)
    return out


def _cumprod_vjp(x, g, *, axis):
    """Cotangent of cumprod along `axis`, exact where x has zeros: with s_j = g_j +
    x_{j+1} s_{j+1} (a reverse recurrence), dx_j = s_j * prod(x_k for k < j)."""
    x, g = np.moveaxis(x, axis, -1), np.moveaxis(g, axis, -1)
    s = np.empty_like(g)
    running = np.zeros(g.shape[:-1], dtype=g.dtype)
    for j in reversed(range(x.shape[-1])):
        nxt = x[..., j + 1] if j + 1 < x.shape[-1] else np.zeros_like(running)
        running = g[..., j] + nxt * running
        s[..., j] = running
    before = np.cumprod(np.concatenate([np.ones_like(x[..., :1]), x[..., :-1]], axis=-1),
                        axis=-1)
    return np.moveaxis(s * before, -1, axis)


HOST_IMPLS[prims.reduce_p] = _reduce
HOST_IMPLS[prims.reshape_p] = lambda x, *, shape: np.reshape(x, shape)
HOST_IMPLS[prims.transpose_p] = lambda x, *, axes: np.transpose(x, axes)
HOST_IMPLS[prims.cumsum_p] = lambda x, *, axis: np.cumsum(x, axis=axis)
HOST_IMPLS[prims.concat_p] = lambda *xs, axis: np.concatenate(xs, axis=axis)
HOST_IMPLS[prims.matmul_p] = np.matmul
HOST_IMPLS[prims.argreduce_p] = lambda x, *, op, axis, keepdims: (
    np.argmax if op == "max" else np.argmin)(x, axis=axis, keepdims=keepdims)
HOST_IMPLS[prims.searchsorted_p] = lambda a, v, *, side: np.searchsorted(a, v, side=side)
HOST_IMPLS[prims.unbroadcast_p] = _unbroadcast
HOST_IMPLS[prims.static_slice_p] = lambda x, *, key, shape: np.asarray(x[key], like=x)
HOST_IMPLS[prims.static_slice_vjp_p] = _slice_vjp
HOST_IMPLS[prims.prod_vjp_p] = _prod_vjp
HOST_IMPLS[prims.scatter_add_p] = _scatter_add
HOST_IMPLS[prims.argsort_p] = stable_argsort
HOST_IMPLS[prims.cumprod_p] = lambda x, *, axis: np.cumprod(x, axis=axis)
HOST_IMPLS[prims.cumprod_vjp_p] = _cumprod_vjp
