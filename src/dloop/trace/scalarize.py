"""STAGE 1 — turn a traced loop body into the per-element program each thread runs.

A per-element loop is a map of a scalar loop over the elements of its carry. Every value of
the body must therefore broadcast to the element shape, and each becomes one scalar per
element; invariant arrays are read at the element's index ('elem') or gathered ('table').
Anything else mixes elements, which only a collective loop may do."""

import dataclasses

import numpy as np

from ..errors import DloopNotImplementedError, DloopValueError
from ..ir import prims
from ..ir.graph import Graph, Lit, Op, Var, scalar_aval


def _fits(shape, element_shape):
    if shape == () or shape == element_shape:      # the usual cases, without NumPy's machinery
        return True
    try:
        return tuple(np.broadcast_shapes(shape, element_shape)) == tuple(element_shape)
    except ValueError:
        return False


class MixingError(Exception):
    """Raised inside scalarization; trace/loops.py turns it into the user's DloopError."""

    def __init__(self, what, src, complex_value=False):
        self.what, self.src, self.complex_value = what, src, complex_value


def invariant_uses(graph, captured):
    """For each captured input var: the set of modes it is used in ('elem', 'table')."""
    uses = {v: set() for v in captured}
    for op in graph.ops:
        if op.prim is prims.gather_p:
            _note(uses, op.inputs[0], "table")
            for x in op.inputs[1:]:
                _note(uses, x, "elem")
        elif op.prim.kind == "loop":
            info = op.params["info"]
            _, carries, invs = info.split_inputs(op.inputs)
            for x in op.inputs[:info.n_bounds] + list(carries):
                _note(uses, x, "elem")
            for x, mode in zip(invs, info.invariant_modes):
                _note(uses, x, mode)
        else:
            for x in op.inputs:
                _note(uses, x, "elem")
    for x in graph.outputs:
        _note(uses, x, "elem")
    return uses


def _note(uses, x, mode):
    if isinstance(x, Var) and x in uses:
        uses[x].add(mode)


def scalarize(graph, n_fixed, captured, slots, element_shape):
    """graph.inputs = n_fixed loop inputs (index, carries), then `captured` (one inner var per
    parent var, dict parent->inner). slots: [(parent var, mode)], the loop op's invariants.
    Returns the scalar graph with inputs [fixed..., one per slot]."""
    env = {}
    inputs = []
    for v in [*graph.inputs, *(o for op in graph.ops for o in op.outputs)]:
        if v.aval.dtype.kind == "c":
            # Kernels compute in real dtypes: a loop under scalar bounds with complex values
            # runs as a collective loop (a per-element body refused them while tracing).
            raise MixingError(v.aval.dtype.name, None, complex_value=True)
    for v in graph.inputs[:n_fixed]:
        if not _fits(v.aval.shape, element_shape):
            raise MixingError(f"a loop input of shape {v.aval.shape}", None)
        env[v] = Var(scalar_aval(v.aval.dtype))
        inputs.append(env[v])
    tables = {}
    for parent, mode in slots:
        inner = captured.get(parent)
        if mode == "table":
            new = Var(parent.aval)
            if inner is not None:
                tables[inner] = new
        else:
            if not _fits(parent.aval.shape, element_shape):
                raise MixingError(f"a loop-invariant array of shape {parent.aval.shape}", None)
            new = Var(scalar_aval(parent.aval.dtype))
            if inner is not None:
                env[inner] = new
        inputs.append(new)
    ops = []
    for op in graph.ops:
        _scalar_op(op, env, tables, element_shape, ops)
    outputs = [_read(env, x, None) for x in graph.outputs]
    return Graph(inputs, outputs, ops)


def _read(env, x, src):
    if isinstance(x, Lit):
        return x
    if x not in env:
        raise MixingError("an array that is not per-element", src)
    return env[x]


def _scalar_op(op, env, tables, element_shape, ops):
    prim = op.prim
    if prim.kind in ("host", "collective") or prim is prims.roll_p:
        raise MixingError(f"'{_describe(op)}'", op.src)
    for out in op.outputs:
        if not _fits(out.aval.shape, element_shape):
            raise MixingError(f"a result of shape {out.aval.shape} ({prim.name})", op.src)
    if prim is prims.broadcast_p:
        env[op.outputs[0]] = _read(env, op.inputs[0], op.src)
        return
    if prim is prims.gather_p:
        table = op.inputs[0]
        if table not in tables:
            raise MixingError("indexing into a value computed from the carry", op.src)
        inputs = [tables[table]] + [_read(env, x, op.src) for x in op.inputs[1:]]
        params = op.params
    elif prim.kind == "loop":
        info = op.params["info"]
        nb, nc = info.n_bounds, info.n_carry
        inputs = [_read(env, x, op.src) for x in op.inputs[:nb + nc]]
        for x, mode in zip(op.inputs[nb + nc:], info.invariant_modes):
            if mode == "table":
                if x not in tables:
                    raise MixingError("a nested loop indexing a value computed from the carry",
                                      op.src)
                inputs.append(tables[x])
            else:
                inputs.append(_read(env, x, op.src))
        params = dict(op.params, info=dataclasses.replace(info, shape=()))
    else:
        inputs = [_read(env, x, op.src) for x in op.inputs]
        params = op.params
    outs = [Var(scalar_aval(v.aval.dtype, v.aval.is_tape)) for v in op.outputs]
    env.update(zip(op.outputs, outs))
    ops.append(Op(prim, inputs, outs, params, op.src))


def _describe(op):
    if op.prim is prims.reduce_p:
        return f"{op.params['op']} over the carry"
    return {"static_slice": "slicing the carry", "reshape": "reshaping the carry",
            "cloop": "a collective loop over the carry",
            "roll": "rolling the carry"}.get(op.prim.name, op.prim.name)


def mixing_error(err, per_element, loop_src):
    where = err.src or loop_src
    if err.complex_value:     # a while loop's condition: its builder is not per-element
        return complex_error(err.what, where)
    if per_element:
        return DloopValueError(
            f"the body of this per-element loop uses {err.what}, which dloop runs only on "
            "whole arrays: it mixes elements, or has no per-element form yet. Under "
            "per-element bounds element j may depend only on element j of the carry and on "
            "loop-invariant arrays; use scalar bounds (a collective loop) for such a body, or "
            "compute that part before or after the loop", where)
    return DloopNotImplementedError(
        f"this loop body combines elements of the carry ({err.what}); collective loop bodies "
        "are not supported yet: keep the body elementwise in the carry", where)


def complex_error(dtype_name, where):
    return DloopNotImplementedError(
        f"a complex value ({dtype_name}) inside a per-element loop body is not supported: "
        "compute the complex part outside the per-element loop (before it or after it), or "
        "use a collective loop, whose body works on whole arrays", where)
