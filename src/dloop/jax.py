"""A dloop function inside JAX code: `dloop.jax.function(fn)` is a `jax.custom_vjp` whose
forward and backward run fn through dloop on the host (`jax.pure_callback`), so `jax.grad`,
`jax.jit` and `jax.vmap` (one call per batch element) of the surrounding code reach it.
Arguments are arrays or numbers (no pytrees yet); integer and boolean ones are not
differentiated. The backward pass recomputes the forward sweep. First derivatives in reverse
mode only: forward mode and second derivatives are refused with a DloopError."""

import functools
import threading

import jax
import numpy as np

from . import api, pytree
from .errors import DloopError, DloopNotImplementedError, DloopTypeError
from .source import user_location

_pending = threading.local()     # a DloopError raised inside a callback, to re-raise as is


def _host(arrays):
    return [np.asarray(a) for a in arrays]


def _inexact(a):
    return np.issubdtype(a.dtype, np.inexact)


def _output_spec(fn, args, where):
    """fn's one output as a jax.ShapeDtypeStruct, found by tracing fn on zeros (no run)."""
    zeros = [np.zeros(a.shape, a.dtype) for a in args]
    graph, _, _, out_td, _ = api._trace(fn, zeros, where)
    if len(graph.outputs) != 1 or out_td.kind != "leaf":
        raise DloopTypeError(f"dloop.jax.function needs fn to return one array, but it "
                             f"returned {pytree.describe(out_td)} (* an array)", where)
    (out,) = graph.outputs
    # Without jax_enable_x64, JAX holds no 64-bit values: the result is cast to 32 bits.
    return jax.ShapeDtypeStruct(out.aval.shape, jax.dtypes.canonicalize_dtype(out.aval.dtype))


def _guarded(host_fn):
    def call(*a):
        try:
            return host_fn(*a)
        except DloopError as e:
            _pending.error = e
            raise
    return call


def _awaited(run):
    """run(): a callback's results, awaited where they are values (not tracers), so that a
    DloopError raised inside it arrives as itself, not as JAX's JaxRuntimeError (eager
    jax.grad runs the backward callback outside the call of the function)."""
    _pending.error = None
    try:
        out = run()
        for x in jax.tree_util.tree_leaves(out):
            if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
                x.block_until_ready()       # on a GPU the error surfaces only here
        return out
    except jax.errors.JaxRuntimeError:
        error, _pending.error = _pending.error, None
        if error is not None:
            raise error from None
        raise


def _first_derivatives_only(where):
    return DloopNotImplementedError(
        "dloop.jax.function has first derivatives in reverse mode only (jax.grad, jax.vjp, "
        "jax.jacrev): forward mode (jax.jvp, jax.jacfwd) and second derivatives "
        "(jax.hessian, a gradient of a gradient) are not supported", where)


def function(fn):
    """fn(*arrays) -> one array, as a JAX-differentiable function of JAX arrays."""
    def forward(*args):
        args = [jax.numpy.asarray(a) for a in args]    # jax.grad hands numbers in as such
        spec = _output_spec(fn, args, user_location())
        return jax.pure_callback(
            _guarded(lambda *a: np.asarray(api.jit(fn)(*_host(a))).astype(spec.dtype)),
            spec, *args, vmap_method="sequential")

    def forward_saving(*primals):
        """symbolic_zeros=True hands each argument in with whether JAX differentiates it:
        only those are differentiated by dloop (a float argument held constant, gammainc's
        a, may have no gradient rule)."""
        args = tuple(jax.numpy.asarray(p.value) for p in primals)
        wanted = tuple(() if p.perturbed and _inexact(a) else None
                       for p, a in zip(primals, args))     # a static mark in the residuals
        return forward(*args), (args, wanted)

    def backward(residuals, g):
        args, wanted = residuals
        diff = [k for k, w in enumerate(wanted) if w is not None]
        if not diff or isinstance(g, jax.custom_derivatives.SymbolicZero):
            return (None,) * len(args)
        specs = tuple(jax.ShapeDtypeStruct(args[k].shape, args[k].dtype) for k in diff)

        def host_vjp(g, *a):
            a = _host(a)

            def on_diff(*xs):
                full = list(a)
                for k, x in zip(diff, xs):
                    full[k] = x
                return fn(*full)
            _, f_vjp = api.vjp(on_diff, *[a[k] for k in diff])
            # dloop's complex cotangent is dL/dRe + i dL/dIm (PyTorch's convention), JAX's its
            # conjugate: convert on the way in and out (a real one is the same in both).
            return tuple(np.conj(x).astype(s.dtype) for x, s in zip(f_vjp(np.conj(g)), specs))
        grads = iter(_awaited(lambda: jax.pure_callback(_guarded(host_vjp), specs, g, *args,
                                                        vmap_method="sequential")))
        return tuple(next(grads) if k in diff else None for k in range(len(args)))

    wrapped = jax.custom_vjp(forward)
    wrapped.defvjp(forward_saving, backward, symbolic_zeros=True)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        api._no_keywords(kwargs)
        where = user_location()
        converted = []
        for k, a in enumerate(args):
            if isinstance(a, (bool, int, float, complex, np.generic)):
                a = jax.numpy.asarray(a)
            elif not hasattr(a, "shape") or not hasattr(a, "dtype"):
                raise DloopNotImplementedError(
                    f"dloop.jax.function takes arrays or numbers, but argument {k} is a "
                    f"{type(a).__name__}; pass its arrays as separate arguments", where)
            converted.append(a)
        _pending.error = None
        try:
            out = wrapped(*converted)
            try:
                # On a GPU the callback's error surfaces only when the result is awaited.
                out.block_until_ready()
            except AttributeError:          # a tracer (under jax.jit / jax.grad): no wait
                pass
            return out
        except (TypeError, ValueError) as e:    # jax.jvp, jax.jacfwd, jax.hessian
            if "forward-mode autodiff" not in str(e) and \
                    "callbacks do not support" not in str(e):
                raise
            raise _first_derivatives_only(where) from None
        except jax.errors.JaxRuntimeError:
            error, _pending.error = _pending.error, None
            if error is not None:
                raise error from None
            raise
    return call
