"""STAGE 3 — a grad's cotangent seeds written into its joint graph as literals.

`grad` and `value_and_grad` always seed the loss with 1 and the aux outputs with 0. Passed as
inputs, the seeds were arrays copied to a GPU at every call, then reshaped and broadcast
there by host steps, and those host steps kept a loop's reverse sweep out of the kernel of
its forward sweep. Here each seed is a literal: the reshapes, broadcasts and elementwise ops
that only combine seeds are folded away, kernel ops read the literal itself (a scalar
broadcasts), and any other op finds a broadcast of it made just before it. The schedule
then joins the two sweeps of a loop in one kernel (W1's and W2's gradients: one launch).
"""

from dataclasses import replace

import numpy as np

from ..ir import prims
from ..ir.graph import Graph, Lit, Op, Var
from ..ir.semantics import evaluate
from ..kernel.lower import table_operand


def seeded(joint, n_primal):
    """`joint` (vjp_graph's, with the cotangents of its outputs as the inputs after the first
    n_primal) taking only the primal inputs: the first cotangent 1, the others 0."""
    fills = {ct: Lit(1.0 if k == 0 else 0.0, ct.aval.dtype)
             for k, ct in enumerate(joint.inputs[n_primal:])}
    ops, made = [], set()

    def fill(x):
        made.add(x)
        return Op(prims.broadcast_p, [fills[x]], [x], {"shape": x.aval.shape})

    for op in joint.ops:
        folded = _folded(op, fills)
        if folded is not None:
            fills[op.outputs[0]] = folded
            continue
        inputs = list(op.inputs)
        for pos, x in enumerate(op.inputs):
            if not isinstance(x, Var) or x not in fills:
                continue
            if _reads_a_literal(op, pos):
                inputs[pos] = fills[x]
            elif x not in made:
                ops.append(fill(x))
        ops.append(replace(op, inputs=inputs) if inputs != op.inputs else op)
    ops += [fill(x) for x in dict.fromkeys(joint.outputs)
            if isinstance(x, Var) and x in fills and x not in made]
    return Graph(joint.inputs[:n_primal], joint.outputs, ops)


def _folded(op, fills):
    """The literal that op makes from seeds alone (every element the same), else None."""
    if len(op.outputs) != 1 or not any(isinstance(x, Var) and x in fills for x in op.inputs) \
            or not all(isinstance(x, Lit) or x in fills for x in op.inputs):
        return None
    values = [fills.get(x, x) for x in op.inputs]
    out = op.outputs[0].aval.dtype
    if op.prim in (prims.reshape_p, prims.broadcast_p):
        return values[0]
    if op.prim.kind != "elementwise" or out.kind == "c":
        return None
    value = evaluate(op.prim.name, [np.asarray(v.value, v.aval.dtype) for v in values],
                     op.params)
    return Lit(np.asarray(value)[()], out)


def _reads_a_literal(op, pos):
    """Whether op, run in a kernel, reads operand `pos` as a scalar broadcast: an elementwise
    op where another operand has the result's shape, or a per-element loop's operand
    (not a table it gathers from)."""
    x = op.inputs[pos]
    if not op.prim.fusable or x.aval.dtype.kind == "c" or table_operand(op, pos):
        return False
    if op.prim.kind == "loop":
        return True
    shape = op.outputs[0].aval.shape if op.outputs else None
    return op.prim.kind == "elementwise" and any(
        isinstance(y, Var) and k != pos and y.aval.shape == shape
        for k, y in enumerate(op.inputs))
