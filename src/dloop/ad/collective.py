"""STAGE 3 — the VJP of a collective loop (a loop over whole arrays, driven from the host).

Forward (cloop_tape): each iteration first saves the carries it starts from on a tape in the
adstack heap, so the tape's depth is the live trip count. Reverse (cloop_bwd): for each
iteration, last first, runs the VJP of the body (an array-level joint graph) on the saved
carries, threading the carry cotangents and summing the invariants' cotangents."""

import numpy as np

from ..errors import DloopNotImplementedError
from ..ir import prims
from ..ir.graph import Aval, Op, Var
from .loops import reverse_sweep
from .vjp import FORWARD_RULES, VJP_RULES


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
    return reverse_sweep(em, op, bars, needs, state, bwd_prim=prims.cloop_bwd_p, context="top",
                         carry_shape=lambda k: info.carry_avals[k].shape)


FORWARD_RULES[prims.cloop_p] = cloop_forward
VJP_RULES[prims.cloop_p] = cloop_vjp
