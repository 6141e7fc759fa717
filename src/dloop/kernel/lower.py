"""STAGE 4 — lowering: a fused group of graph ops (one element shape) becomes one kernel.

Each thread handles one element: it reads its inputs at the element's (broadcast) index,
runs the group's ops as scalars, loops included, and writes its outputs. Lowering rules are
registered per primitive in LOWERINGS."""

from dataclasses import dataclass

import numpy as np

from ..ir import elementwise, prims
from ..ir.graph import Lit, safe_zip
from . import kir

I64 = np.dtype(np.int64)
BOOL = np.dtype(bool)
LOWERINGS = {}


@dataclass(frozen=True)
class Accumulated:
    """A whole-array result that the kernel's AtomicAdds build in an 'accum' buffer."""
    buf: int


@dataclass(frozen=True)
class TableRef:
    """A whole array inside a kernel, read by gathers."""
    buf: int
    shape: tuple
    dtype: np.dtype


class KernelBuilder:
    def __init__(self, name, count_loops=None):
        self.kernel = kir.Kernel(name, kir.KVar(I64), [])
        self.blocks = [self.kernel.body]
        # A counting kernel (count_loops given) runs the forward sweep without adstacks and
        # records the largest trip count of each listed loop.
        self.counting = count_loops is not None
        self.count_loops = set(count_loops or ())
        self.src = None           # the user's line of the op being lowered
        self.element_shape = None   # of a fused group's threads (lower_group)

    # -- statements --
    def emit(self, stmt):
        if stmt.src is None:
            stmt.src = self.src
        self.blocks[-1].append(stmt)

    def lower_op(self, op, ins):
        outer, self.src = self.src, op.src or self.src
        try:
            return LOWERINGS[op.prim](self, op, ins)
        finally:
            self.src = outer

    def assign(self, op, args, dtype):
        out = kir.KVar(dtype)
        self.emit(kir.Assign(out, op, tuple(args)))
        return out

    def const(self, value, dtype):
        return kir.Const(np.dtype(dtype).type(value).item(), np.dtype(dtype))

    def block(self):
        """Context manager collecting statements into a new list."""
        builder = self

        class _Block:
            def __enter__(self):
                self.stmts = []
                builder.blocks.append(self.stmts)
                return self.stmts

            def __exit__(self, *exc):
                builder.blocks.pop()
        return _Block()

    # -- resources --
    def buffer(self, kind, dtype, key=None):
        spec = kir.BufferSpec(kind, np.dtype(dtype), key)
        if spec in self.kernel.buffers:
            return self.kernel.buffers.index(spec)
        self.kernel.buffers.append(spec)
        return len(self.kernel.buffers) - 1

    def fault_slot(self, kind, src, **detail):
        self.kernel.faults.append(kir.FaultSpec(kind, src, detail))
        return len(self.kernel.faults) - 1

    def faults_buffer(self):
        return self.buffer("faults", I64)

    def stack(self, info, carry):
        """The adstack of `carry` of loop `info`: one per (loop, carry) in a kernel."""
        for k, s in enumerate(self.kernel.stacks):
            if s.loop_id == info.loop_id and s.carry == carry:
                return k
        dtype = np.dtype(info.carry_dtypes[carry])
        same = [j for j, d in enumerate(info.carry_dtypes) if np.dtype(d) == dtype]
        self.faults_buffer()
        spec = kir.StackSpec(
            loop_id=info.loop_id, carry=carry, dtype=dtype,
            region=self.buffer("region", dtype, (info.loop_id, dtype.name)),
            start=self.buffer("start", I64, info.loop_id),
            cap=self.buffer("cap", I64, info.loop_id),
            group_size=len(same), index=same.index(carry),
            fault_slot=self.fault_slot("overflow", info.src, loop_id=info.loop_id, carry=carry,
                                       dtype=dtype.name))
        self.kernel.stacks.append(spec)
        return len(self.kernel.stacks) - 1

    def accumulator(self, table):
        """The zeroed array, of the table's shape, that elements add its cotangent into."""
        return self.buffer("accum", table.dtype, ("accum", table.buf))

    def count(self, loop_id, trips):
        if loop_id in self.count_loops:
            if loop_id not in self.kernel.counters:
                self.kernel.counters.append(loop_id)
                self.buffer("counts", I64)
            self.emit(kir.CountMax(self.kernel.counters.index(loop_id), trips))


def lower_graph(kb, graph, args):
    """Lower a (scalar) graph inline; args are the values of its inputs. Returns its outputs."""
    env = dict(safe_zip(graph.inputs, args))
    for op in graph.ops:
        ins = [read(kb, env, x) for x in op.inputs]
        outs = kb.lower_op(op, ins)
        env.update(safe_zip(op.outputs, outs))
    return [read(kb, env, x) for x in graph.outputs]


def read(kb, env, x):
    return kb.const(x.value, x.aval.dtype) if isinstance(x, Lit) else env[x]


def _elementwise(kb, op, ins):
    return [kb.assign(op.prim.name, ins, op.outputs[0].aval.dtype)]


for _p in prims.REGISTRY.values():
    if _p.kind == "elementwise":
        LOWERINGS[_p] = _elementwise
LOWERINGS[prims.broadcast_p] = lambda kb, op, ins: [ins[0]]


class _KernelMath:
    """The `m` of ir/special.py's expansions: special functions become scalar kernel code."""

    def __init__(self, kb):
        self.kb = kb

    def op(self, name, *args):
        dtype = BOOL if elementwise.BY_NAME[name].result_is_bool else args[-1].dtype
        return self.kb.assign(name, args, dtype)

    def lit(self, value, like):
        return self.kb.const(value, like.dtype)


def _expanded(expansion):
    return lambda kb, op, ins: [expansion(_KernelMath(kb), *ins, **op.params)]


for _row in elementwise.ROWS:
    if _row.expansion is not None:
        LOWERINGS[prims.REGISTRY[_row.name]] = _expanded(_row.expansion)
LOWERINGS[prims.convert_p] = lambda kb, op, ins: [kb.assign("convert", ins,
                                                             op.params["dtype"])]


def _gather(kb, op, ins):
    table, idx = ins[0], ins[1:]
    flat = _table_index(kb, op, table, idx)
    out = kir.KVar(table.dtype)
    kb.emit(kir.Load(out, table.buf, flat))
    return [out]


def _accumulate(kb, op, ins):
    table, idx, g = ins[0], ins[1:-1], ins[-1]
    flat = _table_index(kb, op, table, idx)
    kb.emit(kir.AtomicAdd(kb.accumulator(table), flat, g))
    return []


def _table_index(kb, op, table, idx):
    """The flat index of table[idx...]; negative indices count from the end, and an index
    out of range raises a fault (and reads a clamped, in-bounds element meanwhile)."""
    flat = kb.const(0, I64)
    bad = kb.const(False, BOOL)
    for axis, (i, dim) in enumerate(zip(idx, table.shape)):
        i = _to_i64(kb, i)
        neg = kb.assign("lt", [i, kb.const(0, I64)], BOOL)
        i = kb.assign("select", [neg, kb.assign("add", [i, kb.const(dim, I64)], I64), i], I64)
        out = kb.assign("or", [kb.assign("lt", [i, kb.const(0, I64)], BOOL),
                               kb.assign("ge", [i, kb.const(dim, I64)], BOOL)], BOOL)
        bad = kb.assign("or", [bad, out], BOOL)
        i = kb.assign("min", [kb.assign("max", [i, kb.const(0, I64)], I64),
                              kb.const(max(dim - 1, 0), I64)], I64)
        stride = int(np.prod(table.shape[axis + 1:], dtype=np.int64))
        flat = kb.assign("add", [flat, kb.assign("mul", [i, kb.const(stride, I64)], I64)], I64)
    slot = kb.fault_slot("index", op.src, shape=table.shape)
    kb.faults_buffer()
    with kb.block() as then:
        kb.emit(kir.Fault(slot, kb.const(1, I64)))
    kb.emit(kir.If(bad, then))
    return flat


LOWERINGS[prims.gather_p] = _gather
LOWERINGS[prims.accumulate_p] = _accumulate


def _roll(kb, op, ins):
    """out[..., c, ...] = x[..., (c - shift) mod dim, ...] along each rolled axis."""
    table = ins[0]
    shape = tuple(table.shape)
    shifts = {a: s % max(shape[a], 1) for a, s in zip(op.params["axes"], op.params["shift"])}
    rolled = [a for a, s in shifts.items() if s]
    out = kir.KVar(table.dtype)
    if shape == kb.element_shape and len(rolled) == 1 and \
            all(d == 1 for d in shape[:rolled[0]]):
        # Rolled along the outermost axis: thread t reads t - shift * inner, wrapped once.
        inner = int(np.prod(shape[rolled[0] + 1:], dtype=np.int64))
        size = int(np.prod(shape, dtype=np.int64))
        kb.emit(kir.Load(out, table.buf, kb.kernel.tid, wrap=(shifts[rolled[0]] * inner, size)))
        return [out]
    flat = kb.const(0, I64)
    for axis, dim in enumerate(shape):
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        coord = kb.assign("mod", [kb.assign("floordiv", [kb.kernel.tid, kb.const(inner, I64)],
                                            I64), kb.const(dim, I64)], I64)
        if shifts.get(axis, 0):
            coord = kb.assign("mod", [kb.assign("sub", [coord, kb.const(shifts[axis], I64)],
                                                I64), kb.const(dim, I64)], I64)
        flat = kb.assign("add", [flat, kb.assign("mul", [coord, kb.const(inner, I64)], I64)],
                         I64)
    kb.emit(kir.Load(out, table.buf, flat))
    return [out]


LOWERINGS[prims.roll_p] = _roll


def _to_i64(kb, x):
    return x if x.dtype == I64 else kb.assign("convert", [x], I64)


def _trips_fori(kb, lo, hi):
    lo, hi = _to_i64(kb, lo), _to_i64(kb, hi)
    return kb.assign("max", [kb.assign("sub", [hi, lo], I64), kb.const(0, I64)], I64)


def _lower_loop(kb, op, ins, tape):
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs(ins)
    returns_token = tape
    tape = tape and not kb.counting
    stacks = [kb.stack(info, j) for j in range(info.n_carry)] if tape else []
    for s in stacks:
        kb.emit(kir.StackInit(s, kb.const(0, I64)))
    args = [kir.KVar(d) for d in info.carry_dtypes]
    if info.kind == "fori":
        index = kir.KVar(info.index_dtype)
        with kb.block() as body:
            for s, a in zip(stacks, args):
                kb.emit(kir.Push(s, a))
            yields = lower_graph(kb, info.body, [index] + args + list(invs))
        outs = [kir.KVar(d) for d in info.carry_dtypes]
        kb.emit(kir.For(index, bounds[0], bounds[1], False, args, list(carries), body, yields,
                        outs))
        trips = _trips_fori(kb, *bounds)
    else:
        counter = kir.KVar(I64)
        with kb.block() as cond_body:
            cond = lower_graph(kb, info.cond, args + list(invs))[0]
        with kb.block() as body:
            for s, a in zip(stacks, args):
                kb.emit(kir.Push(s, a))
            yields = lower_graph(kb, info.body, args + list(invs))
            yields.append(kb.assign("add", [counter, kb.const(1, I64)], I64))
        outs = [kir.KVar(d) for d in info.carry_dtypes] + [kir.KVar(I64)]
        kb.emit(kir.While(args + [counter], list(carries) + [kb.const(0, I64)], cond_body, cond,
                          body, yields, outs))
        outs, trips = outs[:-1], outs[-1]
    kb.count(info.loop_id, trips)
    return outs + ([trips] if returns_token else [])


def _lower_loop_bwd(kb, op, ins):
    info, wrt, vjp = op.params["info"], op.params["wrt"], op.params["body_vjp"]
    token, rest = ins[0], ins[1:]
    bounds, bars, invs = info.split_inputs(rest)
    stacks = [kb.stack(info, j) for j in range(info.n_carry)]
    for s in stacks:
        kb.emit(kir.StackInit(s, token))
    nf = len(vjp.float_carries)
    inv_dtypes = [o.aval.dtype for o in vjp.graph.outputs[info.n_carry + nf:]]
    init = [bars[j] for j in vjp.float_carries] + [kb.const(0, d) for d in inv_dtypes]
    loop_args = [kir.KVar(x.dtype) for x in init]
    k = kir.KVar(I64)
    with kb.block() as body:
        popped = [None] * info.n_carry
        for j in reversed(range(info.n_carry)):
            popped[j] = kir.KVar(info.carry_dtypes[j])
            kb.emit(kir.Pop(popped[j], stacks[j]))
        prefix = []
        if info.kind == "fori":
            i = kb.assign("add", [_to_i64(kb, bounds[0]), k], I64)
            prefix = [i if info.index_dtype == I64 else kb.assign("convert", [i],
                                                                  info.index_dtype)]
        outs = lower_graph(kb, vjp.graph, prefix + popped + list(invs) + loop_args[:nf])
        grads = outs[info.n_carry:]
        yields = grads[:nf] + [kb.assign("add", [acc, g], acc.dtype)
                               for acc, g in zip(loop_args[nf:], grads[nf:])]
    finals = [kir.KVar(x.dtype) for x in init]
    kb.emit(kir.For(k, kb.const(0, I64), token, True, loop_args, init, body, yields, finals))
    carry_final = dict(zip(vjp.float_carries, finals[:nf]))
    tables = [invs[k] for k in wrt.tables]
    return [carry_final[j] for j in wrt.carries] + finals[nf:] + \
        [Accumulated(kb.accumulator(t)) for t in tables]


LOWERINGS[prims.loop_p] = lambda kb, op, ins: _lower_loop(kb, op, ins, tape=False)
LOWERINGS[prims.loop_tape_p] = lambda kb, op, ins: _lower_loop(kb, op, ins, tape=True)
LOWERINGS[prims.loop_bwd_p] = _lower_loop_bwd


def element_index(kb, shape, element_shape):
    """Flat index into a C-contiguous array of `shape` broadcast against element_shape."""
    tid = kb.kernel.tid
    shape, element_shape = tuple(shape), tuple(element_shape)
    if shape == element_shape:
        return tid
    lead = len(element_shape) - len(shape)
    flat = kb.const(0, I64)
    for axis, dim in enumerate(shape):
        if dim == 1:
            continue
        e_axis = lead + axis
        inner = int(np.prod(element_shape[e_axis + 1:], dtype=np.int64))
        coord = kb.assign("mod", [kb.assign("floordiv", [tid, kb.const(inner, I64)], I64),
                                  kb.const(element_shape[e_axis], I64)], I64)
        stride = int(np.prod(shape[axis + 1:], dtype=np.int64))
        flat = kb.assign("add", [flat, kb.assign("mul", [coord, kb.const(stride, I64)], I64)],
                         I64)
    return flat


def lower_group(name, ops, inputs, outputs, element_shape, count_loops=None):
    """A kernel for a fused group. With count_loops, a counting kernel instead: it stores no
    outputs, only the largest trip count of each listed loop per element."""
    kb = KernelBuilder(name, count_loops)
    kb.element_shape = tuple(element_shape)
    if count_loops is not None:
        # Counting needs the ops up to the last taped loop: a reverse sweep after it (a
        # collective body's VJP runs a loop's forward and reverse in one kernel) would pop
        # stacks that the count is there to size.
        last = max(k for k, op in enumerate(ops) if op.prim is prims.loop_tape_p)
        ops = ops[:last + 1]
    # An input can be read both ways: gathered as a whole array, and per element. Only
    # inputs are gathered (the scheduler ends a kernel before a gather of its own values).
    tables, env = {}, {}
    for v in inputs:
        buf = kb.buffer("in", v.aval.dtype, v.id)
        uses = [table_operand(op, pos) for op in ops for pos, x in enumerate(op.inputs)
                if x is v]
        if any(uses):
            tables[v] = TableRef(buf, v.aval.shape, v.aval.dtype)
        if not all(uses):
            out = kir.KVar(v.aval.dtype)
            kb.emit(kir.Load(out, buf, element_index(kb, v.aval.shape, element_shape)))
            env[v] = out
    for op in ops:
        ins = [tables[x] if table_operand(op, pos) else read(kb, env, x)
               for pos, x in enumerate(op.inputs)]
        env.update(safe_zip(op.outputs, kb.lower_op(op, ins)))
    if count_loops is None:
        for v in outputs:
            if isinstance(env[v], Accumulated):
                kb.kernel.accum_outputs[v.id] = env[v].buf
            else:
                kb.emit(kir.Store(kb.buffer("out", v.aval.dtype, v.id), kb.kernel.tid, env[v]))
    return kb.kernel


def table_operand(op, pos):
    """Whether op reads operand `pos` as a whole array (gathered), not per element."""
    if op.prim is prims.gather_p or op.prim is prims.roll_p:
        return pos == 0
    if op.prim.kind == "loop":
        info = op.params["info"]
        first_inv = len(op.inputs) - len(info.invariant_modes)
        return pos >= first_inv and info.invariant_modes[pos - first_inv] == "table"
    return False

