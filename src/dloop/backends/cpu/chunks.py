"""STAGE 5 — cpu: a kernel's chunk loop, in the kernel's own module.

    i64 dloop_chunks(ptr job, i64 limit, i64 n_threads, ptr buf0, ...)

claims chunks of the launch from `job` = [next start, chunk size, cancelled, calls inside]
(an int64 array the launching thread shares with the pool's workers) by an atomic add, and
runs dloop_kernel on each, until none is left, `cancelled` is set or `limit` chunks ran;
returns how many elements it ran. A pool worker makes one call for the whole launch: a
Python loop around one call per chunk takes the GIL between chunks, and two threads taking
turns on it lost about 10% of W2's launch on two cores. The launching thread runs one
chunk per call, so that Ctrl-C reaches it between chunks.

    i64 dloop_await_idle(ptr job, i64 spins)

returns 1 once no call of dloop_chunks is inside `job` (job[3], counted on entry and exit),
or 0 after `spins` polls. The launching thread, out of chunks, waits there for the workers'
last chunks: a call that enters later claims nothing, as none is left. Waiting for the
workers' Python instead (their futures) took 50 to 70 us past their last chunk on the
project's 2-core machine, at every parallel launch (W2's gradient takes 2 ms)."""

import llvmlite.binding as llvm
from llvmlite import ir

from .types import I64, PTR, VOID

# A spin-wait hint where the host has one: x86's pause frees the core's shared resources
# for its sibling thread while this one polls.
_PAUSE = llvm.get_process_triple().startswith(("x86_64", "i386", "i686"))


def add_chunk_loop(module, kernel_fn):
    n_buf = len(kernel_fn.args) - 3
    fn = ir.Function(module, ir.FunctionType(I64, [PTR, I64, I64] + [PTR] * n_buf),
                     "dloop_chunks")
    job, limit, n = fn.args[:3]
    bufs = list(fn.args[3:])
    entry, claim, run, done = (fn.append_basic_block(name) for name in
                               ("entry", "claim", "run", "done"))
    b = ir.IRBuilder(entry)
    inside = b.gep(job, [I64(3)], source_etype=I64)
    b.atomic_rmw("add", inside, I64(1), "seq_cst")     # before any claim
    chunk = b.load(b.gep(job, [I64(1)], source_etype=I64), typ=I64)
    b.branch(claim)

    b.position_at_end(claim)
    ran = b.phi(I64)
    elements = b.phi(I64)
    ran.add_incoming(I64(0), entry)
    elements.add_incoming(I64(0), entry)
    cancelled = b.load_atomic(b.gep(job, [I64(2)], source_etype=I64), "monotonic", 8,
                              typ=I64)
    stop = b.or_(b.icmp_signed(">=", ran, limit), b.icmp_signed("!=", cancelled, I64(0)))
    b.cbranch(stop, done, run)

    b.position_at_end(run)
    # acq_rel: a claim is ordered after this call's entry count, for whoever claims after
    # it (the launching thread's await_idle then sees the call inside); and after the
    # claims before it, so that a call entering late finds none left.
    start = b.atomic_rmw("add", job, chunk, "acq_rel")
    past = b.icmp_signed(">=", start, n)
    body = fn.append_basic_block("body")
    b.cbranch(past, done, body)

    b.position_at_end(body)
    end = b.add(start, chunk)
    end = b.select(b.icmp_signed("<", end, n), end, n)
    b.call(kernel_fn, [start, end, n] + bufs)
    ran.add_incoming(b.add(ran, I64(1)), body)
    elements.add_incoming(b.add(elements, b.sub(end, start)), body)
    b.branch(claim)

    b.position_at_end(done)
    b.atomic_rmw("sub", inside, I64(1), "release")     # after the last chunk's writes
    b.ret(elements)         # both ways here pass through `claim`, where it is defined
    _add_await_idle(module)
    return fn


def _add_await_idle(module):
    fn = ir.Function(module, ir.FunctionType(I64, [PTR, I64]), "dloop_await_idle")
    job, spins = fn.args
    entry, poll, wait, idle, timeout = (fn.append_basic_block(name) for name in
                                        ("entry", "poll", "wait", "idle", "timeout"))
    b = ir.IRBuilder(entry)
    inside = b.gep(job, [I64(3)], source_etype=I64)
    b.branch(poll)
    b.position_at_end(poll)
    k = b.phi(I64)
    k.add_incoming(I64(0), entry)
    calls = b.load_atomic(inside, "acquire", 8, typ=I64)
    b.cbranch(b.icmp_signed("==", calls, I64(0)), idle, wait)
    b.position_at_end(wait)
    if _PAUSE:
        b.call(ir.Function(module, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause"), [])
    polled = b.add(k, I64(1))
    k.add_incoming(polled, wait)
    b.cbranch(b.icmp_signed("<", polled, spins), poll, timeout)
    b.position_at_end(idle)
    b.ret(I64(1))
    b.position_at_end(timeout)
    b.ret(I64(0))
