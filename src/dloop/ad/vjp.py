"""STAGE 3 — reverse mode as a graph transformation: one VJP rule per primitive.

vjp_graph(g) returns a joint graph: g's forward ops (loops replaced by their taped form),
then the backward ops in reverse order. Inputs: g's inputs, then one cotangent per float
output. Outputs: g's outputs, then one gradient per requested input."""

import numpy as np

from ..errors import DloopNotImplementedError
from ..ir import prims
from ..ir.graph import Graph, Lit, Var, safe_zip
from .emit import Emitter, Mask, is_float

VJP_RULES = {}        # prim -> rule(em, op, out_bars, active_inputs) -> in_bars
FORWARD_RULES = {}    # prim -> fwd(em, op) -> state passed to the VJP rule (loops: the tape)


def active_vars(graph, wrt):
    active = {v for v in wrt if is_float(v)}
    for op in graph.ops:
        if any(isinstance(x, Var) and x in active for x in op.inputs):
            active.update(o for o in op.outputs if is_float(o))
    return active


def vjp_graph(graph, wrt_indices, context="top", effect_indices=()):
    """context 'top' for a whole function, 'body' for a loop body's scalar graph.
    effect_indices: inputs that are differentiated too, but whose cotangents are accumulated
    by effects (the gathered tables of a loop body), not returned."""
    wrt = [graph.inputs[k] for k in wrt_indices]
    active = active_vars(graph, wrt + [graph.inputs[k] for k in effect_indices])
    em = Emitter()
    states = []
    for op in graph.ops:
        fwd = FORWARD_RULES.get(op.prim)
        if fwd is None:
            em.ops.append(op)
        states.append(fwd(em, op) if fwd else None)
    cts = [Var(o.aval) for o in graph.outputs if is_float(o)]
    bars, masks = {}, {}
    for out, ct in zip([o for o in graph.outputs if is_float(o)], cts):
        if isinstance(out, Var) and out in active:
            _accumulate(em, bars, masks, out, ct)
    for op, state in reversed(list(zip(graph.ops, states))):
        out_bars = [bars.get(o) for o in op.outputs]
        if all(g is None for g in out_bars):
            continue
        needs = [isinstance(x, Var) and x in active for x in op.inputs]
        if not any(needs):
            continue
        rule = VJP_RULES.get(op.prim)
        if rule is None:
            raise DloopNotImplementedError(f"no gradient rule for '{op.prim.name}'", op.src)
        em.src = op.src
        kwargs = {"state": state} if op.prim in FORWARD_RULES else {}
        em.mask = masks.get(out_bars[0]) if op.prim.kind == "elementwise" and \
            op.prim is not prims.select_p else None
        em.masked_bar = out_bars[0]
        in_bars = rule(em, op, out_bars, needs, context=context, **kwargs)
        moved = _moved_mask(em, op, masks.get(out_bars[0])) if op.prim in _MOVES else None
        in_masks = _select_masks(op, out_bars[0]) if op.prim is prims.select_p else \
            [moved] if moved is not None else [em.mask] * len(in_bars)
        for x, g, need, mask in safe_zip(op.inputs, in_bars, needs, in_masks):
            if need and g is not None:
                if op.prim is not prims.select_p:
                    g = em.masked(g, mask)
                _accumulate(em, bars, masks, x, g, mask)
        em.mask = em.masked_bar = None
    grads = [bars.get(v) if v in active else None for v in wrt]
    grads = [g if g is not None else em.zeros(v.aval.shape, v.aval.dtype)
             for g, v in zip(grads, wrt)]
    return Graph(list(graph.inputs) + cts, list(graph.outputs) + grads, em.ops)


def _select_masks(op, g):
    """np.where's VJP zeroes each branch's cotangent where the other branch was taken."""
    c = op.inputs[0]
    return [None] + [Mask(c, keep, g.aval.shape) for keep in (True, False)]


def _accumulate(em, bars, masks, x, g, mask=None):
    """bars[x] += g. `mask`: where g can be nonzero (None: anywhere). A sum keeps a mask
    only where both terms have the same one."""
    if mask is not None and g.aval.shape != mask.shape:
        mask = _unbroadcast_mask(em, mask, g.aval.shape)
    if x in bars:
        mask = mask if mask is not None and mask.same(masks.get(bars[x])) else None
        g = em.add(bars[x], g)
    bars[x] = g
    if mask is not None:
        masks[g] = mask


_MOVES = (prims.reduce_p, prims.reshape_p, prims.transpose_p, prims.static_slice_p)


def _moved_mask(em, op, mask):
    """The mask of a reduction's, reshape's or transpose's input cotangent, from its output's:
    an input position the result never read (every output it feeds was cut by np.where) gets
    a zero cotangent from these rules already; the mask tells the elementwise rules upstream
    to keep it zero, whatever their partial derivatives there (0 * inf)."""
    if mask is None:
        return None
    x, out = op.inputs[0], op.outputs[0]
    cond = em.broadcast(mask.cond, out.aval.shape)
    if op.prim is prims.reduce_p:
        axes = op.params["axes"]
        kept = tuple(1 if k in axes else d for k, d in enumerate(x.aval.shape))
        cond = em.broadcast(em.op("reshape", cond, shape=kept), x.aval.shape)
    elif op.prim is prims.reshape_p:
        cond = em.op("reshape", cond, shape=x.aval.shape)
    elif op.prim is prims.static_slice_p:
        # Positions outside the slice were never read here either, but nothing cut them:
        # they stay unmasked (read), as without a where.
        unread = em.op("convert", cond if not mask.keep else em.op("not", cond),
                       dtype=np.dtype(np.float64))
        placed = em.op("static_slice_vjp", unread, key=op.params["key"], shape=x.aval.shape)
        return Mask(em.op("gt", placed, Lit(0.0, np.dtype(np.float64))), False, x.aval.shape)
    else:
        inverse = tuple(int(k) for k in np.argsort(op.params["axes"]))
        cond = em.op("transpose", cond, axes=inverse)
    return Mask(cond, mask.keep, x.aval.shape)


def _unbroadcast_mask(em, mask, shape):
    """The mask of a broadcast operand's cotangent (summed over the broadcast axes): a
    position is read if any of its copies is."""
    if len(shape) > len(mask.shape) or any(
            d not in (1, m) for d, m in zip(shape[::-1], mask.shape[::-1])):
        return None
    cond = em.broadcast(mask.cond, mask.shape)
    read = cond if mask.keep else em.op("not", cond)
    count = em.op("unbroadcast", em.op("convert", read, dtype=np.dtype(np.float64)),
                  shape=tuple(shape))
    return Mask(em.op("gt", count, Lit(0.0, np.dtype(np.float64))), True, shape)
