"""STAGE 5 — cpu: a kernel's chunk loop, in the kernel's own module.

    i64 dloop_chunks(ptr job, i64 limit, i64 n_threads, ptr buf0, ...)

claims chunks of the launch from `job` = [next start, chunk size, cancelled] (an int64
array the launching thread shares with the pool's workers) by an atomic add, and runs
dloop_kernel on each, until none is left, `cancelled` is set or `limit` chunks ran;
returns how many elements it ran. A pool worker makes one call for the whole launch: a
Python loop around one call per chunk takes the GIL between chunks, and two threads taking
turns on it lost about 10% of W2's launch on two cores. The launching thread runs one
chunk per call, so that Ctrl-C reaches it between chunks."""

from llvmlite import ir

from .types import I64, PTR


def add_chunk_loop(module, kernel_fn):
    n_buf = len(kernel_fn.args) - 3
    fn = ir.Function(module, ir.FunctionType(I64, [PTR, I64, I64] + [PTR] * n_buf),
                     "dloop_chunks")
    job, limit, n = fn.args[:3]
    bufs = list(fn.args[3:])
    entry, claim, run, done = (fn.append_basic_block(name) for name in
                               ("entry", "claim", "run", "done"))
    b = ir.IRBuilder(entry)
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
    start = b.atomic_rmw("add", job, chunk, "monotonic")
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
    b.ret(elements)         # both ways here pass through `claim`, where it is defined
    return fn
