"""Running collective loops: the host drives the loop and runs the body's program (kernels
and host steps) once per iteration; the taped form saves each iteration's carries in the
adstack heap; the reverse form runs the body's VJP program on them, last iteration first.
The body programs were compiled with the enclosing program (runtime/program.py): `bodies`
holds them by name. Where the backend has a step driver and the body qualifies
(runtime/steps.py), a fori loop's steps, and the reverse steps of a tape saved whole, run
natively instead."""

import numpy as np

from ..config import config
from ..errors import AdstackOverflowError, DloopMemoryError
from ..ir import prims
from . import steps

RUNNERS = {}


class CollectiveTape:
    """A collective loop's token at run time. Saved step by step: `regions`, per step,
    (heap region, first element, shape) per carry. Saved by a step driver: `whole`, one region
    per carry holding every step's value, so a driver can run the reverse steps too."""
    __slots__ = ("trips", "regions", "lease", "whole", "shapes")

    def __init__(self, lease):
        self.trips, self.regions, self.lease, self.whole, self.shapes = 0, [], lease, None, ()

    def step(self, t):
        """(heap region, first element, shape) per carry saved at step t."""
        if self.whole is None:
            return self.regions[t]
        return [(region, t * int(np.prod(shape, dtype=np.int64)), shape)
                for region, shape in zip(self.whole, self.shapes)]


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
    entry = None if info.kind != "fori" else steps.driver(
        execution, bodies["body"], "forward", info.src, 1, len(carries), len(invs))
    if entry is not None:
        lo, hi = (int(execution.backend.to_numpy(execution.host(b))) for b in bounds)
        if hi > lo:
            return _driven_forward(execution, entry, info, lo, hi, carries, invs, ())
    return _iterations(execution, bodies, info, bounds, list(carries), list(invs),
                       lambda i, c: None)


def _driven_forward(execution, entry, info, lo, hi, carries, invs, tape_bases):
    plan = entry[0]
    values = [plan.index_value(info.index_dtype)] + [execution.queued(c) for c in carries] + \
        [execution.queued(v) for v in invs]
    owned = [True] * (1 + len(carries)) + [False] * len(invs)
    arrays = steps.run(execution.backend, entry, values, owned, hi - lo, lo,
                       list(tape_bases) + [0] * (len(carries) - len(tape_bases)))
    return [arrays[s] for s in plan.inputs[1:1 + len(carries)]]


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
        entry = steps.driver(execution, bodies["body"], "forward_taped", info.src, 1,
                             len(carries), len(invs))
        if entry is not None and hi > lo:
            return _driven_tape(execution, entry, info, lo, hi, carries, invs, tape)

    def save(i, cs):
        _check_tape(tape.trips + 1, step_bytes, info)
        saved = []
        for c in cs:
            c = execution.queued(c)
            dtype = np.dtype(c.dtype)
            region = lease.alloc(c.size * execution._slot_bytes(dtype), dtype, info.src)
            be.heap_store(heap.view(region), c)
            saved.append((region, 0, tuple(c.shape)))
        tape.regions.append(saved)
        tape.trips += 1

    outs = _iterations(execution, bodies, info, bounds, list(carries), list(invs), save)
    return outs + [tape]


def _driven_tape(execution, entry, info, lo, hi, carries, invs, tape):
    """The taped forward sweep by the step driver: one region per carry for all steps."""
    heap, trips = execution.heap, hi - lo
    carries = [execution.queued(c) for c in carries]
    whole = []
    for c in carries:
        dtype = np.dtype(c.dtype)
        whole.append(tape.lease.alloc(trips * c.size * execution._slot_bytes(dtype), dtype,
                                      info.src))
    # Addresses are taken after every allocation: a growing heap moves its buffer.
    bases = [execution.backend.address(heap.view(region)) for region in whole]
    outs = _driven_forward(execution, entry, info, lo, hi, carries, invs, bases)
    tape.trips, tape.whole, tape.shapes = trips, whole, [tuple(c.shape) for c in carries]
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
    # C order, whatever the invariant's: step drivers add flat cotangents into them by address
    # (zeros_like of a transposed invariant was F-ordered, and its gradient came back
    # transposed).
    inv_bars = [be.zeros(tuple(invs[k].shape), np.dtype(invs[k].dtype)) for k in vjp.invariants]
    lo = int(be.to_numpy(execution.host(bounds[0]))) if info.kind == "fori" else 0
    nf = len(vjp.float_carries)
    prefix = 1 if info.kind == "fori" else 0
    entry = None if tape.whole is None or not tape.trips else steps.driver(
        execution, program, "reverse", info.src, prefix, info.n_carry, len(invs))
    if entry is not None:
        plan = entry[0]
        values = [plan.index_value(info.index_dtype)] * prefix + \
            [None] * info.n_carry + \
            [execution.queued(v) for v in invs] + [execution.queued(b) for b in carry_bars]
        owned = [True] * (prefix + info.n_carry) + [False] * len(invs) + [True] * nf
        arrays = steps.run(be, entry, values, owned, tape.trips, lo,
                           [be.address(heap.view(region)) for region in tape.whole],
                           inv_bars, reverse=True)
        carry_bars = [arrays[s] for s in plan.inputs[prefix + info.n_carry + len(invs):]]
    else:
        for t in reversed(range(tape.trips)):
            saved = [_saved(be, heap.view(region), start, shape)
                     for region, start, shape in tape.step(t)]
            index = [np.asarray(lo + t, dtype=info.index_dtype)] if prefix else []
            mark = execution.heap_mark()
            outs = execution.run_body(program, index + saved + list(invs) + carry_bars)
            if execution.heap_mark() != mark:
                execution.sync()           # the step's kernels read tapes freed below
                execution.heap_reset(mark)  # tapes of loops inside the body die with the step
            # The program returns the cotangents only (program.py).
            carry_bars = outs[:nf]
            inv_bars = [acc + execution.queued(g) for acc, g in zip(inv_bars, outs[nf:])]
    final = dict(zip(vjp.float_carries, carry_bars))
    return [final[k] for k in wrt.carries] + inv_bars


def _saved(be, view, start, shape):
    size = int(np.prod(shape, dtype=np.int64))
    if start or size != view.size:
        view = view[start:start + size]
    return be.heap_load(view).reshape(shape)


RUNNERS[prims.cloop_p] = run_cloop
RUNNERS[prims.cloop_tape_p] = run_cloop_tape
RUNNERS[prims.cloop_bwd_p] = run_cloop_bwd
