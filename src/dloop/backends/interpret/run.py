"""STAGE 5 — interpret: runs kernel IR with NumPy, all threads at once, masking the threads
that a branch or loop does not run. The specification every compiled backend is tested
against; kir.py's docstring states the semantics implemented here."""

import numpy as np

from ...ir.semantics import evaluate
from ...kernel import core, kir


def run_kernel(kernel, n_threads, buffers):
    _Thread(kernel, n_threads, buffers).run()


class _Thread:
    """The state of all n threads of one launch."""

    def __init__(self, kernel, n, buffers):
        self.kernel, self.n, self.buffers = kernel, n, buffers
        order = kernel.buffer_index("order")
        tid = buffers[order] if order is not None else np.arange(n, dtype=np.int64)
        self.tid = tid
        self.env = {kernel.tid: tid}
        if kernel.slot is not None:
            self.env[kernel.slot] = np.arange(n, dtype=np.int64)
        self.stacks = []
        at = np.arange(n, dtype=np.int64) if kernel.stacks_by_slot else tid
        for s in kernel.stacks:
            cap, start, lanes = buffers[s.cap][at], buffers[s.start][at], kernel.tape_lanes
            lane = start % lanes
            base = s.group_size * (start - lane) + lane + s.index * cap * lanes
            self.stacks.append({"base": base, "cap": cap, "sp": np.zeros(n, np.int64),
                                "lanes": lanes})
        self.counters = [np.zeros(n, np.int64) for _ in kernel.counters]

    def run(self):
        self.block(self.kernel.body, np.ones(self.n, dtype=bool))
        if self.counters:
            counts = self.buffers[self.kernel.buffer_index("counts")]
            for c, values in enumerate(self.counters):
                counts[c * self.n + self.tid] = values

    def val(self, x):
        if isinstance(x, kir.Const):
            return np.full(self.n, x.value, dtype=x.dtype)
        return self.env[x]

    def set(self, var, value):
        self.env[var] = np.broadcast_to(np.asarray(value).astype(var.dtype, copy=False),
                                        (self.n,))

    def block(self, stmts, mask):
        for s in stmts:
            getattr(self, "do_" + type(s).__name__)(s, mask)

    def do_Assign(self, s, mask):
        args = [self.val(a) for a in s.args]
        if s.op in core.EVALUATE:       # core ops that are not graph primitives, and convert
            self.set(s.out, core.evaluate(s.op, args, s.out.dtype))
        else:
            self.set(s.out, evaluate(s.op, args, {}))

    def do_Load(self, s, mask):
        buf = self.buffers[s.buf]
        if buf.size == 0:
            self.set(s.out, np.zeros(self.n, s.out.dtype))
            return
        index = self.val(s.index)
        if s.wrap is not None:
            shift, size = s.wrap
            index = index - shift
            index = np.where(index < 0, index + size, index)
        self.set(s.out, buf[np.where(mask, index, 0)])

    def do_Store(self, s, mask):
        self.buffers[s.buf][self.val(s.index)[mask]] = self.val(s.value)[mask]

    def do_AtomicAdd(self, s, mask):
        np.add.at(self.buffers[s.buf], self.val(s.index)[mask], self.val(s.value)[mask])

    def _merge(self, targets, values, active):
        # One parallel assignment: a carry's new value may be another carry's old one (a swap).
        new = [np.where(active, self.val(v), self.val(t)) for t, v in zip(targets, values)]
        for t, value in zip(targets, new):
            self.set(t, value)

    def do_For(self, s, mask):
        lo, hi = self.val(s.lo).astype(np.int64), self.val(s.hi).astype(np.int64)
        for c, init in zip(s.carries, s.inits):
            self.set(c, self.val(init))
        trips = np.where(mask, np.maximum(hi - lo, 0), 0)
        step = 0
        while True:
            active = trips > step
            if not active.any():
                break
            self.set(s.index, (hi - 1 - step) if s.reverse else (lo + step))
            self.block(s.body, active)
            self._merge(s.carries, s.yields, active)
            step += 1
        for out, c in zip(s.outs, s.carries):
            self.set(out, self.val(c))

    def do_While(self, s, mask):
        for c, init in zip(s.carries, s.inits):
            self.set(c, self.val(init))
        active = mask.copy()
        while True:
            self.block(s.cond_body, active)
            active &= self.val(s.cond).astype(bool)
            if not active.any():
                break
            self.block(s.body, active)
            self._merge(s.carries, s.yields, active)
        for out, c in zip(s.outs, s.carries):
            self.set(out, self.val(c))

    def do_If(self, s, mask):
        inner = mask & self.val(s.cond).astype(bool)
        if inner.any():
            self.block(s.body, inner)

    def do_StackInit(self, s, mask):
        st = self.stacks[s.stack]
        st["sp"] = np.where(mask, self.val(s.depth), st["sp"])

    def do_Push(self, s, mask):
        spec, st = self.kernel.stacks[s.stack], self.stacks[s.stack]
        sp = st["sp"]
        fits = mask & (sp < st["cap"])
        region = self.buffers[spec.region]
        region[(st["base"] + sp * st["lanes"])[fits]] = self.val(s.value)[fits]
        over = mask & ~fits
        if over.any():
            self._fault(spec.fault_slot, (sp + 1)[over].max())
        st["sp"] = sp + mask

    def do_Pop(self, s, mask):
        spec, st = self.kernel.stacks[s.stack], self.stacks[s.stack]
        st["sp"] = np.where(mask, np.maximum(st["sp"] - 1, 0), st["sp"])
        valid = mask & (st["sp"] < st["cap"])
        out = np.zeros(self.n, s.out.dtype)
        out[valid] = self.buffers[spec.region][(st["base"] + st["sp"] * st["lanes"])[valid]]
        self.set(s.out, out)

    def _fault(self, slot, value):
        faults = self.buffers[self.kernel.buffer_index("faults")]
        faults[0] = 1
        faults[1 + slot] = max(faults[1 + slot], int(value))

    def do_Fault(self, s, mask):
        if mask.any():
            self._fault(s.slot, self.val(s.value)[mask].max())

    def do_CountMax(self, s, mask):
        c = self.counters[s.counter]
        self.counters[s.counter] = np.where(mask, np.maximum(c, self.val(s.value)), c)
