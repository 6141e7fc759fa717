"""A dloop function inside a PyTorch model: `dloop.torch.function(fn)` is called on tensors, runs
fn through dloop (forward and its VJP), and takes part in PyTorch's autograd, so that
`loss.backward()` reaches the tensors it was given."""

import functools

import numpy as np
import torch

from . import api, libraries, pytree
from .errors import DloopTypeError
from .source import user_location


def _to_numpy(t):
    return libraries.to_numpy(t.detach())


def _to_torch(a, like):
    return libraries.from_numpy(np.asarray(a), "torch", like)


class _Bridge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, treedef, *tensors):
        arrays = [_to_numpy(t) for t in tensors]
        out, f_vjp = api.vjp(lambda *xs: fn(*pytree.unflatten(treedef, xs)), *arrays)
        if not isinstance(out, np.ndarray) and not np.isscalar(out):
            raise DloopTypeError("dloop.torch.function needs fn to return one array",
                                 user_location())
        ctx.f_vjp = f_vjp
        ctx.like = tensors[0]
        return _to_torch(out, tensors[0])

    @staticmethod
    def backward(ctx, grad_out):
        grads = ctx.f_vjp(_to_numpy(grad_out))
        return (None, None) + tuple(_to_torch(g, ctx.like) for g in grads)


def function(fn):
    """fn(*args) -> one array, args pytrees of float tensors; returns the same function on
    tensors, differentiable by PyTorch (torch.autograd.gradcheck passes in float64)."""
    @functools.wraps(fn)
    def wrapped(*args):
        leaves, treedef = pytree.flatten(list(args))
        return _Bridge.apply(fn, treedef, *leaves)
    return wrapped
