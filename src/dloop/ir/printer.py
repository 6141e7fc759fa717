"""STAGE 2 — str(graph): the readable form that tests and debug dumps show."""


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
    simple = {k: v for k, v in op.params.items() if not hasattr(v, "ops") and k != "info"}
    params = " ".join(f"{k}={v}" for k, v in simple.items())
    head = f"{outs} = {op.prim.name}[{params}] {ins}" if params else f"{outs} = {op.prim.name} {ins}"
    for name, sub in op.params.items():
        if hasattr(sub, "ops"):
            head += f"\n{'  ' * indent}  {name}=\n" + format_graph(sub, indent + 1)
    return head
