"""STAGE 5 — cuda: kernel IR -> CUDA C. One thread per element:
    extern "C" __global__ void dloop_kernel(long long n_threads, T0* buf0, T1* buf1, ...)
or, rendered with rows=True, the same kernel taking those values from a row of 8-byte words
in device memory: the step graphs of backends/cuda/steps.py launch it, where a node's
arguments are fixed when the graph is made and the row is rewritten at every call.
Every statement from a user line is preceded by `#line N "file"`, so NVRTC messages and
device-side tools point at the user's Python. Indices and offsets are 64-bit throughout.
Adstack push/pop and the fault flags are the helpers of _native/cuda/adstack.cuh."""

import numpy as np

from ...kernel import kir
from ...kernel.legalize import legalize, sincos_pairs
from ..base import Caps
from .ops import const, ctype, expr, storage_ctype

# Every CUDA device NVRTC 13 targets (sm_75 and later) has float64, 64-bit and float atomics
# and CUDA's math library in both widths. 256-byte heap regions keep every load aligned.
CUDA_CAPS = Caps(align=256, order_elements=True, sizes_on_device=True, tape_lanes=32,
                 slot_layouts=True)

HEADER = "dloop/adstack.cuh"      # the include name of _native/cuda/adstack.cuh
KERNEL_NAME = "dloop_kernel"
BLOCK = 256            # threads per block of every launch
# Buffers a kernel only reads: const __restrict__ lets the compiler use the read-only cache.
_READ_ONLY = ("in", "start", "cap", "order")


class Renderer:
    def __init__(self, kernel, rows=False):
        self.kernel = kernel
        self.rows = rows
        self.lines = []
        self.decls = {}           # var -> its C declaration, all hoisted to the kernel's top
        self.depth = 1
        # (path, number) that C gives the next physical line: a #line directive numbers the
        # line after it, and every line after that counts on from there.
        self.line_at = None
        self.named = None         # (path, number) of the last statement with a src

    # -- output --
    def emit(self, text, src=None):
        if src is not None:
            self.named = _location(src)
        at = self.named          # a statement without src stays on the last named line
        if at is not None and at != self.line_at:
            self.lines.append(f'#line {at[1]} "{_escape(at[0])}"')
            self.line_at = at
        self.lines.append("  " * self.depth + text)
        if self.line_at is not None:
            self.line_at = (self.line_at[0], self.line_at[1] + 1)

    def name(self, var):
        if var not in self.decls:
            self.decls[var] = f"{ctype(var.dtype)} {var!r};"
        return repr(var)

    def val(self, x):
        return const(x.value, x.dtype) if isinstance(x, kir.Const) else self.name(x)

    def assign(self, var, text, src=None):
        self.emit(f"{self.name(var)} = {text};", src)

    # -- the kernel --
    def render(self):
        k = self.kernel
        self.emit("const long long slot = (long long)blockIdx.x * blockDim.x + threadIdx.x;")
        self.emit("if (slot >= n_threads) return;")
        order = k.buffer_index("order")    # slot t runs element order[t] (kernel/kir.py)
        self.emit(f"const long long {self.name(k.tid)} = "
                  f"{'slot' if order is None else f'buf{order}[slot]'};")
        if k.slot is not None:
            self.emit(f"const long long {self.name(k.slot)} = slot;")
        self._thread_start()
        self.statements(k.body)
        self._thread_end()
        self.depth = 0
        self.emit("}")                 # the kernel's end, on the last user line too
        params = ["const long long n_threads"] + [self._param(i, b)
                                                  for i, b in enumerate(k.buffers)]
        self.decls.pop(k.tid)          # declared const where it is computed
        if k.slot is not None:
            self.decls.pop(k.slot)
        head = [f'#include "{HEADER}"', ""]
        if self.rows:
            head.append(f'extern "C" __global__ void {KERNEL_NAME}('
                        f'const long long* __restrict__ row) {{')
            head += [f"  {p} = ({p.rpartition(' ')[0].replace(' __restrict__', '')})row[{i}];"
                     for i, p in enumerate(params)]
        else:
            head.append(f'extern "C" __global__ void {KERNEL_NAME}({", ".join(params)}) {{')
        decls = ["  " + d for d in self.decls.values()]
        return "\n".join(head + decls + self.lines + [""])

    @staticmethod
    def _param(i, spec):
        t = storage_ctype(spec.dtype)
        if spec.kind in _READ_ONLY:
            return f"const {t}* __restrict__ buf{i}"
        return f"{t}* buf{i}"

    def _thread_start(self):
        kernel = self.kernel
        tid = self.name(kernel.slot if kernel.stacks_by_slot else kernel.tid)
        lanes = kernel.tape_lanes
        for k, spec in enumerate(self.kernel.stacks):
            self.emit(f"const long long cap{k} = buf{spec.cap}[{tid}];")
            self.emit(f"const long long lane{k} = buf{spec.start}[{tid}] % {lanes}LL;")
            self.emit(f"const long long base{k} = {spec.group_size}LL * (buf{spec.start}[{tid}]"
                      f" - lane{k}) + lane{k} + {spec.index * lanes}LL * cap{k};")
            self.emit(f"long long sp{k} = 0;")
        for c in range(len(self.kernel.counters)):
            self.emit(f"long long counter{c} = 0;")

    def _thread_end(self):
        if not self.kernel.counters:
            return
        counts = self.kernel.buffer_index("counts")
        tid = self.name(self.kernel.tid)
        for c in range(len(self.kernel.counters)):
            self.emit(f"buf{counts}[{c}LL * n_threads + {tid}] = counter{c};")

    def statements(self, stmts):
        paired = sincos_pairs(stmts)
        for s in stmts:
            if id(s) in paired:
                partner = paired[id(s)]
                if partner is not None:       # the first of the pair: both results at once
                    sin, cos = (s, partner) if s.op == "sin" else (partner, s)
                    fn = "sincosf" if np.dtype(s.out.dtype) == np.float32 else "sincos"
                    self.emit(f"{fn}({self.val(s.args[0])}, &{self.name(sin.out)}, "
                              f"&{self.name(cos.out)});", s.src)
                continue
            getattr(self, "do_" + type(s).__name__)(s)

    def block(self, stmts):
        self.depth += 1
        self.statements(stmts)
        self.depth -= 1

    def _dtype(self, buf):
        return self.kernel.buffers[buf].dtype

    # -- statements --
    def do_Assign(self, s):
        args = [self.val(a) for a in s.args]
        dtype = s.args[0].dtype if s.args else s.out.dtype
        if s.op == "select":
            dtype = s.args[1].dtype
        self.assign(s.out, expr(s.op, args, dtype, s.out.dtype), s.src)

    def do_Load(self, s):
        load = f"buf{s.buf}[{self.val(s.index)}]"
        if self.rows and self.kernel.buffers[s.buf].kind in _READ_ONLY:
            # __restrict__ is honoured on parameters only: without it the compiler does not
            # use the read-only loads a parameter's const __restrict__ gives.
            load = f"__ldg(&{load})"
        self.assign(s.out, f"({load} != 0)" if s.out.dtype == bool else load, s.src)

    def _stored(self, value, dtype):
        v = self.val(value)
        return f"(unsigned char){v}" if np.dtype(dtype) == bool else v

    def do_Store(self, s):
        v = self._stored(s.value, self._dtype(s.buf))
        self.emit(f"buf{s.buf}[{self.val(s.index)}] = {v};", s.src)

    def do_AtomicAdd(self, s):
        dtype = np.dtype(self._dtype(s.buf))
        p, v = f"&buf{s.buf}[{self.val(s.index)}]", self.val(s.value)
        if dtype == np.int64:      # CUDA's 64-bit atomicAdd is unsigned; wrapping agrees
            p, v = f"(unsigned long long*){p}", f"(unsigned long long){v}"
        self.emit(f"atomicAdd({p}, {v});", s.src)

    def _carry_in(self, carries, inits, src):
        for c, init in zip(carries, inits):
            self.assign(c, self.val(init), src)

    def _carry_back(self, s):
        """carries <- yields as one parallel assignment: a yield may read another carry."""
        temps = []
        for c, y in zip(s.carries, s.yields):
            t = kir.KVar(c.dtype)
            self.assign(t, self.val(y), s.src)
            temps.append(t)
        for c, t in zip(s.carries, temps):
            self.assign(c, self.name(t), s.src)

    def _outs(self, s):
        for out, c in zip(s.outs, s.carries):
            self.assign(out, self.name(c), s.src)

    def do_For(self, s):
        self._carry_in(s.carries, s.inits, s.src)
        k, lo, hi = self.name(s.index), self.val(s.lo), self.val(s.hi)
        if s.reverse:
            head = f"for ({k} = {hi} - 1; {k} >= {lo}; --{k}) {{"
        else:
            head = f"for ({k} = {lo}; {k} < {hi}; ++{k}) {{"
        self.emit(head, s.src)
        self.block(s.body)
        self.depth += 1
        self._carry_back(s)
        self.depth -= 1
        self.emit("}")
        self._outs(s)

    def do_While(self, s):
        self._carry_in(s.carries, s.inits, s.src)
        self.emit("while (true) {", s.src)
        self.block(s.cond_body)
        self.depth += 1
        self.emit(f"if (!{self.val(s.cond)}) break;", s.src)
        self.depth -= 1
        self.block(s.body)
        self.depth += 1
        self._carry_back(s)
        self.depth -= 1
        self.emit("}")
        self._outs(s)

    def do_If(self, s):
        self.emit(f"if ({self.val(s.cond)}) {{", s.src)
        self.block(s.body)
        self.emit("}")

    def do_StackInit(self, s):
        self.emit(f"sp{s.stack} = {self.val(s.depth)};", s.src)

    def _stack(self, k):
        spec = self.kernel.stacks[k]
        return spec, f"buf{spec.region}, base{k}, cap{k}, {self.kernel.tape_lanes}LL, sp{k}"

    def _faults(self):
        return f"buf{self.kernel.buffer_index('faults')}"

    def do_Push(self, s):
        spec, args = self._stack(s.stack)
        v = self._stored(s.value, spec.dtype)
        t = storage_ctype(spec.dtype)
        self.emit(f"dloop_push<{t}>({args}, ({t}){v}, {self._faults()}, {spec.fault_slot});",
                  s.src)

    def do_Pop(self, s):
        spec, args = self._stack(s.stack)
        pop = f"dloop_pop<{storage_ctype(spec.dtype)}>({args})"
        self.assign(s.out, f"({pop} != 0)" if spec.dtype == bool else pop, s.src)

    def do_Fault(self, s):
        self.emit(f"dloop_fault({self._faults()}, {s.slot}, (long long){self.val(s.value)});",
                  s.src)

    def do_CountMax(self, s):
        v = f"(long long){self.val(s.value)}"
        self.emit(f"counter{s.counter} = {v} > counter{s.counter} ? {v} : counter{s.counter};",
                  s.src)


def _location(src):
    """(path, line number) of a statement's src 'file:line' (line 1 of src without one)."""
    path, _, line = str(src).rpartition(":")
    if not line.isdigit():
        return str(src), 1
    return path, int(line)


def _escape(path):
    return path.replace("\\", "\\\\").replace('"', '\\"')


def render(kernel, caps=CUDA_CAPS, rows=False):
    """CUDA C for `kernel` on a device with `caps` (legalized for them first)."""
    return Renderer(legalize(kernel, caps), rows).render()
