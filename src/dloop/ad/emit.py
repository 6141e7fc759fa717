"""STAGE 3 — a small op emitter used by the autodiff rules to write graph IR."""

import numpy as np

from ..ir import prims
from ..ir.graph import Lit, Op, Var
from ..ir.prims import out_avals

P = prims.REGISTRY


class Emitter:
    def __init__(self, src=None):
        self.ops = []
        self.src = src

    def emit(self, prim, inputs, **params):
        prim = P[prim] if isinstance(prim, str) else prim
        outs = [Var(a) for a in out_avals(prim, [x.aval for x in inputs], params)]
        self.ops.append(Op(prim, list(inputs), outs, params, self.src))
        return outs

    def op(self, name, *inputs, **params):
        return self.emit(name, inputs, **params)[0]

    def lit(self, value, like):
        return Lit(value, like.aval.dtype)

    def zeros(self, shape, dtype):
        z = Lit(0, dtype)
        return z if not shape else self.op("broadcast_to", z, shape=tuple(shape))

    def unbroadcast(self, g, shape):
        """Sum g over the axes that broadcasting added to an operand of `shape`."""
        if g.aval.shape == tuple(shape):
            return g
        return self.op("unbroadcast", g, shape=tuple(shape))

    def broadcast(self, x, shape):
        if x.aval.shape == tuple(shape):
            return x
        return self.op("broadcast_to", x, shape=tuple(shape))

    def add(self, a, b):
        return self.op("add", a, b)

    def mul(self, a, b):
        return self.op("mul", a, b)


def is_float(x):
    return np.issubdtype(x.aval.dtype, np.inexact) and not x.aval.is_tape   # complex too
