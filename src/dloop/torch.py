"""A dloop function inside a PyTorch model: `dloop.torch.function(fn)` is called on tensors, runs
fn through dloop (forward and its VJP), and takes part in PyTorch's autograd, so that
`loss.backward()` reaches the tensors it was given."""

import functools

import numpy as np
import torch

from . import api, config, libraries, pytree
from .errors import DloopError, DloopNotImplementedError, DloopTypeError
from .source import user_location


def _to_array(t):
    """A leaf as dloop takes it: a CUDA tensor stays on its GPU (shared through DLPack), so
    that the cuda backend runs it; everything else is NumPy."""
    if torch.is_tensor(t):
        t = t.detach()
        return libraries.to_input(t, "cuda" if t.is_cuda and config.backend in (None, "cuda")
                                  else None)
    if not hasattr(t, "__array__") and not hasattr(t, "__dlpack__"):
        # A Python number (or a string, a flag) reaches fn as itself, as it would without
        # the bridge: as a 0-d array, 2.5 made float32 tensors float64, and "double" an array.
        return t
    return libraries.to_numpy(t)


def _to_torch(a, like):
    return libraries.from_numpy(a, "torch", like)


def _differentiable(t):
    return torch.is_tensor(t) and (t.is_floating_point() or t.is_complex())


class _Bridge(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, treedef, like, grad_enabled, *leaves):
        arrays = [_to_array(t) for t in leaves]
        # Only the leaves PyTorch wants a gradient for are differentiated: a float tensor that
        # does not require grad (a shape parameter, a table) is a constant, as it is to
        # PyTorch, so an input without a gradient rule there (gammainc's a) is no error.
        needs = [grad_enabled and n for n in ctx.needs_input_grad[4:]]
        diff = [k for k, t in enumerate(leaves) if _differentiable(t) and needs[k]]

        def on_diff(*xs):       # fn of the differentiated leaves; the others are constants
            full = list(arrays)
            for k, x in zip(diff, xs):
                full[k] = x
            return fn(*pytree.unflatten(treedef, full))
        if diff:
            out, f_vjp = api.vjp(on_diff, *[arrays[k] for k in diff])
        else:                   # under torch.no_grad, or no tensor requires grad
            out, f_vjp = api.jit(on_diff)(), None
            if isinstance(out, np.ndarray) and any(
                    np.shares_memory(out, a) for a in arrays if isinstance(a, np.ndarray)):
                out = out.copy()    # a new tensor, as with the gradient, not a view of an input
        if not hasattr(out, "shape"):
            raise DloopTypeError("dloop.torch.function needs fn to return one array",
                                 user_location())
        ctx.f_vjp, ctx.like, ctx.diff, ctx.n = f_vjp, like, diff, len(leaves)
        ctx.tensors = [leaves[k] for k in diff]
        return _to_torch(out, like)

    @staticmethod
    def backward(ctx, grad_out):
        grads = [None] * ctx.n
        for k, g in zip(ctx.diff, ctx.f_vjp(_to_array(grad_out))):
            grads[k] = _to_torch(g, ctx.like)
            if torch.is_grad_enabled():     # create_graph=True: a second derivative may follow
                grads[k] = _FirstOrderOnly.apply(grads[k], grad_out, *ctx.tensors)
        return (None, None, None, None) + tuple(grads)


class _FirstOrderOnly(torch.autograd.Function):
    """The gradient a dloop backward made, tied to the forward's inputs: differentiating it
    again (a Hessian, gradgradcheck) is an error instead of silently zero."""
    @staticmethod
    def forward(ctx, grad, *inputs):
        ctx.where = user_location()
        return grad.clone()

    @staticmethod
    def backward(ctx, *_):
        raise DloopNotImplementedError(
            "second derivatives through dloop.torch.function are not supported yet "
            "(the backward pass is dloop's compiled VJP); differentiate once, or keep "
            "create_graph=True for the rest of the model only", ctx.where)


def function(fn):
    """fn(*args) -> one array, args pytrees of tensors (and numbers); returns the same
    function on tensors, differentiable by PyTorch in its float tensors
    (torch.autograd.gradcheck passes in float64)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        api._no_keywords(kwargs)
        leaves, treedef = pytree.flatten(list(args))
        like = next((t for t in leaves if torch.is_tensor(t)), None)
        if like is None:
            raise DloopTypeError("dloop.torch.function needs at least one torch tensor "
                                 "among its arguments; call fn directly on other arrays",
                                 user_location())
        try:
            return _Bridge.apply(fn, treedef, like, torch.is_grad_enabled(), *leaves)
        except (RuntimeError, NotImplementedError) as e:
            # torch.func's transforms need setup_context, forward mode a jvp: dloop has
            # reverse-mode first derivatives only.
            if isinstance(e, DloopError) or ("setup_context" not in str(e) and
                                             "jvp function" not in str(e)):
                raise
            raise DloopNotImplementedError(
                "dloop.torch.function has first derivatives in reverse mode only "
                "(loss.backward(), torch.autograd.grad); torch.func's transforms (grad, vmap, "
                "jacrev) and forward-mode AD are not supported", user_location()) from None
    # torch.compile cannot trace into dloop (it reads the tensors' memory through DLPack):
    # the call is left to run eagerly, a graph break, instead of failing inside Dynamo.
    return torch.compiler.disable(wrapped) if hasattr(torch, "compiler") else wrapped
