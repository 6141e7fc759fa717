"""STAGE 4 — scheduling: a graph becomes a list of steps. Consecutive fusable ops of one
element shape form a kernel step; host ops (reductions, reshapes) run between kernels.

A roll reads its operand as a finished array, so a roll of a value computed in the kernel
ends the kernel there. Where that value is a short elementwise expression, the roll moves
onto the expression's own operands instead (roll(0.2 * g) = 0.2 * roll(g): elementwise ops
commute with a permutation, bit for bit), and one kernel does the work of two."""

from collections import Counter
from dataclasses import dataclass, field

from ..ir import prims
from ..ir.graph import Op, Var
from .lower import table_operand

# Elementwise ops a roll may be moved through, per roll: each is computed again, rolled.
MAX_REPLAYED = 8


@dataclass(eq=False)
class KernelStep:
    name: str
    shape: tuple
    ops: list
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)


@dataclass(eq=False)
class HostStep:
    op: object


@dataclass(eq=False)
class Program:
    inputs: list
    outputs: list
    consts: dict
    steps: list
    dead_after: list    # per step: the values no later step reads (freed after it)


def fusion_shape(op):
    if op.prim.kind == "loop":
        return tuple(op.params["info"].shape)
    return tuple(op.outputs[0].aval.shape)


def schedule(graph, consts, name="f", split_sweeps=False):
    """split_sweeps: a loop's reverse sweep starts a kernel of its own, where it would join
    the kernel that tapes the loop (a device with a budget of loop passes per thread, which
    the two sweeps in one thread would share)."""
    steps, group = [], None
    for op in _rolls_moved_to_operands(graph):
        if not op.prim.fusable or _complex(op):
            group = None
            steps.append(HostStep(op))
            continue
        shape = fusion_shape(op)
        if group is None or group.shape != shape or \
                _needs_inputs_made_in(group, op, split_sweeps):
            group = KernelStep(f"{name}_k{len(steps)}", shape, [])
            steps.append(group)
        group.ops.append(op)
        if op.prim is prims.loop_bwd_p and op.params["wrt"].tables:
            group = None      # its table cotangents are whole arrays only once it has run
    _wire(steps, graph)
    return Program(graph.inputs, graph.outputs, consts, steps, _dead_after(steps, graph))


def _rolls_moved_to_operands(graph):
    """graph.ops, with each roll of a short elementwise expression rewritten as that
    expression of rolled operands (the module's docstring); ops left unused are dropped."""
    made = {o: op for op in graph.ops for o in op.outputs}
    ops = []
    for op in graph.ops:
        replayed = _roll_through(op, made) if op.prim is prims.roll_p else None
        ops.extend(replayed or [op])
    if len(ops) == len(graph.ops):
        return graph.ops
    uses = Counter(x for op in ops for x in op.inputs if isinstance(x, Var))
    uses.update(o for o in graph.outputs if isinstance(o, Var))
    kept = []
    for op in reversed(ops):
        if op.prim.kind == "elementwise" and not any(uses[o] for o in op.outputs):
            uses.subtract(x for x in op.inputs if isinstance(x, Var))
            continue
        kept.append(op)
    return kept[::-1]


def _roll_through(roll, made):
    """The ops computing roll's output from rolled operands of the elementwise expression it
    reads, or None where the expression is not one (or too long)."""
    shape, new, rolled, replayed = roll.outputs[0].aval.shape, [], {}, []

    def is_expression(x):
        op = made.get(x)
        return op is not None and op.prim.kind == "elementwise" and len(op.outputs) == 1 \
            and not _complex(op)

    def of(x, out=None):
        if not isinstance(x, Var) or x.aval.shape == ():
            return x                          # a scalar: the same at every element
        if x.aval.shape != shape:
            raise _Unmovable
        if x not in rolled:
            if is_expression(x):
                replayed.append(x)
                if len(replayed) > MAX_REPLAYED:
                    raise _Unmovable
                op = made[x]
                ins = [of(i) for i in op.inputs]
                y = out or Var(x.aval)
                new.append(Op(op.prim, ins, [y], op.params, op.src))
            else:
                y = out or Var(x.aval)
                new.append(Op(prims.roll_p, [x], [y], roll.params, roll.src))
            rolled[x] = y
        return rolled[x]

    if not is_expression(roll.inputs[0]):
        return None
    try:
        of(roll.inputs[0], out=roll.outputs[0])
    except _Unmovable:
        return None
    return new


class _Unmovable(Exception):
    pass


def _complex(op):
    """Kernels compute in real dtypes only: an op that reads or makes a complex value runs as
    a host step, through the array library (per-element loop bodies refuse complex values
    while tracing, so no loop op meets one)."""
    return any(x.aval.dtype.kind == "c" for x in (*op.inputs, *op.outputs))


def _needs_inputs_made_in(group, op, split_sweeps=False):
    """Whether op reads, as a finished array, a value the group computes: a gathered table
    (a kernel holds one element of each value, not the whole array), a taped loop's bounds
    (adstacks are sized from them when the kernel starts), or with split_sweeps a reverse
    sweep's tape. Such an op starts a new kernel."""
    made = {o for g in group.ops for o in g.outputs}
    whole = [x for pos, x in enumerate(op.inputs) if table_operand(op, pos)]
    if op.prim is prims.loop_tape_p:
        whole += op.inputs[:op.params["info"].n_bounds]
    elif split_sweeps and op.prim is prims.loop_bwd_p:
        whole.append(op.inputs[0])
    return any(x in made for x in whole)


def _wire(steps, graph):
    used_later = {o for o in graph.outputs if isinstance(o, Var)}
    for step in reversed(steps):
        ops = step.ops if isinstance(step, KernelStep) else [step.op]
        made = {o for op in ops for o in op.outputs}
        reads = [x for op in ops for x in op.inputs if isinstance(x, Var)]
        if isinstance(step, KernelStep):
            step.inputs = list(dict.fromkeys(x for x in reads if x not in made))
            step.outputs = [o for op in ops for o in op.outputs if o in used_later]
        used_later.update(reads)


def _dead_after(steps, graph):
    last = {}
    for k, step in enumerate(steps):
        reads = step.inputs if isinstance(step, KernelStep) else step.op.inputs
        for x in reads:
            if isinstance(x, Var):
                last[x] = k
    for o in graph.outputs:
        if isinstance(o, Var):
            last[o] = len(steps)
    dead = [[] for _ in steps]
    for v, k in last.items():
        if k < len(steps):
            dead[k].append(v)
    return dead
