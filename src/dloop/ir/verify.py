"""STAGE 2 — check_graph: every value is defined before use and every op's output types
agree with its primitive's abstract evaluation, in loop bodies too."""

from .graph import Lit
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
        for _, sub in op.subgraphs():
            check_graph(sub)
        defined.update(op.outputs)
    for x in graph.outputs:
        if not isinstance(x, Lit) and x not in defined:
            raise GraphError(f"output {x!r} is not defined")

