"""Running collective loops: the host drives the loop and runs the body's program (kernels
and host steps) once per iteration; the taped form saves each iteration's carries in the
adstack heap; the reverse form runs the body's VJP program on them, last iteration first.
The body programs were compiled with the enclosing program (runtime/program.py): `bodies`
holds them by name."""

import numpy as np

from ..config import config
from ..errors import AdstackOverflowError, DloopMemoryError
from ..ir import prims

RUNNERS = {}


class CollectiveTape:
    """A collective loop's token at run time: one heap region per saved carry."""
    __slots__ = ("trips", "regions", "lease")

    def __init__(self, lease):
        self.trips, self.regions, self.lease = 0, [], lease


def _iterations(execution, bodies, info, bounds, carries, invs, each):
    """Run the loop; each(i, carries) is called before every iteration's body."""
    body = bodies["body"]
    if info.kind == "fori":
        lo, hi = (int(execution.backend.to_numpy(execution.host(b))) for b in bounds)
        for i in range(lo, hi):
            index = np.asarray(i, dtype=info.index_dtype)
            each(index, carries)
            carries = execution.run_body(body, [index] + carries + invs)
        return carries
    cond = bodies["cond"]
    while bool(execution.backend.to_numpy(execution.host(
            execution.run_body(cond, carries + invs)[0]))):
        each(None, carries)
        carries = execution.run_body(body, carries + invs)
    return carries


def run_cloop(execution, bodies, op, value):
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs([value(x) for x in op.inputs])
    return _iterations(execution, bodies, info, bounds, list(carries), list(invs),
                       lambda i, c: None)


def run_cloop_tape(execution, bodies, op, value):
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs([value(x) for x in op.inputs])
    lease = execution.heap_lease()
    tape = CollectiveTape(lease)
    be, heap = execution.backend, execution.heap
    step_bytes = sum(int(np.prod(np.shape(c), dtype=object)) * np.dtype(c.dtype).itemsize
                     for c in carries)
    if info.kind == "fori":
        lo, hi = (int(be.to_numpy(execution.host(b))) for b in bounds)
        _check_tape(max(hi - lo, 0), step_bytes, info)

    def save(i, cs):
        _check_tape(tape.trips + 1, step_bytes, info)
        saved = []
        for c in cs:
            c = execution.host(c)
            dtype = np.dtype(c.dtype)
            region = lease.alloc(c.size * execution._slot_bytes(dtype), dtype, info.src)
            be.heap_store(heap.view(region), c)
            saved.append((region, tuple(c.shape)))
        tape.regions.append(saved)
        tape.trips += 1

    outs = _iterations(execution, bodies, info, bounds, list(carries), list(invs), save)
    return outs + [tape]


def _check_tape(trips, step_bytes, info):
    """Refuse a tape before it is written: a fixed adstack_capacity applies to collective
    tapes as to per-element stacks, and a tape larger than max_adstack_bytes is refused up
    front (exact integer arithmetic), not after hours of steps."""
    capacity = config.adstack_capacity
    if capacity is not None and trips > capacity:
        raise AdstackOverflowError(
            f"adstack overflow in this loop: its tape holds at most {capacity} steps "
            f"(adstack_capacity), but the loop runs {trips} or more; the gradient was not "
            f"computed. To fix: raise dloop.config.adstack_capacity to at least {trips}, or set "
            "it to None so that dloop sizes every tape exactly", info.src)
    if trips * step_bytes > config.max_adstack_bytes:
        raise DloopMemoryError(
            f"the tape of this loop needs {trips:,} steps x {step_bytes:,} bytes = "
            f"{trips * step_bytes:,} bytes, more than max_adstack_bytes = "
            f"{config.max_adstack_bytes:,}. Fewer steps or smaller carries reduce it; raise "
            "dloop.config.max_adstack_bytes if the memory is there", info.src)


def run_cloop_bwd(execution, bodies, op, value):
    info, wrt, vjp = op.params["info"], op.params["wrt"], op.params["body_vjp"]
    args = [value(x) for x in op.inputs]
    tape, rest = args[0], args[1:]
    bounds, bars, invs = info.split_inputs(rest)
    program = bodies["vjp"]
    be, heap = execution.backend, execution.heap
    carry_bars = [bars[k] for k in vjp.float_carries]
    inv_bars = [be.xp.zeros_like(execution.host(invs[k])) for k in vjp.invariants]
    lo = int(be.to_numpy(execution.host(bounds[0]))) if info.kind == "fori" else 0
    nf = len(vjp.float_carries)
    for t in reversed(range(tape.trips)):
        saved = [be.heap_load(heap.view(region)).reshape(shape)
                 for region, shape in tape.regions[t]]
        prefix = [np.asarray(lo + t, dtype=info.index_dtype)] if info.kind == "fori" else []
        mark = execution.heap_mark()
        outs = execution.run_body(program, prefix + saved + list(invs) + carry_bars)
        execution.sync()               # the step's kernels read tapes freed below
        execution.heap_reset(mark)     # tapes of loops inside the body die with the step
        grads = outs[info.n_carry:]
        carry_bars = grads[:nf]
        inv_bars = [acc + execution.host(g) for acc, g in zip(inv_bars, grads[nf:])]
    final = dict(zip(vjp.float_carries, carry_bars))
    return [final[k] for k in wrt.carries] + inv_bars


RUNNERS[prims.cloop_p] = run_cloop
RUNNERS[prims.cloop_tape_p] = run_cloop_tape
RUNNERS[prims.cloop_bwd_p] = run_cloop_bwd
