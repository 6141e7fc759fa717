"""STAGE 5 — cpu: kernel IR -> LLVM vector IR, one element per lane (the SIMD renderer).

One call runs threads [start, end) in groups of W (the host's vector width for 64-bit lanes):
every kernel value is a <W x T> vector, and a mask says which lanes run the statement at hand.
A loop runs while any lane is live; a finished lane keeps its carries and pushes nothing.
Loads and stores at the element's own index are masked vector loads and stores, other indices
gathers and scatters; each lane's adstack lives in its own slice of the compact layout, so
push and pop scatter and gather at per-lane offsets. Faults reduce the lanes that fault into
one flag update. Ops are emitted by ops.py, shared with the scalar renderer; transcendentals
call glibc's vector math (libmvec) where it has the function, else the C library lane by
lane. Same signature as the scalar renderer (render.py):
    void dloop_kernel(i64 start, i64 end, i64 n_threads, ptr noalias buf0, ...)"""

import numpy as np
from llvmlite import ir

from ...kernel import kir
from . import ops
from .chunks import add_chunk_loop
from .types import I1, I8, I32, I64, PTR, VOID, llvm_type, storage_type

# Functions LLVM lowers to vector instructions itself.
_INTRINSICS = {"sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "abs": "fabs",
               "fabs": "fabs", "round": "roundeven", "roundeven": "roundeven",
               "trunc": "trunc", "copysign": "copysign"}


def vec(scalar, width):
    return ir.VectorType(scalar, width)


def splat(ty, value):
    return ir.Constant(ty, [value] * ty.count)


class SimdRenderer:
    def __init__(self, kernel, width, mvec):
        self.kernel, self.W, self.mvec = kernel, width, mvec
        self.module = ir.Module("dloop")
        n_buf = len(kernel.buffers)
        fnty = ir.FunctionType(VOID, [I64, I64, I64] + [PTR] * n_buf)
        self.fn = ir.Function(self.module, fnty, "dloop_kernel")
        for arg in self.fn.args[3:]:
            arg.add_attribute("noalias")
        self.bufs = self.fn.args[3:]
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.env = {}
        self._functions = {}
        self.mask = None

    # -- types and helpers --
    def vt(self, dtype):
        return vec(llvm_type(dtype), self.W)

    type_of = vt

    def math(self, name, *args):
        """A float function on every lane: an LLVM intrinsic where LLVM vectorizes it, glibc's
        libmvec (within 4 ulp, glibc's manual "Known Maximum Errors in Math Functions") where
        the host has the function at this width, else the scalar C function lane by lane."""
        ty = args[0].type
        if name in _INTRINSICS:
            fn = self.function(f"llvm.{_INTRINSICS[name]}.{suffix(ty)}", ty, [ty] * len(args))
            return self.b.call(fn, list(args))
        dtype = np.float64 if str(ty.element) == "double" else np.float32
        symbol = mvec_name(name, dtype, ty.count, len(args))
        if symbol in self.mvec:
            return self.b.call(self.function(symbol, ty, [ty] * len(args)), list(args))
        scalar = ty.element
        fn = self.function(name if dtype == np.float64 else name + "f", scalar,
                           [scalar] * len(args))
        out = ir.Constant(ty, None)
        for lane in range(ty.count):
            lanes = [self.b.extract_element(a, I32(lane)) for a in args]
            out = self.b.insert_element(out, self.b.call(fn, lanes), I32(lane))
        return out

    def function(self, name, ret, args):
        if name not in self._functions:
            self._functions[name] = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return self._functions[name]

    def any(self, mask):
        fn = self.function(f"llvm.vector.reduce.or.v{self.W}i1", I1, [mask.type])
        return self.b.call(fn, [mask])

    def reduce_max(self, v):
        fn = self.function(f"llvm.vector.reduce.smax.v{self.W}i64", I64, [v.type])
        return self.b.call(fn, [v])

    def when(self, cond, emit_body):
        """if cond (an i1): emit_body()."""
        then = self.fn.append_basic_block("when")
        merge = self.fn.append_basic_block("when.end")
        self.b.cbranch(cond, then, merge)
        self.b.position_at_end(then)
        emit_body()
        self.b.branch(merge)
        self.b.position_at_end(merge)

    def val(self, x):
        if isinstance(x, kir.Const):
            value = int(x.value) if x.dtype == bool else x.value
            return splat(self.vt(x.dtype), value)
        return self.env[x]

    # -- memory --
    def _pointers(self, buf, index, elem):
        """<W x ptr> to buf[index] per lane (llvmlite types a vector GEP as one pointer)."""
        ptrs = self.b.gep(self.bufs[buf], [index], source_etype=elem)
        ptrs.type = vec(PTR, self.W)
        return ptrs

    def _contiguous(self, index):
        """Whether lanes read consecutive elements: the thread's own, when slots are
        elements (no 'order' buffer), or its slot's."""
        k = self.kernel
        return (index is k.tid and not self.ordered) or (k.slot is not None and index is k.slot)

    def load_vec(self, buf, index_var, dtype, mask):
        elem = storage_type(dtype)
        vt = vec(elem, self.W)
        zero = ir.Constant(vt, None)
        align = I32(np.dtype(dtype).itemsize)

        def at(first):
            ptr = self.b.gep(self.bufs[buf], [first], source_etype=elem)
            fn = self.function(f"llvm.masked.load.{suffix(vt)}.p0", vt, [PTR, I32, mask.type, vt])
            return self.b.call(fn, [ptr, align, mask, zero])

        if isinstance(index_var, kir.Const):
            # Every lane reads one element (a 0-d input): one load, not a gather.
            one = self.b.load(self.b.gep(self.bufs[buf], [I64(index_var.value)],
                                         source_etype=elem), typ=elem)
            v = self._splat(one)
        elif self._contiguous(index_var):
            v = at(self.group)
        else:
            v = self._by_order(index_var, at, lambda: self.gather(
                self._pointers(buf, self.val(index_var), elem), vt, align, mask))
        return self.b.icmp_unsigned("!=", v, zero) if np.dtype(dtype) == bool else v

    def store_vec(self, buf, index_var, value, dtype, mask):
        if np.dtype(dtype) == bool:
            value = self.b.zext(value, vec(I8, self.W))
        align = I32(np.dtype(dtype).itemsize)
        elem = storage_type(dtype)

        def at(first):
            ptr = self.b.gep(self.bufs[buf], [first], source_etype=elem)
            fn = self.function(f"llvm.masked.store.{suffix(value.type)}.p0", VOID,
                               [value.type, PTR, I32, mask.type])
            self.b.call(fn, [value, ptr, align, mask])

        if self._contiguous(index_var):
            at(self.group)
        else:
            self._by_order(index_var, at, lambda: self.scatter(
                self._pointers(buf, self.val(index_var), elem), value, align, mask))

    def _by_order(self, index_var, at, by_lane):
        """at(first element) where index_var is the thread's element and the group's
        elements are consecutive (an order that sorting did not change), else by_lane(); a
        phi of their values where they give one. A gather or scatter costs about one load
        or store per lane."""
        if index_var is not self.kernel.tid or not self.ordered:
            return by_lane()
        run, lane = (self.fn.append_basic_block(n) for n in ("in.order", "by.element"))
        self.b.cbranch(self.in_order, run, lane)
        return self._joined(run, lane, lambda: at(self.first_element), by_lane, "in.order.end")

    def _joined(self, run, lane, fast, slow, end_name):
        """fast() emitted in block `run` and slow() in block `lane`, both going on to one
        block: a phi of their values where they give one."""
        b = self.b
        end = self.fn.append_basic_block(end_name)
        b.position_at_end(run)
        fast_value, from_run = fast(), b.block
        b.branch(end)
        b.position_at_end(lane)
        slow_value, from_lane = slow(), b.block
        b.branch(end)
        b.position_at_end(end)
        if fast_value is None:
            return None
        v = b.phi(fast_value.type)
        v.add_incoming(fast_value, from_run)
        v.add_incoming(slow_value, from_lane)
        return v

    def scatter(self, ptrs, value, align, mask):
        fn = self.function(f"llvm.masked.scatter.{suffix(value.type)}.v{self.W}p0", VOID,
                           [value.type, ptrs.type, I32, mask.type])
        self.b.call(fn, [value, ptrs, align, mask])

    def gather(self, ptrs, vt, align, mask):
        fn = self.function(f"llvm.masked.gather.{suffix(vt)}.v{self.W}p0", vt,
                           [ptrs.type, I32, mask.type, vt])
        return self.b.call(fn, [ptrs, align, mask, ir.Constant(vt, None)])

    # -- the kernel --
    def render(self):
        b, k, W = self.b, self.kernel, self.W
        start, end, n_threads = self.fn.args[:3]
        v64 = vec(I64, W)
        # Per stack: depth, base, capacity, the distance between slots (kir.py), and
        # whether the group's slices are all interleaved.
        self.stack_state = [tuple(b.alloca(v64) for _ in range(4)) + (b.alloca(I1),)
                            for _ in k.stacks]
        self.counter_slots = [b.alloca(v64) for _ in k.counters]
        self.n_threads = n_threads
        pre = b.block
        header = self.fn.append_basic_block("group")
        body = self.fn.append_basic_block("group.body")
        done = self.fn.append_basic_block("done")
        b.branch(header)
        b.position_at_end(header)
        group = b.phi(I64)
        group.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", group, end), body, done)
        b.position_at_end(body)
        tid = b.add(self._splat(group), ir.Constant(v64, list(range(W))))
        self.mask = b.icmp_signed("<", tid, self._splat(end))
        self.group = group                   # the group's first thread, for vector loads
        order = k.buffer_index("order")
        self.ordered = order is not None
        if k.slot is not None:
            self.env[k.slot] = tid
        if self.ordered:                     # slot t runs element order[t]
            elem = storage_type(np.int64)
            fn = self.function(f"llvm.masked.load.{suffix(v64)}.p0", v64,
                               [PTR, I32, self.mask.type, v64])
            ptr = b.gep(self.bufs[order], [group], source_etype=elem)
            tid = b.call(fn, [ptr, I32(8), self.mask, ir.Constant(v64, None)])
            # Lane 0 always runs (group < end).
            self.first_element = b.extract_element(tid, I32(0))
            consecutive = b.icmp_signed("==", tid, b.add(self._splat(self.first_element),
                                                         ir.Constant(v64, list(range(W)))))
            agree = b.bitcast(b.or_(consecutive, b.not_(self.mask)), ir.IntType(W))
            self.in_order = b.icmp_unsigned("==", agree, ir.Constant(agree.type, (1 << W) - 1))
        self.env[k.tid] = tid
        self._thread_start()
        self.block(k.body)
        self._thread_end(tid)
        group.add_incoming(b.add(group, I64(W)), b.block)
        b.branch(header)
        b.position_at_end(done)
        b.ret_void()
        add_chunk_loop(self.module, self.fn)
        return str(self.module)

    def _thread_start(self):
        b, v64, lanes = self.b, vec(I64, self.W), self.kernel.tape_lanes
        for spec, (sp, base, cap, stride, grouped) in zip(self.kernel.stacks,
                                                          self.stack_state):
            at = self.kernel.slot if self.kernel.stacks_by_slot else self.kernel.tid
            c = self.load_vec(spec.cap, at, np.int64, self.mask)
            s = self.load_vec(spec.start, at, np.int64, self.mask)
            b.store(c, cap)
            b.store(splat(v64, 0), sp)
            if lanes > 1:
                # kir.py: a negative start is a compact slice at ~start, slots 1 apart.
                compact = b.icmp_signed("<", s, splat(v64, 0))
                s = b.select(compact, b.not_(s), s)
            alone = b.add(b.mul(s, splat(v64, spec.group_size)),
                          b.mul(c, splat(v64, spec.index)))
            if lanes == 1:
                b.store(alone, base)
                continue
            # kir.py: base = group_size * (start - lane) + lane + index * cap * L, slots L apart.
            lane = b.srem(s, splat(v64, lanes))
            first = b.add(b.mul(b.sub(s, lane), splat(v64, spec.group_size)), lane)
            interleaved = b.add(first, b.mul(c, splat(v64, spec.index * lanes)))
            b.store(b.select(compact, alone, interleaved), base)
            b.store(b.select(compact, splat(v64, 1), splat(v64, lanes)), stride)
            b.store(b.not_(self.any(b.and_(compact, self.mask))), grouped)
        for slot in self.counter_slots:
            self.b.store(splat(v64, 0), slot)

    def _thread_end(self, tid):
        if not self.counter_slots:
            return
        counts = self.kernel.buffer_index("counts")
        v64 = vec(I64, self.W)
        for c, slot in enumerate(self.counter_slots):
            at = self.b.add(self.b.mul(splat(v64, c), self._splat(self.n_threads)), tid)
            ptrs = self._pointers(counts, at, I64)
            self.scatter(ptrs, self.b.load(slot), I32(8), self.mask)

    def _splat(self, scalar):
        vt = vec(scalar.type, self.W)
        first = self.b.insert_element(ir.Constant(vt, None), scalar, I32(0))
        return self.b.shuffle_vector(first, ir.Constant(vt, None), splat(vec(I32, self.W), 0))

    def block(self, stmts):
        for s in stmts:
            getattr(self, "do_" + type(s).__name__)(s)

    # -- statements --
    def do_Assign(self, s):
        args = [self.val(a) for a in s.args]
        self.env[s.out] = ops.emit(self, s.op, args, [a.dtype for a in s.args], s.out.dtype)

    def do_Load(self, s):
        self.env[s.out] = self.load_vec(s.buf, s.index, s.out.dtype, self.mask)

    def do_Store(self, s):
        dtype = self.kernel.buffers[s.buf].dtype
        self.store_vec(s.buf, s.index, self.val(s.value), dtype, self.mask)

    def do_AtomicAdd(self, s):
        """Lane by lane: lanes may add to the same element."""
        dtype = self.kernel.buffers[s.buf].dtype
        index, value, mask = self.val(s.index), self.val(s.value), self.mask
        op = "fadd" if np.issubdtype(dtype, np.floating) else "add"
        for lane in range(self.W):
            def add(lane=lane):
                p = self.b.gep(self.bufs[s.buf], [self.b.extract_element(index, I32(lane))],
                               source_etype=storage_type(dtype))
                self.b.atomic_rmw(op, p, self.b.extract_element(value, I32(lane)), "monotonic")
            self.when(self.b.extract_element(mask, I32(lane)), add)

    def _merge(self, active, yields, carries):
        return [self.b.select(active, self.val(y), c) for y, c in zip(yields, carries)]

    def _phis(self, carries, inits, pre):
        phis = []
        for c, init in zip(carries, inits):
            phi = self.b.phi(self.vt(c.dtype))
            phi.add_incoming(self.val(init), pre)
            self.env[c] = phi
            phis.append(phi)
        return phis

    def do_For(self, s):
        if s.reverse:
            return self._reversed_for(s)
        b, outer = self.b, self.mask
        lo, hi = self.val(s.lo), self.val(s.hi)
        pre = b.block
        header, body, done = (self.fn.append_basic_block(n) for n in ("for", "for.body",
                                                                        "for.end"))
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(lo.type)
        k.add_incoming(lo, pre)
        phis = self._phis(s.carries, s.inits, pre)
        active = b.and_(outer, b.icmp_signed("<", k, hi))
        b.cbranch(self.any(active), body, done)
        b.position_at_end(body)
        self._loop_body(s, k, active, phis)
        k.add_incoming(b.add(k, splat(lo.type, 1)), b.block)
        b.branch(header)
        self._loop_end(s, done, outer, phis)

    def _reversed_for(self, s):
        """A reversed loop (a reverse sweep's) aligned at its top: step t of the group's
        longest span runs every lane at k = lo + t whose span exceeds t, so the lanes that
        pushed slot t together in the forward sweep pop it together, one vector load from
        interleaved tapes where lanes ending together would read different depths."""
        b, outer = self.b, self.mask
        lo, hi = self.val(s.lo), self.val(s.hi)
        span = b.select(outer, b.sub(hi, lo), ir.Constant(lo.type, None))
        bits = lo.type.element.width
        widest = self.function(f"llvm.vector.reduce.smax.v{self.W}i{bits}",
                               lo.type.element, [lo.type])
        pre = b.block
        first = b.sub(b.call(widest, [span]), ir.Constant(lo.type.element, 1))
        header, body, done = (self.fn.append_basic_block(n) for n in ("for", "for.body",
                                                                        "for.end"))
        b.branch(header)
        b.position_at_end(header)
        t = b.phi(lo.type.element)
        t.add_incoming(first, pre)
        phis = self._phis(s.carries, s.inits, pre)
        b.cbranch(b.icmp_signed(">=", t, ir.Constant(t.type, 0)), body, done)
        b.position_at_end(body)
        step = self._splat(t)
        active = b.and_(outer, b.icmp_signed("<", step, span))
        self._loop_body(s, b.add(lo, step), active, phis)
        t.add_incoming(b.sub(t, ir.Constant(t.type, 1)), b.block)
        b.branch(header)
        self._loop_end(s, done, outer, phis)

    def _loop_body(self, s, k, active, phis):
        self.env[s.index] = k
        self.mask = active
        self.block(s.body)
        merged = self._merge(active, s.yields, phis)
        for phi, m in zip(phis, merged):
            phi.add_incoming(m, self.b.block)

    def _loop_end(self, s, done, outer, phis):
        self.b.position_at_end(done)
        self.mask = outer
        for out, phi in zip(s.outs, phis):
            self.env[out] = phi

    def do_While(self, s):
        b, outer = self.b, self.mask
        pre = b.block
        header, body, done = (self.fn.append_basic_block(n) for n in ("while", "while.body",
                                                                        "while.end"))
        b.branch(header)
        b.position_at_end(header)
        phis = self._phis(s.carries, s.inits, pre)
        live = b.phi(outer.type)
        live.add_incoming(outer, pre)
        self.mask = live
        self.block(s.cond_body)
        active = b.and_(live, self.val(s.cond))
        b.cbranch(self.any(active), body, done)
        b.position_at_end(body)
        self.mask = active
        self.block(s.body)
        merged = self._merge(active, s.yields, phis)
        for phi, m in zip(phis, merged):
            phi.add_incoming(m, b.block)
        live.add_incoming(active, b.block)
        b.branch(header)
        b.position_at_end(done)
        self.mask = outer
        for out, phi in zip(s.outs, phis):
            self.env[out] = phi

    def do_If(self, s):
        outer = self.mask
        inner = self.b.and_(outer, self.val(s.cond))

        def body():
            self.mask = inner
            self.block(s.body)
        self.when(self.any(inner), body)
        self.mask = outer

    def do_StackInit(self, s):
        sp = self.stack_state[s.stack][0]
        self.b.store(self.b.select(self.mask, self.val(s.depth), self.b.load(sp)), sp)

    def _slots(self, k, depth):
        """The stack's spec and each lane's slot index at `depth` in its region."""
        spec = self.kernel.stacks[k]
        base = self.b.load(self.stack_state[k][1])
        if self.kernel.tape_lanes == 1:
            return spec, self.b.add(base, depth)
        return spec, self.b.add(base, self.b.mul(depth, self.b.load(self.stack_state[k][3])))

    def _run_start(self, index, mask):
        """(i1, i64): whether the lanes in `mask` reach consecutive slots, lane l at
        first + l, and `first`. With interleaved tapes (kernel.tape_lanes = W) the lanes of an
        aligned group at equal depths do, the usual case in a loop: their push is then one
        vector store and their pop one vector load instead of a scatter or gather."""
        b, W = self.b, self.W
        relative = b.sub(index, ir.Constant(index.type, list(range(W))))
        bits = b.bitcast(mask, ir.IntType(W))
        cttz = self.function(f"llvm.cttz.i{W}", bits.type, [bits.type, I1])
        # No lane set: cttz gives W, masked to lane 0; the empty mask then stores nothing.
        lane = b.and_(b.call(cttz, [bits, I1(0)]), ir.Constant(bits.type, W - 1))
        first = b.extract_element(relative, lane)
        agree = b.or_(b.icmp_signed("==", relative, self._splat(first)), b.not_(mask))
        every = b.icmp_unsigned("==", b.bitcast(agree, bits.type),
                                ir.Constant(bits.type, (1 << W) - 1))
        return every, first

    def _by_runs(self, k, index, mask, on_run, by_lane):
        """on_run(first) where the lanes in `mask` reach consecutive slots of stack k (its
        group's slices interleaved, at one depth), else by_lane(); a phi of their values
        where they give one. The group's flag is tested first, so compact slices skip the
        test of the lanes' slots."""
        if self.kernel.tape_lanes != self.W:
            return by_lane()
        b = self.b
        check, run, lane = (self.fn.append_basic_block(name) for name in
                            ("run.check", "run", "by.lane"))
        b.cbranch(b.load(self.stack_state[k][4]), check, lane)
        b.position_at_end(check)
        every, first = self._run_start(index, mask)
        b.cbranch(every, run, lane)
        return self._joined(run, lane, lambda: on_run(first), by_lane, "run.end")

    def _stack_store(self, k, spec, index, value, mask):
        elem = storage_type(spec.dtype)
        align = I32(spec.dtype.itemsize)

        def on_run(first):
            fn = self.function(f"llvm.masked.store.{suffix(value.type)}.p0", VOID,
                               [value.type, PTR, I32, mask.type])
            ptr = self.b.gep(self.bufs[spec.region], [first], source_etype=elem)
            self.b.call(fn, [value, ptr, align, mask])
        self._by_runs(k, index, mask, on_run, lambda: self.scatter(
            self._pointers(spec.region, index, elem), value, align, mask))

    def _stack_load(self, k, spec, index, mask):
        elem = storage_type(spec.dtype)
        vt, align = vec(elem, self.W), I32(spec.dtype.itemsize)

        def on_run(first):
            fn = self.function(f"llvm.masked.load.{suffix(vt)}.p0", vt,
                               [PTR, I32, mask.type, vt])
            ptr = self.b.gep(self.bufs[spec.region], [first], source_etype=elem)
            return self.b.call(fn, [ptr, align, mask, ir.Constant(vt, None)])
        return self._by_runs(k, index, mask, on_run, lambda: self.gather(
            self._pointers(spec.region, index, elem), vt, align, mask))

    def do_Push(self, s):
        b, mask = self.b, self.mask
        sp_slot, _, cap_slot = self.stack_state[s.stack][:3]
        sp, cap = b.load(sp_slot), b.load(cap_slot)
        fits = b.and_(mask, b.icmp_signed("<", sp, cap))
        spec, index = self._slots(s.stack, sp)
        value = self.val(s.value)
        if spec.dtype == bool:
            value = b.zext(value, vec(I8, self.W))
        self._stack_store(s.stack, spec, index, value, fits)
        over = b.and_(mask, b.not_(fits))
        attempted = b.add(sp, splat(sp.type, 1))
        self.when(self.any(over), lambda: self._fault(spec.fault_slot, attempted, over))
        b.store(b.add(sp, b.zext(mask, sp.type)), sp_slot)

    def do_Pop(self, s):
        b, mask = self.b, self.mask
        sp_slot, _, cap_slot = self.stack_state[s.stack][:3]
        sp = b.load(sp_slot)
        lowered = b.sub(sp, splat(sp.type, 1))
        lowered = b.select(b.icmp_signed("<", lowered, splat(sp.type, 0)), splat(sp.type, 0),
                           lowered)
        sp = b.select(mask, lowered, sp)
        b.store(sp, sp_slot)
        valid = b.and_(mask, b.icmp_signed("<", sp, b.load(cap_slot)))
        spec, index = self._slots(s.stack, sp)
        v = self._stack_load(s.stack, spec, index, valid)
        self.env[s.out] = b.icmp_unsigned("!=", v, ir.Constant(v.type, None)) \
            if spec.dtype == bool else v

    def _fault(self, slot, values, mask):
        b = self.b
        faults = self.bufs[self.kernel.buffer_index("faults")]
        worst = self.reduce_max(b.select(mask, values, splat(values.type, 0)))
        b.atomic_rmw("or", faults, I64(1), "monotonic")
        b.atomic_rmw("max", b.gep(faults, [I64(1 + slot)], source_etype=I64), worst,
                     "monotonic")

    def do_Fault(self, s):
        mask = self.mask
        value = self.val(s.value)
        self.when(self.any(mask), lambda: self._fault(s.slot, value, mask))

    def do_CountMax(self, s):
        b = self.b
        slot = self.counter_slots[s.counter]
        old, new = b.load(slot), self.val(s.value)
        bigger = b.and_(self.mask, b.icmp_signed(">", new, old))
        b.store(b.select(bigger, new, old), slot)


def suffix(ty):
    """LLVM's name of a vector type in intrinsic names: v8f64, v8i64, ..."""
    elem = str(ty.element)
    name = {"double": "f64", "float": "f32"}[elem] if elem in ("double", "float") else elem
    return f"v{ty.count}{name}"


def mvec_name(name, dtype, width, arity):
    """libmvec's symbol for `name` over `width` lanes of dtype (the x86-64 vector ABI)."""
    bits = width * np.dtype(dtype).itemsize * 8
    isa = {128: "b", 256: "d", 512: "e"}.get(bits)
    if isa is None:
        return None
    return f"_ZGV{isa}N{width}{'v' * arity}_{name}{'f' if dtype == np.float32 else ''}"


def render(kernel, width, mvec):
    return SimdRenderer(kernel, width, mvec).render()
