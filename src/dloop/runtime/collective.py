"""Running collective loops: the host drives the loop and runs the body's program (kernels
and host steps) once per iteration; the taped form saves each iteration's carries in the
adstack heap; the reverse form runs the body's VJP program on them, last iteration first."""

import numpy as np

from ..ir import prims
from ..kernel.schedule import schedule

RUNNERS = {}


def _programs(info, cache_key, graph):
    """A scheduled program per body graph, kept on the op's info for every later iteration."""
    cache = info.__dict__.setdefault("_programs", {})
    if cache_key not in cache:
        cache[cache_key] = schedule(graph, {})
    return cache[cache_key]


class CollectiveTape:
    """A collective loop's token at run time: one heap region per saved carry."""
    __slots__ = ("trips", "regions", "lease")

    def __init__(self, lease):
        self.trips, self.regions, self.lease = 0, [], lease


def _iterations(execution, info, bounds, carries, invs, each):
    """Run the loop; each(i, carries) is called before every iteration's body."""
    if info.kind == "fori":
        lo, hi = (int(np.asarray(b)) for b in bounds)
        body = _programs(info, "body", info.body)
        for i in range(lo, hi):
            index = np.asarray(i, dtype=info.index_dtype)
            each(index, carries)
            carries = execution.run(body, [index] + carries + invs)
        return carries
    cond = _programs(info, "cond", info.cond)
    body = _programs(info, "body", info.body)
    while bool(execution.run(cond, carries + invs)[0]):
        each(None, carries)
        carries = execution.run(body, carries + invs)
    return carries


def run_cloop(execution, op, env, value):
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs([value(x) for x in op.inputs])
    return _iterations(execution, info, bounds, list(carries), list(invs), lambda i, c: None)


def run_cloop_tape(execution, op, env, value):
    info = op.params["info"]
    bounds, carries, invs = info.split_inputs([value(x) for x in op.inputs])
    lease = execution.heap_lease()
    tape = CollectiveTape(lease)
    heap = execution.backend.heap

    def save(i, cs):
        saved = []
        for c in cs:
            c = np.asarray(c)
            region = lease.alloc(c.nbytes, c.dtype, info.src)
            heap.view(region)[:] = c.reshape(-1)
            saved.append((region, c.shape))
        tape.regions.append(saved)
        tape.trips += 1

    outs = _iterations(execution, info, bounds, list(carries), list(invs), save)
    return outs + [tape]


def run_cloop_bwd(execution, op, env, value):
    info, wrt, vjp = op.params["info"], op.params["wrt"], op.params["body_vjp"]
    args = [value(x) for x in op.inputs]
    tape, rest = args[0], args[1:]
    bounds, bars, invs = info.split_inputs(rest)
    program = _programs(info, ("vjp", id(vjp)), vjp.graph)
    heap = execution.backend.heap
    carry_bars = [bars[k] for k in vjp.float_carries]
    inv_bars = [np.zeros_like(np.asarray(invs[k])) for k in vjp.invariants]
    lo = int(np.asarray(bounds[0])) if info.kind == "fori" else 0
    nf = len(vjp.float_carries)
    for t in reversed(range(tape.trips)):
        saved = [heap.view(region).reshape(shape).copy() for region, shape in tape.regions[t]]
        prefix = [np.asarray(lo + t, dtype=info.index_dtype)] if info.kind == "fori" else []
        mark = execution.heap_mark()
        outs = execution.run(program, prefix + saved + list(invs) + carry_bars)
        execution.heap_reset(mark)     # tapes of loops inside the body die with the step
        grads = outs[info.n_carry:]
        carry_bars = grads[:nf]
        inv_bars = [acc + g for acc, g in zip(inv_bars, grads[nf:])]
    final = dict(zip(vjp.float_carries, carry_bars))
    return [final[k] for k in wrt.carries] + inv_bars


RUNNERS[prims.cloop_p] = run_cloop
RUNNERS[prims.cloop_tape_p] = run_cloop_tape
RUNNERS[prims.cloop_bwd_p] = run_cloop_bwd
