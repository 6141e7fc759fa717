"""STAGE 3 — the VJP of a per-element loop: a taped forward sweep and a reverse sweep.

Forward (loop_tape): each iteration first pushes the carry it starts from onto the loop's
adstacks; the op also returns a token, each element's trip count. Reverse (loop_bwd): pops
the carries in reverse order and runs the VJP of one body iteration (recomputing the body's
intermediates from the popped carry), threading the carry cotangents and summing the
cotangents of loop-invariant inputs. Nested loops get the same treatment inside that VJP,
so an inner loop's stack is refilled and drained once per outer iteration: its capacity is
the largest inner trip count, not their sum."""

from dataclasses import dataclass

import numpy as np

from ..ir import prims
from ..ir.graph import Aval, Graph, Lit, Op, Var
from .emit import is_float
from .vjp import FORWARD_RULES, VJP_RULES, vjp_graph


@dataclass(frozen=True)
class Wrt:
    carries: tuple      # carries whose initial value gets a cotangent
    invariants: tuple   # invariants (positions among the loop's invariants) that get one
    tables: tuple = ()  # gathered invariants whose whole-array cotangent the op returns


@dataclass(frozen=True, eq=False)
class BodyVjp:
    """One reverse iteration. graph inputs: (i,) carries, invariants, then the cotangents of
    the float carries; outputs: the new carries, then cotangents of `float_carries` and of
    `invariants`."""
    graph: Graph
    float_carries: tuple
    invariants: tuple


def loop_forward(em, op):
    info = op.params["info"]
    token = Var(Aval(info.shape, np.dtype(np.int64), True))
    em.ops.append(Op(prims.loop_tape_p, list(op.inputs), list(op.outputs) + [token],
                     dict(op.params), op.src))
    return token


def reverse_sweep(em, op, bars, needs, state, *, bwd_prim, context, carry_shape,
                  outer="top"):
    """The backward op of a loop (per-element or collective) and the cotangents of its
    inputs. context: 'body' for a per-element loop, whose body is a scalar graph; 'top' for
    a collective loop. carry_shape(k): the shape of carry k's cotangent. outer: the context
    the loop itself is in; inside another loop's body, the cotangents of gathered tables
    flow by effect to the outermost loop, which returns them."""
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs(op.inputs)
    nb, nc = info.n_bounds, info.n_carry
    float_carries = tuple(k for k, d in enumerate(info.carry_dtypes)
                          if np.issubdtype(d, np.inexact))   # complex too
    active = [k for k, x in enumerate(invs) if needs[nb + nc + k] and is_float(x)]
    modes = getattr(info, "invariant_modes", None) or ("elem",) * len(invs)
    inv_wrt = tuple(k for k in active if modes[k] != "table")
    gathered = tuple(k for k in active if modes[k] == "table")
    offset = 1 if info.kind == "fori" else 0
    wrt = [offset + k for k in float_carries] + [offset + nc + k for k in inv_wrt]
    body_vjp = BodyVjp(vjp_graph(info.body, wrt, context=context,
                                 effect_indices=[offset + nc + k for k in gathered]),
                       float_carries, inv_wrt)
    tables = gathered if outer == "top" else ()
    carry_bars = []
    for k, (c, g) in enumerate(zip(carries, bars)):
        if k not in float_carries:
            carry_bars.append(Lit(0, c.aval.dtype))
        else:
            carry_bars.append(g if g is not None else em.zeros(carry_shape(k), c.aval.dtype))
    carry_wrt = tuple(k for k in float_carries if needs[nb + k])
    outs = em.emit(bwd_prim, [state] + list(bounds) + carry_bars + list(invs),
                   info=info, wrt=Wrt(carry_wrt, inv_wrt, tables), body_vjp=body_vjp)
    in_bars = [None] * len(op.inputs)
    for j, k in enumerate(carry_wrt):
        in_bars[nb + k] = outs[j]
    for j, k in enumerate(inv_wrt):       # per-element sums of a shared input: summed here
        in_bars[nb + nc + k] = em.unbroadcast(outs[len(carry_wrt) + j], invs[k].aval.shape)
    for j, k in enumerate(tables):
        in_bars[nb + nc + k] = outs[len(carry_wrt) + len(inv_wrt) + j]
    return in_bars


def loop_vjp(em, op, bars, needs, context, state):
    info = op.params["info"]
    return reverse_sweep(em, op, bars, needs, state, bwd_prim=prims.loop_bwd_p, context="body",
                         carry_shape=lambda k: info.shape, outer=context)


FORWARD_RULES[prims.loop_p] = loop_forward
VJP_RULES[prims.loop_p] = loop_vjp
