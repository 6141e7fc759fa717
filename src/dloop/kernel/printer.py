"""STAGE 4 — str(kernel): kernel IR as text, with values and loops numbered by order of
appearance, so equal programs print equally in any process. This text is the compile-cache
key of every backend."""

from . import kir


class _Names:
    def __init__(self):
        self.values, self.loops = {}, {}

    def v(self, x):
        if isinstance(x, kir.Const):
            return repr(x)
        return "v%d" % self.values.setdefault(x.id, len(self.values))

    def vs(self, xs):
        return "[" + ", ".join(self.v(x) for x in xs) + "]"

    def loop(self, loop_id):
        return "L%d" % self.loops.setdefault(loop_id, len(self.loops))


def format_kernel(kernel):
    n = _Names()
    # The text is the compile caches' key: the stacks' addressing is part of it.
    lanes = f" tape_lanes={kernel.tape_lanes}" if kernel.tape_lanes != 1 else ""
    head = f"tid={n.v(kernel.tid)}" + ("" if kernel.slot is None else f", slot={n.v(kernel.slot)}")
    head += ", stacks by slot" if kernel.stacks_by_slot else ""
    lines = [f"kernel {kernel.name}({head}){lanes}:"]
    for k, b in enumerate(kernel.buffers):
        key = ""
        if b.kind == "region":
            key = f" {n.loop(b.key[0])}"
        elif b.kind == "accum":
            key = f" of buf{b.key[1]}"
        elif b.kind in ("start", "cap"):
            key = f" {n.loop(b.key)}"
        lines.append(f"  buf{k}: {b.kind} {b.dtype.name}{key}")
    for k, s in enumerate(kernel.stacks):
        lines.append(f"  stack{k}: {n.loop(s.loop_id)} carry{s.carry} {s.dtype.name} region=buf"
                     f"{s.region} start=buf{s.start} cap=buf{s.cap} {s.index}/{s.group_size} "
                     f"fault={s.fault_slot}")
    lines.append(f"  counters: {[n.loop(c) for c in kernel.counters]}  "
                 f"faults: {[f.kind for f in kernel.faults]}")
    _block(kernel.body, lines, 1, n)
    return "\n".join(lines)


def _block(stmts, lines, depth, n):
    for s in stmts:
        first = len(lines)
        _statement(s, lines, depth, n)
        if s.src:                       # on the statement's first line (a loop's header)
            lines[first] += f"  @ {s.src}"


def _statement(s, lines, depth, n):
    pad = "  " * depth
    if isinstance(s, kir.Assign):
        lines.append(f"{pad}{n.v(s.out)}:{s.out.dtype.name} = {s.op}("
                     f"{', '.join(n.v(a) for a in s.args)})")
    elif isinstance(s, kir.Load):
        wrap = "" if s.wrap is None else f" - {s.wrap[0]} wrapped at {s.wrap[1]}"
        lines.append(f"{pad}{n.v(s.out)}:{s.out.dtype.name} = buf{s.buf}[{n.v(s.index)}{wrap}]")
    elif isinstance(s, kir.Store):
        lines.append(f"{pad}buf{s.buf}[{n.v(s.index)}] = {n.v(s.value)}")
    elif isinstance(s, kir.AtomicAdd):
        lines.append(f"{pad}buf{s.buf}[{n.v(s.index)}] += {n.v(s.value)} (atomic)")
    elif isinstance(s, kir.For):
        order = "reversed" if s.reverse else "range"
        head = (f"for {n.v(s.index)} in {order}({n.v(s.lo)}, {n.v(s.hi)}) carry "
                f"{n.vs(s.carries)} = {n.vs(s.inits)}:")
        lines.append(f"{pad}{head}")
        _block(s.body, lines, depth + 1, n)
        lines.append(f"{pad}  yield {n.vs(s.yields)} -> {n.vs(s.outs)}")
    elif isinstance(s, kir.While):
        lines.append(f"{pad}while carry {n.vs(s.carries)} = {n.vs(s.inits)}:")
        _block(s.cond_body, lines, depth + 1, n)
        lines.append(f"{pad}  cond {n.v(s.cond)} do:")
        _block(s.body, lines, depth + 1, n)
        lines.append(f"{pad}  yield {n.vs(s.yields)} -> {n.vs(s.outs)}")
    elif isinstance(s, kir.If):
        lines.append(f"{pad}if {n.v(s.cond)}:")
        _block(s.body, lines, depth + 1, n)
    elif isinstance(s, kir.Pop):
        lines.append(f"{pad}{n.v(s.out)}:{s.out.dtype.name} = pop stack{s.stack}")
    elif isinstance(s, kir.Push):
        lines.append(f"{pad}push stack{s.stack} {n.v(s.value)}")
    elif isinstance(s, kir.StackInit):
        lines.append(f"{pad}stackinit stack{s.stack} depth={n.v(s.depth)}")
    elif isinstance(s, kir.Fault):
        lines.append(f"{pad}fault slot{s.slot} {n.v(s.value)}")
    elif isinstance(s, kir.CountMax):
        lines.append(f"{pad}countmax counter{s.counter} {n.v(s.value)}")
    else:
        raise TypeError(f"unknown kernel IR statement {type(s).__name__}")
