"""Collective loops compiled whole: a body program made only of kernels is run for many
steps by one native call (a backend's step driver) instead of one Python round per step.

The plan here is backend-neutral: every value the body touches gets a slot (a buffer
allocated once per run), each kernel launch becomes a call on slots, and a step ends by
copying the new carries into the carry slots. A backend turns a plan into a driver
(`Backend.step_driver`); one that has none, or a body that does not qualify (a host step, an
adstack to size, a launch large enough to want threads), runs host-driven as before, and
the debug dump says why. The cpu backend's driver is LLVM IR (backends/cpu/steps.py), the
cuda backend's a Python loop of launches and copies queued on its stream
(backends/cuda/steps.py)."""

from dataclasses import dataclass

import numpy as np

from ..config import config
from ..ir.graph import Var
from . import faults as fault_check

@dataclass
class StepPlan:
    slots: list            # Var per slot
    calls: list            # (CompiledKernel, n_threads, [slot per buffer; None: faults])
    inputs: list           # slot of each program input
    outputs: list          # slot of each program output
    nbytes: list           # bytes per slot
    used: frozenset        # the slots some kernel has a buffer for

    def index_value(self, dtype):
        """The value for a fori loop's index slot: None where no kernel reads the index (the
        drivers read each step's index elsewhere), so nothing is copied to the device."""
        return np.zeros((), dtype) if self.inputs[0] in self.used else None


def plan_steps(executable, src, max_threads=None):
    """The StepPlan of a body program, or None (with the reason in the debug dump).
    max_threads: the largest launch the backend's driver runs (None: any)."""
    reason = _unsuitable(executable, max_threads)
    if reason is not None:
        if config.debug:
            print(f"dloop: the collective loop at {src} runs host-driven: {reason}")
        return None
    program = executable.program
    slots, index = [], {}

    def slot(var):
        if var not in index:
            index[var] = len(slots)
            slots.append(var)
        return index[var]

    inputs = [slot(v) for v in program.inputs]
    calls = []
    for _, plan, _ in executable.sequence:
        kernel = plan.main.kernel
        refs = [None if spec.kind == "faults" else slot(plan.vars[spec.key])
                for spec in kernel.buffers]
        calls.append((plan.main, plan.n_threads, refs))
    outputs = [slot(v) for v in program.outputs]
    nbytes = [int(np.prod(v.aval.shape, dtype=np.int64)) * v.aval.dtype.itemsize
              for v in slots]
    used = frozenset(r for _, _, refs in calls for r in refs if r is not None)
    return StepPlan(slots, calls, inputs, outputs, nbytes, used)


def carry_pairs(plan, mode, n_index, n_carry, n_inv):
    """(slot read, slot written) per carry (per carry cotangent in reverse), and whether a
    driver may point the writes elsewhere (into the tape's next row, or the other buffer of
    a swapped pair): each pair's written slot is its own, no input's, and no other output's
    (a reverse body whose carry cotangent is also an invariant's, as sin(u + p) gives for u
    and p: the invariant's is accumulated from the slot as written)."""
    ins = plan.inputs
    read = ins[n_index + n_carry + n_inv:] if mode == "reverse" else \
        ins[n_index:n_index + n_carry]
    pairs = list(zip(read, plan.outputs))
    written = [o for _, o in pairs]
    others = set(plan.outputs[len(pairs):])
    return pairs, len(set(written)) == len(written) and not set(written) & (set(ins) | others)


def _unsuitable(executable, max_threads):
    program = executable.program
    if program.consts:
        return "its body holds constants"
    made = set()
    for host_op, plan, _ in executable.sequence:
        if host_op is not None:
            return f"its body has a host step ({host_op.prim.name})"
        if plan.nests or plan.counting or plan.external_tokens:
            return "its body sizes adstacks at every step"
        if plan.n_threads <= 0:
            return "it has an empty launch"
        if max_threads is not None and plan.n_threads >= max_threads:
            return f"its launches ({plan.n_threads:,} threads) are large enough for threads"
        for spec in plan.main.kernel.buffers:
            if spec.kind not in ("in", "out", "faults"):
                return f"its body has a '{spec.kind}' buffer"
            if spec.kind in ("in", "out") and plan.vars[spec.key].aval.dtype != spec.dtype:
                return "its body converts an input when it launches"
        made.update(v for v in plan.step.outputs)
    for v in program.outputs:
        if not isinstance(v, Var) or v not in made:
            return "its body returns a value no kernel of it computes"
    return None


# Steps per native call: Ctrl-C and faults are seen between calls.
CHUNK = 256


def driver(execution, body, mode, src, n_index, n_carry, n_inv):
    """(plan, native driver) for running `body` in `mode`, made once per body; None where
    the loop runs host-driven."""
    cache = body.step_drivers
    if mode not in cache:
        backend = execution.backend
        plan = plan_steps(body, src, backend.max_step_threads)
        native = None if plan is None else \
            backend.step_driver(plan, mode, n_index, n_carry, n_inv)
        cache[mode] = None if native is None else (plan, native)
    return cache[mode]


def run(backend, entry, values, owned, trips, index_base, tape_bases, accumulators=(),
        reverse=False):
    """Run steps 0 .. trips - 1 (last first in reverse). values: the body's inputs, the
    `owned` ones copied into slots the steps overwrite (carries). Returns the slot arrays
    (device arrays of the backend). A value None: the slot is not read (a reverse step's
    primal carries, which its kernels read in the tape)."""
    plan, native = entry
    arrays = [None] * len(plan.slots)
    for s, value, own in zip(plan.inputs, values, owned):
        if value is None:
            continue
        dtype = plan.slots[s].aval.dtype
        arrays[s] = backend.owned_copy(value, dtype) if own else backend.upload(value, dtype)
    for s, var in enumerate(plan.slots):
        if arrays[s] is None:
            arrays[s] = backend.empty(var.aval.shape, var.aval.dtype)
    faults = [None if compiled.faults_index is None else
              backend.zeros(1 + len(compiled.kernel.faults), np.int64)
              for compiled, _, _ in plan.calls]
    table = np.array([backend.address(a) for a in arrays] + list(tape_bases) +
                     [backend.address(a) for a in accumulators] +
                     [0 if f is None else backend.address(f) for f in faults] +
                     list(native.entries) + [trips], dtype=np.uint64)
    chunks = [(t, min(t + CHUNK, trips)) for t in range(0, trips, CHUNK)]
    for first, last in reversed(chunks) if reverse else chunks:
        native.call(first, last, index_base, table)
        for (compiled, _, _), flags in zip(plan.calls, faults):
            if compiled.faults_index is not None:
                fault_check.check(compiled.kernel, backend.to_numpy(flags), {})
    return arrays
