"""A dloop function inside JAX code: `dloop.jax.function(fn)` is a `jax.custom_vjp` whose
forward and backward run fn through dloop on the host (`jax.pure_callback`), so `jax.grad` and
`jax.jit` of the surrounding code reach it. Arguments are arrays (no pytrees yet); the backward
pass recomputes the forward sweep."""

import functools

import jax
import numpy as np

from . import api
from .source import user_location


def _host(arrays):
    return [np.asarray(a) for a in arrays]


def _output_spec(fn, args):
    """fn's one output as a jax.ShapeDtypeStruct, found by tracing fn on zeros (no run)."""
    zeros = [np.zeros(a.shape, a.dtype) for a in args]
    graph = api._trace(fn, zeros, user_location())[0]
    (out,) = graph.outputs
    return jax.ShapeDtypeStruct(out.aval.shape, out.aval.dtype)


def function(fn):
    """fn(*arrays) -> one array, as a JAX-differentiable function of JAX arrays."""
    def forward(*args):
        return jax.pure_callback(lambda *a: np.asarray(api.jit(fn)(*_host(a))),
                                 _output_spec(fn, args), *args)

    def backward(args, g):
        specs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args)

        def host_vjp(g, *a):
            _, f_vjp = api.vjp(fn, *_host(a))
            return tuple(np.asarray(x) for x in f_vjp(np.asarray(g)))
        return tuple(jax.pure_callback(host_vjp, specs, g, *args))

    wrapped = jax.custom_vjp(forward)
    wrapped.defvjp(lambda *args: (forward(*args), args), backward)
    return functools.wraps(fn)(wrapped)
