"""STAGE 3 — the VJP of a collective loop (a loop over whole arrays, driven from the host).

Forward (cloop_tape): each iteration first saves the carries it starts from on a tape in the
adstack heap, so the tape's depth is the live trip count. Reverse (cloop_bwd): for each
iteration, last first, runs the VJP of the body (an array-level joint graph) on the saved
carries, threading the carry cotangents and summing the invariants' cotangents."""

import numpy as np

from ..errors import DloopNotImplementedError
from ..ir import prims
from ..ir.graph import Aval, Lit, Op, Var
from .emit import is_float
from .loops import BodyVjp, Wrt
from .vjp import FORWARD_RULES, VJP_RULES, vjp_graph


def cloop_forward(em, op):
    token = Var(Aval((), np.dtype(np.int64), True))
    em.ops.append(Op(prims.cloop_tape_p, list(op.inputs), list(op.outputs) + [token],
                     dict(op.params), op.src))
    return token


def cloop_vjp(em, op, bars, needs, context, state):
    if context == "body":
        raise DloopNotImplementedError("a collective loop inside a per-element loop body",
                                       op.src)
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs(op.inputs)
    nb, nc = info.n_bounds, info.n_carry
    float_carries = tuple(k for k, a in enumerate(info.carry_avals)
                          if np.issubdtype(a.dtype, np.floating))
    inv_wrt = tuple(k for k, x in enumerate(invs) if needs[nb + nc + k] and is_float(x))
    offset = 1 if info.kind == "fori" else 0
    wrt = [offset + k for k in float_carries] + [offset + nc + k for k in inv_wrt]
    body_vjp = BodyVjp(vjp_graph(info.body, wrt), float_carries, inv_wrt)
    carry_bars = []
    for k, (c, g) in enumerate(zip(carries, bars)):
        if k not in float_carries:
            carry_bars.append(Lit(0, c.aval.dtype))
        else:
            carry_bars.append(g if g is not None else em.zeros(c.aval.shape, c.aval.dtype))
    carry_wrt = tuple(k for k in float_carries if needs[nb + k])
    outs = em.emit(prims.cloop_bwd_p, [state] + list(bounds) + carry_bars + list(invs),
                   info=info, wrt=Wrt(carry_wrt, inv_wrt), body_vjp=body_vjp)
    in_bars = [None] * len(op.inputs)
    for j, k in enumerate(carry_wrt):
        in_bars[nb + k] = outs[j]
    for j, k in enumerate(inv_wrt):
        in_bars[nb + nc + k] = outs[len(carry_wrt) + j]
    return in_bars


FORWARD_RULES[prims.cloop_p] = cloop_forward
VJP_RULES[prims.cloop_p] = cloop_vjp
