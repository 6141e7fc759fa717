"""STAGE 5 — cpu: a collective loop's steps as one native function (runtime/steps.py).

    void dloop_steps(i64 first, i64 last, i64 index_base, ptr addresses)

runs steps first .. last - 1 (forward) or last - 1 down to first (reverse), with the body's
kernels called by address, one thread each: the plan only admits launches small enough for
that. `addresses` holds the slots' data pointers, then one tape base per carry, then (in
reverse) one accumulator per invariant cotangent, then each kernel's fault flags, then each
kernel's entry point (runtime/steps.py `run` fills it). Step t's carry k is
tape_k + t * bytes_k, and its index is index_base + t. No address is a constant of the
code, so a driver is kept in the disk cache like a kernel, under its LLVM IR.

Each step stores the index and calls the kernels. Taped, they read step t's carries in the
tape itself (the first call copies the carry slots into row 0) and write the new carries into
its next row (into the carry slots at the last step). Untaped, and for the carry cotangents
in reverse, they read one of two buffers and write the other, swapped at every step; one copy
after the last step leaves the result in the slot the caller reads. Where two carries come
out of one value (runtime/steps.py carry_pairs), the writes stay put and are copied after
each step instead. Reverse steps add the invariant cotangents into their accumulators. The
table ends with the number of steps of the whole run."""

import ctypes

import numpy as np
from llvmlite import ir

from ...runtime.steps import carry_pairs
from .types import I1, I64, PTR, VOID, storage_type


def build(plan, mode, n_index, n_carry, n_inv):
    """The LLVM IR of the driver of `plan` (a runtime.steps.StepPlan): mode 'forward',
    'forward_taped' or 'reverse'; n_index: 1 for a fori loop's index input, 0 for none;
    n_inv: the body's invariant inputs."""
    module = ir.Module(name="dloop_steps")
    fn = ir.Function(module, ir.FunctionType(VOID, [I64, I64, I64, PTR]), "dloop_kernel")
    first, last, index_base, table = fn.args
    memcpy = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I64, I1]),
                         "llvm.memcpy.p0.p0.i64")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n_slots = len(plan.slots)

    def address(k):
        return b.inttoptr(b.load(b.gep(table, [I64(k)], inbounds=True, source_etype=I64),
                                 typ=I64), PTR)

    def copy(dst, src, nbytes):
        b.call(memcpy, [dst, src, I64(nbytes), I1(0)])

    reverse = mode == "reverse"
    ins = plan.inputs
    carries = ins[n_index:n_index + n_carry]
    outs = plan.outputs
    bars = ins[n_index + n_carry + n_inv:] if reverse else []
    n_acc = len(outs) - len(bars) if reverse else 0
    pairs, direct = carry_pairs(plan, mode, n_index, n_carry, n_inv)
    faults = n_slots + n_carry + n_acc        # one flag array per kernel, zeroed per run
    entries = faults + len(plan.calls)
    trips = b.load(b.gep(table, [I64(entries + len(plan.calls))], inbounds=True,
                         source_etype=I64), typ=I64)

    def row(k, t):
        return b.gep(address(n_slots + k), [b.mul(t, I64(plan.nbytes[carries[k]]))],
                     inbounds=True, source_etype=ir.IntType(8))

    if mode == "forward_taped":
        copy_in, go = fn.append_basic_block("row0"), fn.append_basic_block("go")
        b.cbranch(b.icmp_signed("==", first, I64(0)), copy_in, go)
        b.position_at_end(copy_in)
        for k, s in enumerate(carries):
            copy(row(k, I64(0)), address(s), plan.nbytes[s])
        b.branch(go)
        b.position_at_end(go)
    head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
    start = b.sub(last, I64(1)) if reverse else first
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    t = b.phi(I64)
    t.add_incoming(start, entry)
    b.cbranch(b.icmp_signed(">=" if reverse else "<", t, first if reverse else last),
              body, done)
    b.position_at_end(body)

    # Taped, the kernels read the carries where the tape holds them.
    at = {} if mode == "forward" else {s: row(k, t) for k, s in enumerate(carries)}
    following = b.add(t, I64(1))
    more = b.icmp_signed("<", following, trips)
    swapped = None
    if direct and mode == "forward_taped":
        for k, (s_in, s_out) in enumerate(pairs):
            at[s_out] = b.select(more, row(k, following), address(s_in))
    elif direct:
        done_steps = b.sub(b.sub(trips, I64(1)), t) if reverse else t
        swapped = b.icmp_signed("!=", b.and_(done_steps, I64(1)), I64(0))
        for s_in, s_out in pairs:
            a_in, a_out = address(s_in), address(s_out)
            at[s_in], at[s_out] = b.select(swapped, a_out, a_in), b.select(swapped, a_in, a_out)
    if n_index:
        dtype = plan.slots[ins[0]].aval.dtype
        value = b.add(index_base, t)
        if dtype != np.int64:
            value = b.trunc(value, storage_type(dtype))
        b.store(value, address(ins[0]))
    for k, (compiled, n_threads, refs) in enumerate(plan.calls):
        args = [I64(0), I64(n_threads), I64(n_threads)]
        args += [address(faults + k) if r is None else at[r] if r in at else address(r)
                 for r in refs]
        kernel_type = ir.FunctionType(VOID, [I64] * 3 + [PTR] * len(refs))
        entry = b.inttoptr(b.load(b.gep(table, [I64(entries + k)], inbounds=True,
                                        source_etype=I64), typ=I64), kernel_type.as_pointer())
        b.call(entry, args)
    for k, s in enumerate(outs[len(bars):] if reverse else ()):
        _accumulate(b, fn, address(n_slots + n_carry + k), address(s), plan.slots[s].aval)
    if not direct:
        for k, (s_in, s_out) in enumerate(pairs):
            to = b.select(more, row(k, following), address(s_in)) \
                if mode == "forward_taped" else address(s_in)
            copy(to, address(s_out), plan.nbytes[s_in])
    elif swapped is not None:
        # After the last step the result is in the written buffer unless it was swapped.
        last_step = b.icmp_signed("==", t, I64(0)) if reverse else b.not_(more)
        settle, stepped = fn.append_basic_block("settle"), fn.append_basic_block("stepped")
        b.cbranch(b.and_(last_step, b.not_(swapped)), settle, stepped)
        b.position_at_end(settle)
        for s_in, s_out in pairs:
            copy(address(s_in), address(s_out), plan.nbytes[s_in])
        b.branch(stepped)
        b.position_at_end(stepped)
    step = b.sub(t, I64(1)) if reverse else b.add(t, I64(1))
    t.add_incoming(step, b.block)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


class Driver:
    """A loaded driver (`call`) and the entry points of the kernels it calls, which end its
    address table: process constants, so they are found here, not kept in the code."""

    def __init__(self, loaded, plan):
        self.loaded = loaded            # keeps the machine code alive
        self.entries = [ctypes.cast(compiled.artifact.call, ctypes.c_void_p).value
                        for compiled, _, _ in plan.calls]

    def call(self, first, last, index_base, table):
        self.loaded.call(first, last, index_base, table.ctypes.data)


def _accumulate(b, fn, acc, g, aval):
    """acc[j] += g[j] for the invariant cotangent's elements."""
    ty = storage_type(aval.dtype)
    n = int(np.prod(aval.shape, dtype=np.int64))
    before = b.block
    loop, after = fn.append_basic_block("acc"), fn.append_basic_block("acc_done")
    b.cbranch(b.icmp_signed(">", I64(n), I64(0)), loop, after)
    b.position_at_end(loop)
    j = b.phi(I64)
    j.add_incoming(I64(0), before)
    pa = b.gep(acc, [j], inbounds=True, source_etype=ty)
    pg = b.gep(g, [j], inbounds=True, source_etype=ty)
    total = b.fadd(b.load(pa, typ=ty), b.load(pg, typ=ty)) if np.issubdtype(
        aval.dtype, np.floating) else b.add(b.load(pa, typ=ty), b.load(pg, typ=ty))
    b.store(total, pa)
    nxt = b.add(j, I64(1))
    j.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, I64(n)), loop, after)
    b.position_at_end(after)
