"""STAGE 4 — the kernel IR verifier: every value defined before use (in a scope that reaches
the use), buffers used as their kind allows with their dtype, stacks and counters that exist.
Run after every lowering, so a renderer never meets a malformed kernel."""

import numpy as np

from . import kir

_READABLE = {"in", "out", "region", "start", "cap", "counts", "accum", "faults", "order"}
_WRITABLE = {"out", "counts"}
# Operands of one dtype (renderers emit one machine type), and for arithmetic the result too.
_ARITHMETIC = {"add", "sub", "mul", "max", "min"}
_SAME_TYPED = _ARITHMETIC | {"lt", "le", "gt", "ge", "eq", "ne"}


class KernelIRError(Exception):
    """A malformed kernel: a bug in dloop, never the user's."""


def check_kernel(kernel):
    _Checker(kernel).run()
    return kernel


class _Checker:
    def __init__(self, kernel):
        self.k = kernel

    def fail(self, what, stmt):
        raise KernelIRError(f"kernel {self.k.name}: {what} in {stmt!r}")

    def run(self):
        for spec in self.k.stacks:
            for buf, kind in ((spec.region, "region"), (spec.start, "start"), (spec.cap, "cap")):
                if not 0 <= buf < len(self.k.buffers) or self.k.buffers[buf].kind != kind:
                    self.fail(f"stack buffer {buf} is not a {kind!r} buffer", spec)
            if self.k.buffers[spec.region].dtype != spec.dtype:
                self.fail("stack dtype differs from its region's", spec)
        self.block(self.k.body, {self.k.tid} | ({self.k.slot} if self.k.slot else set()))

    def use(self, x, scope, stmt):
        if isinstance(x, kir.Const):
            return
        if not isinstance(x, kir.KVar):
            self.fail(f"operand {x!r} is neither a KVar nor a Const", stmt)
        if x not in scope:
            self.fail(f"{x!r} used before it is defined", stmt)

    def define(self, x, scope, stmt):
        if x in scope:
            self.fail(f"{x!r} defined twice", stmt)
        scope.add(x)

    def buffer(self, buf, kinds, stmt, dtype=None):
        if not 0 <= buf < len(self.k.buffers):
            self.fail(f"buffer {buf} does not exist", stmt)
        spec = self.k.buffers[buf]
        if spec.kind not in kinds:
            self.fail(f"buffer {buf} of kind {spec.kind!r} used as one of {sorted(kinds)}", stmt)
        if dtype is not None and spec.dtype != np.dtype(dtype):
            self.fail(f"buffer {buf} holds {spec.dtype}, not {np.dtype(dtype)}", stmt)

    def stack(self, s, stmt):
        if not 0 <= s < len(self.k.stacks):
            self.fail(f"stack {s} does not exist", stmt)
        return self.k.stacks[s]

    def block(self, stmts, scope):
        for s in stmts:
            getattr(self, "do_" + type(s).__name__)(s, scope)

    def do_Assign(self, s, scope):
        for a in s.args:
            self.use(a, scope, s)
        if s.op in _SAME_TYPED:
            types = {np.dtype(a.dtype) for a in s.args}
            if s.op in _ARITHMETIC:
                types.add(np.dtype(s.out.dtype))
            if len(types) > 1:
                self.fail(f"{s.op} mixes {sorted(t.name for t in types)}", s)
        self.define(s.out, scope, s)

    def do_Load(self, s, scope):
        self.use(s.index, scope, s)
        self.buffer(s.buf, _READABLE, s, s.out.dtype)
        self.define(s.out, scope, s)

    def do_Store(self, s, scope):
        self.use(s.index, scope, s)
        self.use(s.value, scope, s)
        self.buffer(s.buf, _WRITABLE, s, s.value.dtype)

    def do_AtomicAdd(self, s, scope):
        self.use(s.index, scope, s)
        self.use(s.value, scope, s)
        self.buffer(s.buf, {"accum"}, s, s.value.dtype)

    def _loop(self, s, scope, header, body_parts):
        if not len(s.carries) == len(s.inits) == len(s.yields) == len(s.outs):
            self.fail("carries, inits, yields and outs differ in number", s)
        for init in s.inits:
            self.use(init, scope, s)
        inner = set(scope)
        for v in header + list(s.carries):
            self.define(v, inner, s)
        for part in body_parts:
            self.block(part, inner)
        for y in s.yields:
            self.use(y, inner, s)
        for c, y in zip(s.carries, s.yields):
            if c.dtype != y.dtype:
                self.fail(f"carry {c!r} is {c.dtype} but yields {y.dtype}", s)
        for out in s.outs:
            self.define(out, scope, s)
        return inner

    def do_For(self, s, scope):
        self.use(s.lo, scope, s)
        self.use(s.hi, scope, s)
        self._loop(s, scope, [s.index], [s.body])

    def do_While(self, s, scope):
        inner = set(scope)
        for v in s.carries:
            self.define(v, inner, s)
        self.block(s.cond_body, inner)
        self.use(s.cond, inner, s)
        # cond_body's values are visible in the body: it runs right before it.
        for init in s.inits:
            self.use(init, scope, s)
        for part in (s.body,):
            self.block(part, inner)
        for y in s.yields:
            self.use(y, inner, s)
        for out in s.outs:
            self.define(out, scope, s)

    def do_If(self, s, scope):
        self.use(s.cond, scope, s)
        self.block(s.body, set(scope))

    def do_StackInit(self, s, scope):
        self.stack(s.stack, s)
        self.use(s.depth, scope, s)

    def do_Push(self, s, scope):
        spec = self.stack(s.stack, s)
        self.use(s.value, scope, s)
        if s.value.dtype != spec.dtype:
            self.fail(f"pushes {s.value.dtype} onto a {spec.dtype} stack", s)

    def do_Pop(self, s, scope):
        spec = self.stack(s.stack, s)
        if s.out.dtype != spec.dtype:
            self.fail(f"pops a {spec.dtype} stack into {s.out.dtype}", s)
        self.define(s.out, scope, s)

    def do_Fault(self, s, scope):
        if not 0 <= s.slot < len(self.k.faults):
            self.fail(f"fault slot {s.slot} does not exist", s)
        self.use(s.value, scope, s)

    def do_CountMax(self, s, scope):
        if not 0 <= s.counter < len(self.k.counters):
            self.fail(f"counter {s.counter} does not exist", s)
        self.use(s.value, scope, s)
