"""STAGE 5 — cpu: kernel IR -> LLVM IR (llvmlite.ir). One function runs threads [start, end):
    void dloop_kernel(i64 start, i64 end, i64 n_threads, ptr noalias buf0, ptr noalias buf1, ...)
Adstack push/pop and the fault flag call the helpers of _native/cpu/adstack.ll.

A kernel with wrapped loads (rolls, kir.Load.wrap) runs its threads in pieces split where a
roll wraps: on each piece every such load reads thread + a constant, which LLVM vectorizes
as contiguous loads. (In one loop LLVM versions `(t + c) mod n` for a range that does not
wrap only, and a whole array's range always wraps: the loop ran scalar.)"""

import numpy as np
from llvmlite import ir

from ...kernel import kir
from .chunks import add_chunk_loop
from .ops import emit
from .types import F64, I8, I64, PTR, SUFFIX, VOID, llvm_type, storage_type

# More pieces than this: the loads are legalized to selects instead (wrap_pieces).
MAX_PIECES = 5


def wrap_pieces(kernel):
    """The thread ranges [lo, hi) on which each wrapped load of a loop-free `kernel` reads
    thread + a constant, or None where the kernel does not qualify."""
    if kernel.buffer_index("order") is not None:
        return None
    wraps = set()
    for s in kernel.body:
        if isinstance(s, (kir.For, kir.While)):
            return None
        if isinstance(s, kir.Load) and s.wrap is not None:
            wraps.add(s.wrap)
    if not wraps or len({size for _, size in wraps}) != 1:
        return None
    size = next(iter(wraps))[1]
    cuts = sorted({0, size} | {shift for shift, _ in wraps})
    pieces = list(zip(cuts, cuts[1:]))
    return pieces if len(pieces) <= MAX_PIECES else None


# Elementwise float functions: LLVM intrinsics where LLVM has them, else the C library.
_INTRINSICS = {"sin", "cos", "exp", "log", "log2", "log10", "sqrt", "floor", "ceil", "fabs",
               "pow", "roundeven", "trunc", "copysign"}


class Renderer:
    def __init__(self, kernel):
        self.kernel = kernel
        self.module = ir.Module(name="dloop")
        n_buf = len(kernel.buffers)
        fnty = ir.FunctionType(VOID, [I64, I64, I64] + [PTR] * n_buf)
        self.fn = ir.Function(self.module, fnty, "dloop_kernel")
        for arg in self.fn.args[3:]:
            arg.add_attribute("noalias")
        self.bufs = self.fn.args[3:]
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.env = {}
        self._functions = {}
        self.piece = None         # the thread range being rendered, where loads wrap

    # -- module-level helpers --
    @staticmethod
    def type_of(dtype):
        return llvm_type(dtype)

    def function(self, name, ret, args):
        if name not in self._functions:
            self._functions[name] = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return self._functions[name]

    def math(self, name, *args):
        ty = args[0].type
        if name in _INTRINSICS:
            fname = f"llvm.{name}.{'f64' if ty == F64 else 'f32'}"
        else:
            fname = name if ty == F64 else name + "f"
        return self.b.call(self.function(fname, ty, [ty] * len(args)), list(args))

    # -- the kernel --
    def render(self):
        b, k = self.b, self.kernel
        start, end, n_threads = self.fn.args[:3]
        self.stack_state = [(b.alloca(I64), b.alloca(I64), b.alloca(I64)) for _ in k.stacks]
        self.counter_slots = [b.alloca(I64) for _ in k.counters]
        self.n_threads = n_threads
        pieces = wrap_pieces(k)
        if pieces is None:
            self._thread_loop(start, end)
        for self.piece in pieces or ():
            lo, hi = (I64(x) for x in self.piece)
            self._thread_loop(b.select(b.icmp_signed(">", start, lo), start, lo),
                              b.select(b.icmp_signed("<", end, hi), end, hi))
        b.ret_void()
        add_chunk_loop(self.module, self.fn)
        return str(self.module)

    def _thread_loop(self, start, end):
        b, k = self.b, self.kernel
        pre = b.block
        header = self.fn.append_basic_block("thread")
        body = self.fn.append_basic_block("thread.body")
        done = self.fn.append_basic_block("done")
        b.branch(header)
        b.position_at_end(header)
        tid = b.phi(I64)
        tid.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", tid, end), body, done)
        b.position_at_end(body)
        order = k.buffer_index("order")
        element = tid if order is None else self.load(order, tid, np.dtype(np.int64))
        self.env[k.tid] = element
        if k.slot is not None:
            self.env[k.slot] = tid
        self._thread_start(tid if k.stacks_by_slot else element)
        self.block(k.body)
        self._thread_end(element)
        tid.add_incoming(b.add(tid, I64(1)), b.block)
        b.branch(header)
        b.position_at_end(done)

    def _thread_start(self, tid):
        b = self.b
        for spec, (sp, base, cap) in zip(self.kernel.stacks, self.stack_state):
            c = self.load(spec.cap, tid, np.dtype(np.int64))
            s = self.load(spec.start, tid, np.dtype(np.int64))
            b.store(c, cap)
            b.store(b.add(b.mul(s, I64(spec.group_size)), b.mul(c, I64(spec.index))), base)
            b.store(I64(0), sp)
        for slot in self.counter_slots:
            b.store(I64(0), slot)

    def _thread_end(self, tid):
        if not self.counter_slots:
            return
        counts = self.bufs[self.kernel.buffer_index("counts")]
        for c, slot in enumerate(self.counter_slots):
            at = self.b.add(self.b.mul(I64(c), self.n_threads), tid)
            self.b.store(self.b.load(slot), self.b.gep(counts, [at], source_etype=I64))

    # -- values and memory --
    def val(self, x):
        if isinstance(x, kir.Const):
            return ir.Constant(llvm_type(x.dtype), x.value if not x.dtype == bool else
                               int(x.value))
        return self.env[x]

    def load(self, buf, index, dtype):
        p = self.b.gep(self.bufs[buf], [index], source_etype=storage_type(dtype))
        v = self.b.load(p, typ=storage_type(dtype))
        return self.b.icmp_unsigned("!=", v, I8(0)) if np.dtype(dtype) == bool else v

    def to_storage(self, v, dtype):
        return self.b.zext(v, I8) if np.dtype(dtype) == bool else v

    def block(self, stmts):
        for s in stmts:
            getattr(self, "do_" + type(s).__name__)(s)

    # -- statements --
    def do_Assign(self, s):
        self.env[s.out] = emit(self, s.op, [self.val(a) for a in s.args],
                               [a.dtype for a in s.args], s.out.dtype)

    def do_Load(self, s):
        index = self.val(s.index)
        if s.wrap is not None:
            shift, size = s.wrap
            index = self.b.add(index, I64(size - shift if self.piece[1] <= shift else -shift))
        self.env[s.out] = self.load(s.buf, index, s.out.dtype)

    def do_Store(self, s):
        dtype = self.kernel.buffers[s.buf].dtype
        p = self.b.gep(self.bufs[s.buf], [self.val(s.index)], source_etype=storage_type(dtype))
        self.b.store(self.to_storage(self.val(s.value), dtype), p)

    def do_AtomicAdd(self, s):
        dtype = self.kernel.buffers[s.buf].dtype
        p = self.b.gep(self.bufs[s.buf], [self.val(s.index)], source_etype=storage_type(dtype))
        op = "fadd" if np.issubdtype(dtype, np.floating) else "add"
        self.b.atomic_rmw(op, p, self.val(s.value), "monotonic")

    def _loop_phis(self, carries, inits, pre):
        phis = []
        for c, init in zip(carries, inits):
            phi = self.b.phi(llvm_type(c.dtype))
            phi.add_incoming(self.val(init), pre)
            self.env[c] = phi
            phis.append(phi)
        return phis

    def do_For(self, s):
        b = self.b
        lo, hi = self.val(s.lo), self.val(s.hi)
        ty = llvm_type(s.index.dtype)
        first = b.sub(hi, ty(1)) if s.reverse else lo
        pre = b.block
        header, body, done = (self.fn.append_basic_block(n) for n in ("for", "for.body",
                                                                        "for.end"))
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(ty)
        k.add_incoming(first, pre)
        phis = self._loop_phis(s.carries, s.inits, pre)
        more = b.icmp_signed(">=", k, lo) if s.reverse else b.icmp_signed("<", k, hi)
        b.cbranch(more, body, done)
        b.position_at_end(body)
        self.env[s.index] = k
        self.block(s.body)
        k.add_incoming(b.sub(k, ty(1)) if s.reverse else b.add(k, ty(1)), b.block)
        self._close_loop(s, phis, header, done)

    def do_While(self, s):
        b = self.b
        pre = b.block
        header, body, done = (self.fn.append_basic_block(n) for n in ("while", "while.body",
                                                                        "while.end"))
        b.branch(header)
        b.position_at_end(header)
        phis = self._loop_phis(s.carries, s.inits, pre)
        self.block(s.cond_body)
        b.cbranch(self.val(s.cond), body, done)
        b.position_at_end(body)
        self.block(s.body)
        self._close_loop(s, phis, header, done)

    def _close_loop(self, s, phis, header, done):
        """The back edge of a loop whose body was just emitted, and its results."""
        b = self.b
        for phi, y in zip(phis, s.yields):
            phi.add_incoming(self.val(y), b.block)
        b.branch(header)
        b.position_at_end(done)
        for out, phi in zip(s.outs, phis):
            self.env[out] = phi

    def do_If(self, s):
        then, merge = self.fn.append_basic_block("if"), self.fn.append_basic_block("if.end")
        self.b.cbranch(self.val(s.cond), then, merge)
        self.b.position_at_end(then)
        self.block(s.body)
        self.b.branch(merge)
        self.b.position_at_end(merge)

    def do_StackInit(self, s):
        self.b.store(self.val(s.depth), self.stack_state[s.stack][0])

    def _stack_args(self, k):
        spec = self.kernel.stacks[k]
        sp, base, cap = self.stack_state[k]
        return spec, [self.bufs[spec.region], self.b.load(base), self.b.load(cap), sp]

    def _faults(self):
        return self.bufs[self.kernel.buffer_index("faults")]

    def do_Push(self, s):
        spec, args = self._stack_args(s.stack)
        ty = storage_type(spec.dtype)
        fn = self.function(f"dloop_push_{SUFFIX[spec.dtype.name]}", VOID,
                           [PTR, I64, I64, PTR, ty, PTR, I64])
        value = self.to_storage(self.val(s.value), spec.dtype)
        self.b.call(fn, args + [value, self._faults(), I64(spec.fault_slot)])

    def do_Pop(self, s):
        spec, args = self._stack_args(s.stack)
        ty = storage_type(spec.dtype)
        fn = self.function(f"dloop_pop_{SUFFIX[spec.dtype.name]}", ty, [PTR, I64, I64, PTR])
        v = self.b.call(fn, args)
        self.env[s.out] = self.b.icmp_unsigned("!=", v, I8(0)) if spec.dtype == bool else v

    def do_Fault(self, s):
        fn = self.function("dloop_fault", VOID, [PTR, I64, I64])
        self.b.call(fn, [self._faults(), I64(s.slot), self.val(s.value)])

    def do_CountMax(self, s):
        slot = self.counter_slots[s.counter]
        old, new = self.b.load(slot), self.val(s.value)
        self.b.store(self.b.select(self.b.icmp_signed(">", new, old), new, old), slot)


def render(kernel):
    """LLVM IR text of a legalized kernel (core ops and native transcendentals only)."""
    return Renderer(kernel).render()
