"""STAGE 3 — a small op emitter used by the autodiff rules to write graph IR."""

import numpy as np

from ..ir import prims
from ..ir.graph import Lit, Op, Var
from ..ir.prims import out_avals

P = prims.REGISTRY


class Mask:
    """Where a cotangent can be nonzero: `select(cond, g, 0)` (keep) or `select(cond, 0, g)`
    came from np.where's VJP, and what elementwise rules derive from it stays zero at the
    other positions. `shape`: the cotangent's shape (cond broadcasts to it)."""
    __slots__ = ("cond", "keep", "shape")

    def __init__(self, cond, keep, shape):
        self.cond, self.keep, self.shape = cond, keep, tuple(shape)

    def same(self, other):
        return other is not None and (self.cond, self.keep, self.shape) == \
            (other.cond, other.keep, other.shape)


class Emitter:
    def __init__(self, src=None):
        self.ops = []
        self.src = src
        self.mask = None        # the Mask of the cotangent the running rule propagates
        self.masked_bar = None  # that cotangent (zero where its mask says already)

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
        return self.op("unbroadcast", self.masked(g), shape=tuple(shape))

    def masked(self, g, mask=None):
        """g, zeroed where `mask` (default: the running rule's) says the cotangent is zero:
        there the rule multiplied a zero by a partial derivative that may be NaN or infinite
        (np.where's other branch, which the result never used), and the product must stay
        zero rather than poison a sum."""
        mask = mask or self.mask
        if mask is None or g.aval.shape != mask.shape or g is self.masked_bar:
            return g
        zero = Lit(0.0, g.aval.dtype)
        return self.op("select", mask.cond, g, zero) if mask.keep else \
            self.op("select", mask.cond, zero, g)

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
