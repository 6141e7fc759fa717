"""Running a scheduled program: host steps through NumPy, kernel steps through a backend,
with adstacks sized at each launch that starts a taped loop and checked after every launch."""

import re
from dataclasses import dataclass

import numpy as np

from ..adstack import capacity
from ..adstack.layout import loop_layout
from ..config import config
from ..ir import prims
from ..ir.graph import Lit
from ..kernel.lower import lower_group
from ..kernel.schedule import HostStep
from . import faults as fault_check
from .collective import RUNNERS
from .host_ops import HOST_IMPLS


class TapeHandle:
    """A taped loop's token at run time: trips per element, and where its stacks live."""
    __slots__ = ("trips", "layouts", "lease")

    def __init__(self, trips, layouts, lease):
        self.trips, self.layouts, self.lease = trips, layouts, lease


@dataclass
class _Nest:
    token: object          # the tape output Var
    exprs: dict            # loop_id -> capacity Expr or None (count)
    infos: dict            # loop_id -> LoopInfo


class _KernelPlan:
    def __init__(self, step):
        self.step = step
        self.kernel = lower_group("kernel", step.ops, step.inputs, step.outputs, step.shape)
        known = set(step.inputs)
        self.nests = [_Nest(op.outputs[-1], _launch_known(capacity.capacities(op), known),
                            capacity.nest_infos(op.params["info"]))
                      for op in step.ops if op.prim is prims.loop_tape_p]
        made = {o for op in step.ops for o in op.outputs}
        self.external_tokens = [op.inputs[0] for op in step.ops
                                if op.prim is prims.loop_bwd_p and op.inputs[0] not in made]
        self.vars = {v.id: v for v in step.inputs + step.outputs}
        self.n_threads = int(np.prod(step.shape, dtype=np.int64))
        self.sizing = _canonical_sizing(self.nests, step.inputs)
        self._count_kernels = {}
        self._compiled = {}

    def compiled(self, backend, kernel, sizing=""):
        """The backend's artifact for one of this plan's kernels, looked up once per plan:
        printing a kernel to find it in the backend's cache costs more than a small launch."""
        key = (backend.name, id(kernel))
        if key not in self._compiled:
            self._compiled[key] = backend.compile(kernel, sizing)
        return self._compiled[key]

    def count_kernel(self, loop_ids):
        key = tuple(sorted(loop_ids))
        if key not in self._count_kernels:
            self._count_kernels[key] = lower_group("count", self.step.ops, self.step.inputs, [],
                                                   self.step.shape, count_loops=key)
        return self._count_kernels[key]


class Execution:
    """One run of a program. A fresh execution restarts the adstack accounting; the backward
    half of a vjp is not fresh, since it uses the forward half's tapes."""

    def __init__(self, backend, fresh=True):
        self.backend = backend
        self.lease = None
        if fresh:
            backend.heap.last_used = 0

    def heap_lease(self):
        if self.lease is None:
            self.lease = self.backend.heap.lease()
        return self.lease

    def heap_mark(self):
        return self.heap_lease().mark()

    def heap_reset(self, mark):
        self.lease.reset(mark)

    def run(self, program, args, consts=None):
        """consts: values of the program's constant vars, when they differ from the ones it
        was scheduled with (a program reused for a new trace of the same function)."""
        env = dict(program.consts if consts is None else consts)
        env.update(zip(program.inputs, args))
        for k, step in enumerate(program.steps):
            if isinstance(step, HostStep):
                self._host(step.op, env)
            else:
                self._kernel(step, env)
            for v in program.dead_after[k]:
                env.pop(v, None)
        return [_value(env, o) for o in program.outputs]

    def _host(self, op, env):
        runner = RUNNERS.get(op.prim)
        if runner is not None:
            outs = runner(self, op, env, lambda x: _value(env, x))
            for var, out in zip(op.outputs, outs):
                env[var] = out if var.aval.is_tape else np.asarray(out, dtype=var.aval.dtype)
            return
        args = [_value(env, x) for x in op.inputs]
        out = HOST_IMPLS[op.prim](*args, **op.params)
        env[op.outputs[0]] = np.asarray(out, dtype=op.outputs[0].aval.dtype)

    def _kernel(self, step, env):
        plan = getattr(step, "plan", None)
        if plan is None:
            plan = step.plan = _KernelPlan(step)
        n = plan.n_threads
        outs = {v: np.empty(v.aval.shape, v.aval.dtype) for v in step.outputs
                if v.id not in plan.kernel.accum_outputs}
        layouts = {}
        for token in plan.external_tokens:
            layouts.update(env[token].layouts)
        if n and plan.nests:
            layouts.update(self._size_nests(plan, env, n))
        if n:
            buffers = self._bind(plan.kernel, plan, env, outs, layouts, None)
            self.backend.launch(plan.compiled(self.backend, plan.kernel, plan.sizing), n, buffers)
            fault_check.check(plan.kernel, buffers[plan.kernel.buffer_index("faults")]
                              if plan.kernel.faults else [0], layouts)
        for var_id, buf in plan.kernel.accum_outputs.items():
            var = plan.vars[var_id]
            outs[var] = buffers[buf].reshape(var.aval.shape) if n else \
                np.zeros(var.aval.shape, var.aval.dtype)
        for v, arr in outs.items():
            env[v] = TapeHandle(arr, layouts, self.lease) if v.aval.is_tape else arr

    def _size_nests(self, plan, env, n):
        caps, to_count = {}, []
        for nest in plan.nests:
            for loop_id, expr in nest.exprs.items():
                if config.adstack_capacity is not None:
                    caps[loop_id] = np.full(n, config.adstack_capacity, dtype=np.int64)
                elif expr is None:
                    to_count.append(loop_id)
                else:
                    caps[loop_id] = capacity.evaluate(expr, env, plan.step.shape)
        if to_count:
            caps.update(self._count(plan, env, n, to_count))
        lease = self.heap_lease()
        layouts = {}
        for nest in plan.nests:
            for loop_id, info in nest.infos.items():
                layout = loop_layout(info, caps[loop_id])
                layout.regions = {name: lease.alloc(slots * dtype.itemsize, dtype, info.src)
                                  for name, (dtype, slots) in layout.regions.items()}
                layouts[loop_id] = layout
        return layouts

    def _count(self, plan, env, n, loop_ids):
        kernel = plan.count_kernel(loop_ids)
        self.backend.count_launches += 1
        buffers = self._bind(kernel, plan, env, {}, {}, n)
        self.backend.launch(plan.compiled(self.backend, kernel), n, buffers)
        fault_check.check(kernel, buffers[kernel.buffer_index("faults")] if kernel.faults
                          else [0], {})
        counts = buffers[kernel.buffer_index("counts")].reshape(len(kernel.counters), n)
        return {loop_id: counts[k].copy() for k, loop_id in enumerate(kernel.counters)}

    def _bind(self, kernel, plan, env, outs, layouts, n_counts):
        buffers = []
        for spec in kernel.buffers:
            if spec.kind == "in":
                val = env[plan.vars[spec.key]]
                val = val.trips if isinstance(val, TapeHandle) else val
                buffers.append(np.ascontiguousarray(val, dtype=spec.dtype).reshape(-1))
            elif spec.kind == "out":
                buffers.append(outs[plan.vars[spec.key]].reshape(-1))
            elif spec.kind == "faults":
                buffers.append(fault_check.empty(kernel))
            elif spec.kind == "accum":
                table = kernel.buffers[spec.key[1]]
                buffers.append(np.zeros(plan.vars[table.key].aval.size, dtype=spec.dtype))
            elif spec.kind == "counts":
                buffers.append(np.zeros(len(kernel.counters) * n_counts, dtype=np.int64))
            elif spec.kind == "region":
                loop_id, dtype_name = spec.key
                buffers.append(self.backend.heap.view(layouts[loop_id].regions[dtype_name]))
            else:
                buffers.append(getattr(layouts[spec.key], spec.kind))
        return buffers


def _launch_known(exprs, known):
    """Expressions may read only arrays that exist when the kernel starts (its inputs);
    a loop whose expression reads a value made inside the kernel is counted instead."""
    return {loop_id: e if e is not None and e.vars() <= known else None
            for loop_id, e in exprs.items()}


def _canonical_sizing(nests, inputs):
    """The capacity expressions as text, with arrays named by input position and loops by
    order of appearance (as the kernel printer does): equal in any process."""
    position = {f"%{v.id}": f"in{k}" for k, v in enumerate(inputs)}
    loops = {}
    parts = []
    for nest in nests:
        for loop_id, expr in nest.exprs.items():
            loops.setdefault(str(loop_id), len(loops))
            text = str(expr) if expr is not None else "count"
            text = re.sub(r"%\d+", lambda m: position.get(m.group(0), "?"), text)
            text = re.sub(r"\bi(\d+)", lambda m: f"i{loops.setdefault(m.group(1), len(loops))}",
                          text)
            parts.append(f"L{loops[str(loop_id)]}: {text}")
    return "; ".join(parts)


def _value(env, x):
    if isinstance(x, Lit):
        return np.asarray(x.value, dtype=x.aval.dtype)
    return env[x]
