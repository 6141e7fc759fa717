"""STAGE 5 — vulkan: legalized kernel IR -> a SPIR-V compute shader (a list of 32-bit words).

One invocation per element: tid = GlobalInvocationId.x + GlobalInvocationId.y * the
workgroup size (Features.workgroup) * NumWorkgroups.x (launches past 65,535 workgroups use a
second dimension); invocations with tid >= n (a push constant) do nothing. Kernel buffer k
is storage buffer binding k of set 0.
Loops are structured (OpLoopMerge, a dedicated continue block, carries in OpPhi), If and the
adstack's bounds checks are selections; OpLine points each instruction at the user's line.
Storage types differ from value types where the device needs it: bool is a 32-bit integer,
int64 is 32-bit on devices without shaderInt64, and a float array that takes atomic adds
without native float atomics is stored as same-width integers (compare-exchange loop)."""

import struct

import numpy as np

from ...errors import DloopNotImplementedError
from ...kernel import kir
from ...kernel.core import runs_once
from ...source import user_location
from . import ops
from . import spirv as S
from .assembler import Function, Module

_READ_ONLY = ("in", "start", "cap", "order")


class Renderer:
    def __init__(self, kernel, features, rough=False):
        self.k, self.f, self.rough = kernel, features, rough
        m = self.m = Module((1, 3))
        m.capability(S.Capability["Shader"])
        self.glsl = m.ext_import("GLSL.std.450")
        m.add("memory_model", "MemoryModel", S.AddressingModel["Logical"],
              S.MemoryModel["GLSL450"])
        self.float_widths = set()
        self.env = {}
        self.it = self.vt(np.dtype(np.int64))       # index type: int64, or int32 when masked
        self.i32 = m.t_int(32)
        self.u32 = m.t_int(32, False)
        self._storage = [self._storage_dtype(b, k) for k, b in enumerate(kernel.buffers)]
        self.vars = [self._buffer(k, dt) for k, dt in enumerate(self._storage)]

    # -- types and constants --
    def vt(self, dtype):
        """The SPIR-V value type of a kernel-IR dtype."""
        name = np.dtype(dtype).name
        if name == "bool":
            return self.m.t_bool()
        if name in ("int32", "int64"):
            width = 64 if name == "int64" and self.f.int64 else 32
            if width == 64:
                self.m.capability(S.Capability["Int64"])
            return self.m.t_int(width)
        if name in ("float32", "float64"):
            width = 64 if name == "float64" else 32
            if width == 64:
                self.m.capability(S.Capability["Float64"])
            self.float_widths.add(width)
            return self.m.t_float(width)
        raise NotImplementedError(f"dtype {name} in a Vulkan kernel")

    def width(self, dtype):
        dtype = np.dtype(dtype)
        if dtype == np.int64 and not self.f.int64:
            return 32
        return 8 * dtype.itemsize

    def const(self, value, dtype):
        dtype = np.dtype(dtype)
        if dtype == bool:
            return self.m.const_bool(bool(value))
        t, w = self.vt(dtype), self.width(dtype)
        if np.issubdtype(dtype, np.floating):
            bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0] if w == 64 else \
                struct.unpack("<I", struct.pack("<f", float(value)))[0]
        else:
            value = int(value)
            if w == 32:      # int64 held in 32 bits: out-of-range constants saturate
                value = min(max(value, -2 ** 31), 2 ** 31 - 1)
            bits = value & ((1 << w) - 1)
        words = [bits & 0xFFFFFFFF] + ([bits >> 32] if w == 64 else [])
        return self.m.constant(t, words)

    def c32(self, value):
        return self.m.constant(self.i32, [value & 0xFFFFFFFF])

    def _storage_dtype(self, spec, index):
        """The dtype buffer `index` holds on the device (see the module docstring)."""
        dtype = np.dtype(spec.dtype)
        if dtype == bool:
            return np.dtype(np.int32)
        if dtype == np.int64 and not self.f.int64:
            return np.dtype(np.int32)
        adds = self._atomic_adds(index)
        if np.issubdtype(dtype, np.floating) and adds and not self._native_float_atomic(dtype):
            if dtype.itemsize == 8 and not self.f.int64:
                raise DloopNotImplementedError(
                    f"the gradient of a float64 table read inside a loop body is added "
                    f"atomically, and Vulkan device {self.f.name} has neither atomic adds of "
                    "float64 nor shaderInt64 for a compare-exchange on its bits; use "
                    "float32, or a device with either", adds[0].src or user_location())
            return np.dtype(np.int64 if dtype.itemsize == 8 else np.int32)
        return dtype

    def _native_float_atomic(self, dtype):
        return self.f.float64_atomic_add if dtype.itemsize == 8 else self.f.float32_atomic_add

    def _atomic_adds(self, index):
        return [s for s in kir.statements(self.k.body)
                if isinstance(s, kir.AtomicAdd) and s.buf == index]

    def _buffer(self, k, dtype):
        m = self.m
        elem = self.vt(dtype)
        arr = m.t_runtime_array(elem, self.width(dtype) // 8)

        def block():
            sid = m._global("TypeStruct", arr)
            m.decorate(sid, "Block")
            m.member_decorate(sid, 0, "Offset", 0)
            return sid
        st = m.once(("block", arr), block)
        var = m.variable(m.t_pointer("StorageBuffer", st), "StorageBuffer")
        m.decorate(var, "DescriptorSet", 0)
        m.decorate(var, "Binding", k)
        # No two bindings of a launch overlap where either is written, and inputs are only
        # read: the driver may keep loads of them out of loops, as CUDA's __restrict__.
        m.decorate(var, "Restrict")
        if self.k.buffers[k].kind in _READ_ONLY:
            m.decorate(var, "NonWritable")
        return var

    # -- the shader --
    def render(self):
        m = self.m
        void = m.t_void()
        uvec3 = m.t_vector(self.u32, 3)
        ptr_in = m.t_pointer("Input", uvec3)
        gid_var, nwg_var = m.variable(ptr_in, "Input"), m.variable(ptr_in, "Input")
        m.decorate(gid_var, "BuiltIn", S.BuiltIn["GlobalInvocationId"])
        m.decorate(nwg_var, "BuiltIn", S.BuiltIn["NumWorkgroups"])
        pc_struct = m._global("TypeStruct", self.i32)
        m.decorate(pc_struct, "Block")
        m.member_decorate(pc_struct, 0, "Offset", 0)
        pc_var = m.variable(m.t_pointer("PushConstant", pc_struct), "PushConstant")

        fn = self.fn = Function(m, void, m.t_function(void))
        fn.begin(m.id())
        gid = fn.op("Load", uvec3, gid_var)
        nwg = fn.op("Load", uvec3, nwg_var)
        gx = fn.op("CompositeExtract", self.u32, gid, 0)
        gy = fn.op("CompositeExtract", self.u32, gid, 1)
        width = fn.op("IMul", self.u32, fn.op("CompositeExtract", self.u32, nwg, 0),
                      m.constant(self.u32, [self.f.workgroup]))
        gid32 = fn.op("IAdd", self.u32, gx, fn.op("IMul", self.u32, gy, width))
        tid32 = fn.op("Bitcast", self.i32, gid32)
        n32 = fn.op("Load", self.i32, fn.op("AccessChain", m.t_pointer("PushConstant", self.i32),
                                             pc_var, self.c32(0)))
        self.n = self.index(n32)
        # A false the driver cannot prove false: n is a push constant.
        self._opaque_false = fn.op("SLessThan", m.t_bool(), n32, self.c32(0))
        # Per stack: depth, base, capacity and the distance between its slots (kernel/kir.py).
        self.stack_state = [tuple(fn.local(m.t_pointer("Function", self.it)) for _ in range(4))
                            for _ in self.k.stacks]
        self.counters = [fn.local(m.t_pointer("Function", self.it)) for _ in self.k.counters]

        def thread():
            slot = self.index(tid32)
            order = self.k.buffer_index("order")      # slot t runs element order[t]
            tid = slot if order is None else self.load(order, slot)
            self.env[self.k.tid] = tid
            if self.k.slot is not None:
                self.env[self.k.slot] = slot
            self._thread_start(slot if self.k.stacks_by_slot else tid)
            self.block(self.k.body)
            self._thread_end(tid)
        # Unsigned: a 2-D dispatch pads past n by up to a row of workgroups, whose ids may pass
        # 2^31 - 1 when n is near it; as signed integers they would pass as below n.
        self.if_(fn.op("ULessThan", m.t_bool(), gid32, fn.op("Bitcast", self.u32, n32)),
                 thread)
        fn.end("Return")

        m.add("entry", "EntryPoint", S.ExecutionModel["GLCompute"], fn.id, "main", gid_var,
              nwg_var)
        m.add("mode", "ExecutionMode", fn.id, S.ExecutionMode["LocalSize"],
              self.f.workgroup, 1, 1)
        # NumPy's results need infinities, NaN, signed zeros and subnormals kept; drivers
        # may drop them unless asked (lavapipe cannot keep subnormals).
        for mode, has in (("SignedZeroInfNanPreserve", (self.f.nan_preserve32,
                                                        self.f.nan_preserve64)),
                          ("DenormPreserve", (self.f.denorm_preserve32,
                                              self.f.denorm_preserve64))):
            for w in sorted(self.float_widths):
                if has[w == 64]:
                    m.extension("SPV_KHR_float_controls")
                    m.capability(S.Capability[mode])
                    m.add("mode", "ExecutionMode", fn.id, S.ExecutionMode[mode], w)
        return m.words()

    def index(self, i32_value):
        """An int32 value as the index type."""
        return self.fn.op("SConvert", self.it, i32_value) if self.f.int64 else i32_value

    def if_(self, cond, then):
        """A selection construct; returns the label of the last block of `then`."""
        fn, m = self.fn, self.m
        then_label, merge = m.id(), m.id()
        fn.end("SelectionMerge", merge, 0)
        fn.end("BranchConditional", cond, then_label, merge)
        fn.begin(then_label)
        then()
        last = fn.label
        fn.end("Branch", merge)
        fn.begin(merge)
        return last

    def _thread_start(self, tid):
        fn, it, lanes = self.fn, self.it, self.k.tape_lanes
        for spec, (sp, base, cap, stride) in zip(self.k.stacks, self.stack_state):
            c = self.load(spec.cap, tid)
            start = self.load(spec.start, tid)
            fn.do("Store", cap, c)
            group = self.const(spec.group_size, np.int64)
            compact = fn.op("IAdd", it, fn.op("IMul", it, start, group),
                            fn.op("IMul", it, c, self.const(spec.index, np.int64)))
            if lanes == 1:
                fn.do("Store", base, compact)
                fn.do("Store", stride, self.const(1, np.int64))
            else:
                # Interleaved groups of `lanes` threads; a negative start is a compact slice
                # at ~start, which host layouts choose where interleaving would pad.
                assert lanes & (lanes - 1) == 0, "tape_lanes must be a power of two"
                lane = fn.op("BitwiseAnd", it, start, self.const(lanes - 1, np.int64))
                interleaved = fn.op(
                    "IAdd", it, fn.op("IMul", it, fn.op("ISub", it, start, lane), group),
                    fn.op("IAdd", it, lane,
                          fn.op("IMul", it, c, self.const(spec.index * lanes, np.int64))))
                compact = fn.op("IAdd", it, fn.op("IMul", it, fn.op("Not", it, start), group),
                                fn.op("IMul", it, c, self.const(spec.index, np.int64)))
                negative = fn.op("SLessThan", self.m.t_bool(), start,
                                 self.const(0, np.int64))
                fn.do("Store", base, fn.op("Select", it, negative, compact, interleaved))
                fn.do("Store", stride, fn.op("Select", it, negative, self.const(1, np.int64),
                                             self.const(lanes, np.int64)))
            fn.do("Store", sp, self.const(0, np.int64))
        for slot in self.counters:
            fn.do("Store", slot, self.const(0, np.int64))

    def _slot(self, base_var, stride_var, sp):
        """The region index of slot sp of a stack."""
        fn, it = self.fn, self.it
        base = fn.op("Load", it, base_var)
        if self.k.tape_lanes == 1:
            return fn.op("IAdd", it, base, sp)
        return fn.op("IAdd", it, base, fn.op("IMul", it, sp, fn.op("Load", it, stride_var)))

    def _thread_end(self, tid):
        if not self.counters:
            return
        fn = self.fn
        buf = self.k.buffer_index("counts")
        for c, slot in enumerate(self.counters):
            at = fn.op("IAdd", self.it, fn.op("IMul", self.it, self.const(c, np.int64), self.n),
                       tid)
            self.store(buf, at, fn.op("Load", self.it, slot))

    # -- values and memory --
    def val(self, x):
        if isinstance(x, kir.Const):
            c = self.const(x.value, x.dtype)
            dt = np.dtype(x.dtype)
            if np.issubdtype(dt, np.floating) and not (np.isfinite(x.value) and x.value != 0) \
                    and not (x.value == 0 and np.signbit(x.value)):
                # lavapipe folds a * 0, a + 0, a / 0, 0 / a as if no inf, NaN or -0 existed,
                # SignedZeroInfNanPreserve or not: hide such constants from its optimizer.
                return self.fn.op("Select", self.vt(dt), self._opaque_false, self.const(1.0, dt), c)
            return c
        return self.env[x]

    def pointer(self, buf, index):
        elem = self.vt(self._storage[buf])
        return self.fn.op("AccessChain", self.m.t_pointer("StorageBuffer", elem),
                          self.vars[buf], self.c32(0), index)

    def load(self, buf, index):
        dtype, storage = np.dtype(self.k.buffers[buf].dtype), self._storage[buf]
        v = self.fn.op("Load", self.vt(storage), self.pointer(buf, index))
        return self.from_storage(v, dtype, storage)

    def from_storage(self, v, dtype, storage):
        if dtype == bool:
            return self.fn.op("INotEqual", self.m.t_bool(), v, self.c32(0))
        if np.issubdtype(dtype, np.floating) and not np.issubdtype(storage, np.floating):
            return self.fn.op("Bitcast", self.vt(dtype), v)
        return v

    def to_storage(self, v, dtype, storage):
        if dtype == bool:
            return self.fn.op("Select", self.i32, v, self.c32(1), self.c32(0))
        if np.issubdtype(dtype, np.floating) and not np.issubdtype(storage, np.floating):
            return self.fn.op("Bitcast", self.vt(storage), v)
        return v

    def store(self, buf, index, value):
        dtype, storage = np.dtype(self.k.buffers[buf].dtype), self._storage[buf]
        self.fn.do("Store", self.pointer(buf, index), self.to_storage(value, dtype, storage))

    def block(self, stmts):
        for s in stmts:
            self.fn.line(s.src)
            getattr(self, "do_" + type(s).__name__)(s)

    # -- statements --
    def do_Assign(self, s):
        if s.op == "convert" and self.vt(s.args[0].dtype) == self.vt(s.out.dtype) and \
                (np.dtype(s.args[0].dtype) == bool) == (np.dtype(s.out.dtype) == bool):
            self.env[s.out] = self.val(s.args[0])      # int64 held as int32: nothing to do
            return
        self.env[s.out] = ops.emit(self, s.op, [self.val(a) for a in s.args],
                                   np.dtype(s.args[0].dtype), np.dtype(s.out.dtype))

    def do_Load(self, s):
        self.env[s.out] = self.load(s.buf, self.val(s.index))

    def do_Store(self, s):
        self.store(s.buf, self.val(s.index), self.val(s.value))

    def do_AtomicAdd(self, s):
        ops.atomic_add(self, s.buf, self.val(s.index), self.val(s.value))

    def _loop(self, s, header_extra, cond_body, cond_of, continue_extra):
        """The shared shape of For and While: header (phis, merge), condition, body,
        continue block (back edge), merge block."""
        fn, m = self.fn, self.m
        pre = fn.label
        header, cond_label, body, cont, merge = (m.id() for _ in range(5))
        inits = [self.val(i) for i in s.inits]
        fn.end("Branch", header)
        fn.begin(header)
        phis = []
        for c, init in zip(s.carries, inits):
            rid, ins = fn.phi(self.vt(c.dtype), [(init, pre), (0, 0)])
            self.env[c] = rid
            phis.append(ins)
        extra = header_extra(pre, cont)
        fn.end("LoopMerge", merge, cont, 0)
        fn.end("Branch", cond_label)
        fn.begin(cond_label)
        cond_body()
        fn.end("BranchConditional", cond_of(), body, merge)
        fn.begin(body)
        self.block(s.body)
        yields = [self.val(y) for y in s.yields]
        fn.end("Branch", cont)
        fn.begin(cont)
        for ins, y in zip(phis, yields):
            Function.set_incoming(ins, 1, y, cont)
        continue_extra(extra, cont)
        fn.end("Branch", header)
        fn.begin(merge)
        for out, c in zip(s.outs, s.carries):
            self.env[out] = self.env[c]

    def do_For(self, s):
        fn, bool_t = self.fn, self.m.t_bool()
        t = self.vt(s.index.dtype)
        lo, hi = self.val(s.lo), self.val(s.hi)
        one = self.const(1, s.index.dtype)
        first = fn.op("ISub", t, hi, one) if s.reverse else lo

        def header(pre, cont):
            rid, ins = fn.phi(t, [(first, pre), (0, 0)])
            self.env[s.index] = rid
            return rid, ins

        def cond():
            k = self.env[s.index]
            return fn.op("SGreaterThanEqual", bool_t, k, lo) if s.reverse else \
                fn.op("SLessThan", bool_t, k, hi)

        def step(extra, cont):
            k, ins = extra
            nxt = fn.op("ISub" if s.reverse else "IAdd", t, k, one)
            Function.set_incoming(ins, 1, nxt, cont)

        self._loop(s, header, lambda: None, cond, step)

    def do_While(self, s):
        if runs_once(s):
            self._once(s)
            return
        self._loop(s, lambda pre, cont: None, lambda: self.block(s.cond_body),
                   lambda: self.val(s.cond), lambda extra, cont: None)

    def _once(self, s):
        """A While of at most one pass (mathlib's branches) as a selection: lavapipe counts
        the passes of all of an invocation's loops, one more for each loop entered, against
        a single limit of 65,535, so as a loop it would stop a user's loop that calls sin
        after 22,000 to 33,000 trips."""
        inits = [self.val(i) for i in s.inits]
        for c, init in zip(s.carries, inits):
            self.env[c] = init
        self.block(s.cond_body)
        before, yields = self.fn.label, []
        last = self.if_(self.val(s.cond), lambda: (
            self.block(s.body), yields.extend(self.val(y) for y in s.yields)))
        for out, y, init in zip(s.outs, yields, inits):
            self.env[out], _ = self.fn.phi(self.vt(out.dtype), [(y, last), (init, before)])

    def do_If(self, s):
        self.if_(self.val(s.cond), lambda: self.block(s.body))

    def do_StackInit(self, s):
        self.fn.do("Store", self.stack_state[s.stack][0], self.val(s.depth))

    def do_Push(self, s):
        fn, spec = self.fn, self.k.stacks[s.stack]
        sp_var, base_var, cap_var, stride_var = self.stack_state[s.stack]
        sp = fn.op("Load", self.it, sp_var)
        cap = fn.op("Load", self.it, cap_var)
        value = self.val(s.value)
        fits = fn.op("SLessThan", self.m.t_bool(), sp, cap)
        nxt = fn.op("IAdd", self.it, sp, self.const(1, np.int64))
        m = self.m
        then_label, else_label, merge = m.id(), m.id(), m.id()
        fn.end("SelectionMerge", merge, 0)
        fn.end("BranchConditional", fits, then_label, else_label)
        fn.begin(then_label)
        self.store(spec.region, self._slot(base_var, stride_var, sp), value)
        fn.end("Branch", merge)
        fn.begin(else_label)
        self.fault(spec.fault_slot, nxt)
        fn.end("Branch", merge)
        fn.begin(merge)
        fn.do("Store", sp_var, nxt)

    def do_Pop(self, s):
        fn, spec = self.fn, self.k.stacks[s.stack]
        sp_var, base_var, cap_var, stride_var = self.stack_state[s.stack]
        bool_t = self.m.t_bool()
        zero = self.const(0, np.int64)
        sp = fn.op("ISub", self.it, fn.op("Load", self.it, sp_var), self.const(1, np.int64))
        sp = fn.op("Select", self.it, fn.op("SLessThan", bool_t, sp, zero), zero, sp)
        fn.do("Store", sp_var, sp)
        valid = fn.op("SLessThan", bool_t, sp, fn.op("Load", self.it, cap_var))
        before = fn.label
        got = []
        last = self.if_(valid, lambda: got.append(
            self.load(spec.region, self._slot(base_var, stride_var, sp))))
        rid, _ = fn.phi(self.vt(s.out.dtype), [(got[0], last),
                                               (self.const(0, s.out.dtype), before)])
        self.env[s.out] = rid

    def fault(self, slot, value):
        buf = self.k.buffer_index("faults")
        ops.atomic_max(self, buf, self.const(0, np.int64), self.const(1, np.int64))
        ops.atomic_max(self, buf, self.const(1 + slot, np.int64), value)

    def do_Fault(self, s):
        self.fault(s.slot, self.val(s.value))

    def do_CountMax(self, s):
        fn = self.fn
        slot = self.counters[s.counter]
        old, new = fn.op("Load", self.it, slot), self.val(s.value)
        bigger = fn.op("SGreaterThan", self.m.t_bool(), new, old)
        fn.do("Store", slot, fn.op("Select", self.it, bigger, new, old))


def render(kernel, features, rough=False):
    """rough: the test mode of vulkan/rough.py."""
    return Renderer(kernel, features, rough).render()
