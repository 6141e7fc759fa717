"""STAGE 2 — check_graph: every value is defined before use and every op's output types
agree with its primitive's abstract evaluation, in loop bodies too."""

from .graph import Graph, Lit
from .prims import out_avals


class GraphError(AssertionError):
    """An internal invariant broke: a bug in dloop, not in the user's code."""


def check_graph(graph, free=()):
    defined = set(graph.inputs) | set(free)
    for op in graph.ops:
        for x in op.inputs:
            if not isinstance(x, Lit) and x not in defined:
                raise GraphError(f"{op.prim.name} reads {x!r} before it is defined")
        want = out_avals(op.prim, [x.aval for x in op.inputs], op.params)
        got = [o.aval for o in op.outputs]
        if want != got:
            raise GraphError(f"{op.prim.name}: outputs {got} but its rule says {want}")
        for sub in _subgraphs(op):
            check_graph(sub)
        defined.update(op.outputs)
    for x in graph.outputs:
        if not isinstance(x, Lit) and x not in defined:
            raise GraphError(f"output {x!r} is not defined")


def _subgraphs(op):
    info = op.params.get("info")
    if info is not None:
        yield info.body
        if info.cond is not None:
            yield info.cond
    body_vjp = op.params.get("body_vjp")
    if body_vjp is not None:
        yield body_vjp.graph
    for v in op.params.values():
        if isinstance(v, Graph):
            yield v
