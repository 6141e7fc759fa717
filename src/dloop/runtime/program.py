"""The compile stage: a scheduled program becomes an Executable for one backend, once.

Every kernel step is lowered to kernel IR, verified, and compiled by the backend (which
legalizes it for its caps first); its capacity expressions are derived; a counting kernel is
built where a loop has none. Collective loops' body programs are scheduled and compiled the
same way, recursively. After this the runtime only sizes, binds, launches and checks. With
config.debug, each stage prints what it made and how long it took."""

import time
from dataclasses import dataclass, field

import numpy as np

from ..adstack import capacity
from ..config import config
from ..ir import prims
from ..ir.graph import Graph, Var
from ..kernel import kir
from ..kernel.int32_range import guard_int32_range
from ..kernel.loop_budget import guard_loop_passes
from ..kernel.lower import lower_group, table_operand
from ..kernel.schedule import HostStep, KernelStep, schedule
from ..kernel.verify import check_kernel


# Called with every kernel before it is compiled: tests use it to put each kernel through
# a renderer whose device is absent (CUDA C through NVRTC on a machine without a GPU).
KERNEL_HOOKS = []


@dataclass
class Nest:
    token: object          # the tape output Var
    exprs: dict            # loop_id -> capacity Expr, or None where trips are counted
    infos: dict            # loop_id -> LoopInfo
    top: int = None        # the taped loop's id; the others are inside its body


@dataclass
class CompiledKernel:
    kernel: object         # the kernel IR the backend compiled
    artifact: object

    def __post_init__(self):
        # Looked up at every launch: found once here.
        self.faults_index = self.kernel.buffer_index("faults") if self.kernel.faults else None
        self.order_index = self.kernel.buffer_index("order")


@dataclass
class KernelPlan:
    step: object
    main: CompiledKernel
    nests: list
    counting: CompiledKernel = None          # counts trips of the loops without expressions
    external_tokens: list = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    n_threads: int = 0
    seen: object = None                      # the last count (runtime/guess.py)
    guessable: bool = False                  # whether counts may be guessed (guess.py)
    sizing_memo: object = None               # the last call's sizing (sizing_memo.py)
    keeps_sizing: bool = True                # False in a program run once (a vjp's)


@dataclass
class Executable:
    program: object
    backend: object
    kernels: dict          # id(step) -> KernelPlan
    bodies: dict           # id(collective op) -> {"body" | "cond" | "vjp": Executable}
    # mode -> (plan, native driver) or None, made at a collective body's first run
    # (runtime/steps.py)
    step_drivers: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        # What the runtime walks at each run: (host op or None, kernel plan or None, the
        # values that die after the step). A collective body runs it once per iteration.
        program = self.program
        self.sequence = [
            (step.op, None, program.dead_after[k]) if isinstance(step, HostStep)
            else (None, self.kernels[id(step)], program.dead_after[k])
            for k, step in enumerate(program.steps)]


def compile_program(program, backend, timings=None, once=False, body=False):
    """once: the program runs once (a vjp's halves): its top-level launches keep no sizing
    for a next call, which would only push other programs' out of the shared budget
    (sizing_memo.py). Collective bodies, run at every step, still keep theirs. body: the
    program is a collective loop's body."""
    timings = {} if timings is None else timings
    kernels, bodies = {}, {}
    flow = _dataflow(program)
    by_slot = _kept_in_slot_order(flow) if backend.caps.order_elements else set()
    layouts_by_slot = _slot_layouts(program, flow) if backend.caps.slot_layouts else set()
    for k, step in enumerate(program.steps):
        if isinstance(step, HostStep):
            if step.op.prim.kind == "collective":
                bodies[id(step.op)] = _compile_bodies(step.op, backend, timings)
        else:
            made = set(step.outputs)
            kernels[id(step)] = _plan(step, backend, timings, by_slot,
                                      step in layouts_by_slot, body)
            kernels[id(step)].keeps_sizing = not once
            # Trips _plan added for the next guess: no later step reads them
            program.dead_after[k] += [o for o in step.outputs if o not in made]
    if config.debug and timings:
        print("dloop: compile times " + ", ".join(f"{k} {v * 1e3:.1f} ms"
                                                  for k, v in timings.items()))
    return Executable(program, backend, kernels, bodies)


def _compile_bodies(op, backend, timings):
    info = op.params["info"]
    graphs = {"body": info.body}
    if info.kind == "while":
        graphs["cond"] = info.cond
    if op.prim is prims.cloop_bwd_p:
        vjp = op.params["body_vjp"].graph
        # The reverse steps read only the cotangents: the body's recomputed carries would be
        # stored at every step for nothing (kernels drop what no output needs).
        graphs = {"vjp": Graph(vjp.inputs, vjp.outputs[info.n_carry:], vjp.ops)}
    return {name: compile_program(_timed(timings, "schedule", schedule, graph, {}), backend,
                                  timings, body=True)
            for name, graph in graphs.items()}


def _timed(timings, stage, fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start
    return out


def _kernel(backend, timings, kernel):
    if not backend.caps.index64:
        guard_int32_range(kernel)
    if backend.caps.max_loop_trips is not None:
        guard_loop_passes(kernel, backend.caps.max_loop_trips)
    check_kernel(kernel)
    for hook in KERNEL_HOOKS:
        hook(kernel)
    if config.debug:
        print(f"dloop: kernel IR\n{kernel}")
    return CompiledKernel(kernel, _timed(timings, backend.name, backend.compile, kernel))


def _plan(step, backend, timings, by_slot, stacks_by_slot, body=False):
    known = set(step.inputs)
    nests = [Nest(op.outputs[-1], _launch_known(capacity.capacities(op), known),
                  capacity.nest_infos(op.params["info"]), op.params["info"].loop_id)
             for op in step.ops if op.prim is prims.loop_tape_p]
    to_count = tuple(sorted(loop_id for nest in nests for loop_id, e in nest.exprs.items()
                            if e is None))
    # Guessed stacks must be filled, and so checked, by this kernel alone: not those of
    # loops inside a taped loop's body (pushed in the reverse kernel, which re-runs the
    # body). A kernel that also reverses them (a grad's sweeps joined in one kernel) reads
    # zeros past a short stack, and its launch is waited for before anything uses its
    # results (guess.py). Collective bodies' such kernels still count, as they always did:
    # a body's kernels run at every step, and guessing there was never tried.
    reverses = any(op.prim is prims.loop_bwd_p for op in step.ops)
    guessable = bool(to_count) and set(to_count) <= {nest.top for nest in nests} and \
        not (reverses and body)
    if guessable:
        # The trips of a launch that fit are the next guess: written out even where no
        # later step reads them (the kernel reverses its own tapes).
        step.outputs = step.outputs + [n.token for n in nests if n.token not in step.outputs]
    kernel = _timed(timings, "lower", lower_group, step.name, step.ops, step.inputs,
                    step.outputs, step.shape)
    kernel.tape_lanes = backend.caps.tape_lanes
    _index_by_slot(kernel, {v.id for v in by_slot})
    if stacks_by_slot and kernel.stacks:
        _slot(kernel)
        kernel.stacks_by_slot = True
    external_tokens = _reversed_tapes(step)
    # Trip counts are known at launch wherever adstacks are sized (own nests) or were sized
    # (the tapes of an earlier kernel): there the elements can run in order of work.
    if backend.caps.order_elements and (nests or external_tokens):
        kernel.buffers.append(kir.BufferSpec("order", np.dtype(np.int64)))
    plan = KernelPlan(
        step, _kernel(backend, timings, kernel), nests,
        external_tokens=external_tokens,
        vars={v.id: v for v in step.inputs + step.outputs},
        n_threads=int(np.prod(step.shape, dtype=np.int64)))
    if to_count:
        counting = _timed(timings, "lower", lower_group, step.name + "_count", step.ops,
                          step.inputs, [], step.shape, count_loops=to_count)
        plan.counting = _kernel(backend, timings, counting)
        plan.guessable = guessable
    return plan


def _kept_in_slot_order(flow):
    """The values a kernel that orders its elements (it tapes loops) passes only to kernels
    that run the same order: those whose loops' reverse reads its tapes and that tape none of
    their own (runtime/execute.py reuses the order there). They stay in slot order, written
    and read at the thread's slot: a store to element order[t] scatters, and on an H100 W1's
    two kernels at 10^7 elements took 10.1 ms writing three arrays that way against 6.4 ms
    writing them at the slot (6.3 for the hand-written bound). flow: _dataflow's."""
    made_by, readers, finished = flow
    kept = set()
    for var, step in made_by.items():
        if var in finished or not _tapes(step) or tuple(var.aval.shape) != tuple(step.shape):
            continue
        if all(isinstance(r, KernelStep) and _runs_order_of(r, step, made_by)
               and not _read_whole(r, var) for r in readers.get(var, [None])):
            kept.add(var)
    return kept


def _slot_layouts(program, flow):
    """Kernel steps whose stacks read their start and capacity at the slot: a taping kernel
    that reverses no other kernel's tapes, with the kernels that reverse its tapes in its
    order, where nothing else reads them (its layouts are then only ever read in its order).
    The layout then skips its scatters to element order (caps.slot_layouts), and the kernels
    their gathers: on the H100 at 10^7 elements, two scatters of 0.7 ms each. flow:
    _dataflow's."""
    made_by, readers, finished = flow
    chosen = set()
    for step in program.steps:
        if not isinstance(step, KernelStep) or not _tapes(step) or _reversed_tapes(step):
            continue
        tokens = [o for o in step.outputs if o.aval.is_tape]
        reversing = [r for t in tokens for r in readers.get(t, [])]
        if not any(t in finished for t in tokens) and all(
                isinstance(r, KernelStep) and _runs_order_of(r, step, made_by)
                for r in reversing):
            chosen.add(step)
            chosen.update(reversing)
    return chosen


def _dataflow(program):
    """(the kernel step making each value, the steps reading each value, the program's
    outputs)."""
    made_by = {o: step for step in program.steps if isinstance(step, KernelStep)
               for o in step.outputs}
    readers = {}
    for step in program.steps:
        for x in step.inputs if isinstance(step, KernelStep) else step.op.inputs:
            readers.setdefault(x, []).append(step)
    return made_by, readers, {o for o in program.outputs if isinstance(o, Var)}


def _tapes(step):
    return any(op.prim is prims.loop_tape_p for op in step.ops)


def _reversed_tapes(step):
    """The tapes of other kernels that step's loops reverse."""
    made = {o for op in step.ops for o in op.outputs}
    return [op.inputs[0] for op in step.ops
            if op.prim is prims.loop_bwd_p and op.inputs[0] not in made]


def _runs_order_of(reader, step, made_by):
    """Whether `reader` runs the elements in `step`'s order: it tapes no loop, and every
    tape it reverses is one of step's."""
    if _tapes(reader) or tuple(reader.shape) != tuple(step.shape):
        return False
    tokens = _reversed_tapes(reader)
    return bool(tokens) and all(made_by.get(t) is step for t in tokens)


def _read_whole(step, var):
    return any(x is var and table_operand(op, pos)
               for op in step.ops for pos, x in enumerate(op.inputs))


def _index_by_slot(kernel, ids):
    """Loads and stores of the kernel's arrays among `ids` (value ids kept in slot order)
    index the thread's slot instead of its element."""
    bufs = {k for k, b in enumerate(kernel.buffers) if b.kind in ("in", "out") and b.key in ids}
    if not bufs:
        return
    slot = _slot(kernel)
    for s in kir.statements(kernel.body):
        if isinstance(s, (kir.Load, kir.Store)) and s.buf in bufs:
            if s.index is not kernel.tid or getattr(s, "wrap", None) is not None:
                raise AssertionError(f"{kernel.name}: buffer {s.buf} is kept in slot "
                                     f"order but read or written at {s.index!r}")
            s.index = slot


def _slot(kernel):
    """The kernel's slot variable, made on first use."""
    if kernel.slot is None:
        kernel.slot = kir.KVar(np.int64)
    return kernel.slot


def _launch_known(exprs, known):
    """Expressions may read only arrays that exist when the kernel starts (its inputs);
    a loop whose expression reads a value made inside the kernel is counted instead."""
    return {loop_id: e if e is not None and e.vars() <= known else None
            for loop_id, e in exprs.items()}
