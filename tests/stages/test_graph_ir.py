"""Stage tests of the graph IR and autodiff on hand-built graphs: no backend involved."""

import numpy as np
import pytest

from dloop.ad import loops as _loop_rules  # noqa: F401
from dloop.ad import rules as _rules  # noqa: F401
from dloop.ad.vjp import vjp_graph
from dloop.ir import prims
from dloop.ir.graph import Graph, Lit, Op, new_var
from dloop.ir.verify import GraphError, check_graph

F64 = np.float64


def _sin_times_x():
    x = new_var((3,), F64)
    s = new_var((3,), F64)
    y = new_var((3,), F64)
    graph = Graph([x], [y], [Op(prims.REGISTRY["sin"], [x], [s]),
                             Op(prims.REGISTRY["mul"], [s, x], [y])])
    return graph, x, s, y


def test_printed_graph_is_readable():
    graph, x, s, y = _sin_times_x()
    text = str(graph)
    assert f"lambda {x}:float64[3]" in text
    assert f"{s}:float64[3] = sin {x}" in text
    assert f"in ({y}) }}" in text


def test_verifier_accepts_a_good_graph_and_rejects_use_before_definition():
    graph, x, s, y = _sin_times_x()
    check_graph(graph)
    graph.ops.reverse()
    with pytest.raises(GraphError, match="before it is defined"):
        check_graph(graph)


def test_verifier_rejects_wrong_output_type():
    x = new_var((3,), F64)
    bad = new_var((4,), F64)
    with pytest.raises(GraphError, match="rule says"):
        check_graph(Graph([x], [bad], [Op(prims.REGISTRY["sin"], [x], [bad])]))


def test_vjp_graph_of_sin_times_x():
    graph, x, s, y = _sin_times_x()
    joint = vjp_graph(graph, [0])
    check_graph(joint)
    assert len(joint.inputs) == 2 and len(joint.outputs) == 2
    names = [op.prim.name for op in joint.ops]
    assert names[:2] == ["sin", "mul"] and "cos" in names


def test_vjp_of_integer_input_is_zero_literal():
    k = new_var((), np.int64)
    f = new_var((), F64)
    out = new_var((), F64)
    graph = Graph([k, f], [out], [Op(prims.REGISTRY["mul"], [f, Lit(2.0, F64)], [out])])
    joint = vjp_graph(graph, [1])
    check_graph(joint)
    grad = joint.outputs[-1]
    assert grad.aval.dtype == F64


def test_printed_loop_shows_its_body():
    import dloop as dl
    from dloop.api import _trace
    graph, *_ = _trace(lambda x: dl.fori_loop(0, np.array([1, 2]), lambda i, v: v * 2.0,
                                              x).sum(), [np.ones(2)], None)
    text = str(graph)
    assert "= loop " in text and "body=" in text and "= mul " in text


def test_loop_started_from_a_broadcast_value_computes_it_in_the_kernel():
    """np.ones_like(x) is one value broadcast: the loop's carry starts from that value, not
    from a constant array of the full shape that every launch would copy."""
    import dloop as dl
    from dloop.api import _trace
    graph, consts, *_ = _trace(lambda x: dl.fori_loop(0, np.array([1, 2]), lambda i, v: v * x,
                                                      np.ones_like(x)), [np.ones(2)], None)
    loop = next(op for op in graph.ops if op.prim is prims.loop_p)
    start = next(op for op in graph.ops if loop.inputs[2] in op.outputs)
    assert start.prim is prims.broadcast_p and isinstance(start.inputs[0], Lit)
    assert start.inputs[0].value == 1.0
    read = [v for op in graph.ops for v in op.inputs if v in consts]
    assert all(consts[v].dtype != np.float64 for v in read)     # only the trip counts
