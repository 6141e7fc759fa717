"""STAGE 4 — str(kernel): kernel IR as text. Also the compile-cache key of every backend."""

from . import kir


def format_kernel(kernel):
    lines = [f"kernel {kernel.name}(tid={kernel.tid}):"]
    for k, b in enumerate(kernel.buffers):
        lines.append(f"  buf{k}: {b.kind} {b.dtype.name} {b.key if b.key is not None else ''}")
    for k, s in enumerate(kernel.stacks):
        lines.append(f"  stack{k}: loop{s.loop_id} carry{s.carry} {s.dtype.name} region=buf"
                     f"{s.region} start=buf{s.start} cap=buf{s.cap} {s.index}/{s.group_size} "
                     f"fault={s.fault_slot}")
    lines.append(f"  counters: {kernel.counters}  faults: {len(kernel.faults)}")
    _block(kernel.body, lines, 1)
    return "\n".join(lines)


def _v(x):
    return repr(x)


def _block(stmts, lines, depth):
    pad = "  " * depth
    for s in stmts:
        if isinstance(s, kir.Assign):
            lines.append(f"{pad}{s.out}:{s.out.dtype.name} = {s.op}({', '.join(map(_v, s.args))})")
        elif isinstance(s, kir.Load):
            lines.append(f"{pad}{s.out}:{s.out.dtype.name} = buf{s.buf}[{_v(s.index)}]")
        elif isinstance(s, kir.Store):
            lines.append(f"{pad}buf{s.buf}[{_v(s.index)}] = {_v(s.value)}")
        elif isinstance(s, kir.For):
            order = "reversed" if s.reverse else "range"
            lines.append(f"{pad}{s.outs} = for {s.index} in {order}({_v(s.lo)}, {_v(s.hi)}) "
                         f"carry {s.carries} = {s.inits}:")
            _block(s.body, lines, depth + 1)
            lines.append(f"{pad}  yield {s.yields}")
        elif isinstance(s, kir.While):
            lines.append(f"{pad}{s.outs} = while carry {s.carries} = {s.inits}:")
            _block(s.cond_body, lines, depth + 1)
            lines.append(f"{pad}  cond {_v(s.cond)} do:")
            _block(s.body, lines, depth + 1)
            lines.append(f"{pad}  yield {s.yields}")
        elif isinstance(s, kir.If):
            lines.append(f"{pad}if {_v(s.cond)}:")
            _block(s.body, lines, depth + 1)
        elif isinstance(s, kir.Pop):
            lines.append(f"{pad}{s.out}:{s.out.dtype.name} = pop stack{s.stack}")
        else:
            fields = ", ".join(f"{k}={_v(v)}" for k, v in vars(s).items())
            lines.append(f"{pad}{type(s).__name__.lower()} {fields}")
