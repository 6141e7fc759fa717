"""STAGE 2 — str(graph): the readable form that tests and debug dumps show; and the
canonical text that keys the cache of compiled programs."""

import numpy as np

from .graph import Var, dtype_name


def format_graph(graph, indent=0):
    pad = "  " * indent
    ins = ", ".join(f"{v}:{v.aval}" for v in graph.inputs)
    lines = [f"{pad}{{ lambda {ins} ."]
    for op in graph.ops:
        lines.append(pad + "  " + _format_op(op, indent + 1))
    outs = ", ".join(map(repr, graph.outputs))
    lines.append(f"{pad}  in ({outs}) }}")
    return "\n".join(lines)


def _format_op(op, indent):
    outs = ", ".join(f"{v}:{v.aval}" for v in op.outputs)
    ins = ", ".join(map(repr, op.inputs))
    simple = {k: v for k, v in op.params.items() if k not in _GRAPH_PARAMS}
    params = " ".join(f"{k}={v}" for k, v in simple.items())
    name = f"{op.prim.name}[{params}]" if params else op.prim.name
    head = f"{outs} = {name} {ins}"
    for name, sub in op.subgraphs():
        head += f"\n{'  ' * indent}  {name}=\n" + format_graph(sub, indent + 1)
    return head


_GRAPH_PARAMS = ("info", "body_vjp")       # printed as subgraphs, not inline


def canonical_text(graph, consts):
    """The graph as text with values numbered by appearance, loop bodies inlined, literals
    and parameters in full, and constant arrays by type only: two traces with the same text
    compute the same function of their inputs and constants (the cache key of programs).
    Returns (text, the constant vars in order of first use)."""
    names, order = {}, []
    lines = []
    _canonical(graph, consts, names, order, lines, "")
    return "\n".join(lines), order


def _canonical_name(x, consts, names, order):
    """A value's name in the text: v<k> (its type is printed where it is defined), a
    constant's c<k>:<type>, a literal's value and dtype."""
    if isinstance(x, Var):
        name = names.get(x)
        if name is None:
            if x in consts:
                order.append(x)
                name = names[x] = f"c{len(order) - 1}:{x.aval}"
            else:
                name = names[x] = f"v{len(names)}"
        return name
    return f"{x.value!r}:{dtype_name(x.aval.dtype)}"


def _canonical(graph, consts, names, order, lines, pad):
    # List comprehensions and a local name: this runs at every call, ~1 us per op.
    name = _canonical_name
    lines.append(pad + "in " + " ".join([name(v, consts, names, order) + f":{v.aval}"
                                         for v in graph.inputs]))
    for op in graph.ops:
        ins = " ".join([name(x, consts, names, order) for x in op.inputs])
        outs = " ".join([name(o, consts, names, order) + f":{o.aval}" for o in op.outputs])
        params = ", ".join([f"{k!r}: {_text(v)}" for k, v in op.params.items()
                            if k not in _GRAPH_PARAMS]) if op.params else ""
        lines.append(f"{pad}{outs} = {op.prim.name}{{{params}}} {ins} @{op.src}")
        info = op.params.get("info")
        if info is not None:
            lines.append(f"{pad}  loop {info.kind} {getattr(info, 'shape', None)} "
                         f"{[_text(d) for d in info.carry_dtypes]} "
                         f"{getattr(info, 'invariant_modes', ())} {_text(info.index_dtype)} "
                         f"@{info.src}")
            for _, sub in op.subgraphs():
                _canonical(sub, consts, names, order, lines, pad + "    ")
    lines.append(pad + "out " + " ".join([name(x, consts, names, order)
                                          for x in graph.outputs]))


_DTYPE_TEXT = {}


def _text(value):
    """repr(value), a dtype's read once per dtype: NumPy builds a dtype's repr in Python, a
    few microseconds each, and the canonical text of W3's trace printed a dozen."""
    if isinstance(value, np.dtype):
        text = _DTYPE_TEXT.get(value)
        if text is None:
            text = _DTYPE_TEXT[value] = repr(value)
        return text
    return repr(value)
