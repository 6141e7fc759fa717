"""STAGE 5 — cuda: a collective loop's steps (runtime/steps.py) as launches and copies queued
on the current stream from one Python loop, with the addresses worked out once per call.

The host-driven loop runs the body's program at every step: allocation, binding, a fault
buffer and a tape copy per launch, about 60 us of Python a step against a few of GPU work.
Here a step is its kernel launches on raw addresses, in the cpu driver's order
(backends/cpu/steps.py), with no copy of a carry: taped, the kernels read step t's carries in
the tape and write the new ones into its next row (into the carry slots at the last step);
untaped, and for the carry cotangents in reverse, the kernels read one of two buffers and
write the other, swapped at every step, and one copy at the end leaves the result where the
caller reads it. (Where two carries come out of one value, the cpu driver's copies are used.)
Reverse, the kernels read the carries in the tape and the invariant cotangents are added
into their accumulators. The index of a fori loop is read from a device array of the
chunk's indices, not written at every step. Nothing waits for the device: runtime/steps.py
reads the fault flags after each chunk of steps. Kernels are launched through the driver
API with a parameter block made once per call and rewritten in place at each step: CuPy's
own launch converts every argument at every call, several microseconds a launch."""

import ctypes

import cupy
import numpy as np

from ...runtime.steps import carry_pairs
from .render import BLOCK

_D2D = cupy.cuda.runtime.memcpyDeviceToDevice


class StepDriver:
    def __init__(self, plan, mode, n_index, n_carry, n_inv):
        self.plan, self.mode = plan, mode
        self.n_index, self.n_carry = n_index, n_carry
        ins = plan.inputs
        self.carries = ins[n_index:n_index + n_carry]
        self.bars = ins[n_index + n_carry + n_inv:] if mode == "reverse" else []
        self.pairs, self.direct = carry_pairs(plan, mode, n_index, n_carry, n_inv)
        self.entries = [0] * len(plan.calls)      # the cpu driver's kernel addresses: none
        self.launches = [(compiled.artifact.function, np.int64(n), (n + BLOCK - 1) // BLOCK,
                          refs) for compiled, n, refs in plan.calls]

    def call(self, first, last, index_base, table):
        plan, mode = self.plan, self.mode
        n_slots, n_carry = len(plan.slots), self.n_carry
        address = [int(a) for a in table]
        n_acc = len(plan.outputs) - len(self.bars) if mode == "reverse" else 0
        faults = n_slots + n_carry + n_acc
        trips = address[-1]
        stream = cupy.cuda.get_current_stream().ptr
        nbytes = [plan.nbytes[s] for s in self.carries]
        indices = None
        if self.n_index:
            slot = plan.inputs[0]
            dtype = plan.slots[slot].aval.dtype
            indices = cupy.arange(index_base + first, index_base + last, dtype=dtype)
            index_at, index_size = indices.data.ptr, dtype.itemsize
        accumulate = []
        if mode == "reverse":
            grads = plan.outputs[len(self.bars):]
            accumulate = [(_view(address[n_slots + n_carry + k], plan.slots[s].aval),
                           _view(address[s], plan.slots[s].aval)) for k, s in enumerate(grads)]
        steps = range(last - 1, first - 1, -1) if mode == "reverse" else range(first, last)
        if mode == "forward_taped" and first == 0:
            for k, s in enumerate(self.carries):
                _copy(address[n_slots + k], address[s], nbytes[k], stream)
        direct, pairs = self.direct, self.pairs
        launch = cupy.cuda.driver.launchKernel
        kernels = [_Parameters(function, n, grid, refs, address[faults + k])
                   for k, (function, n, grid, refs) in enumerate(self.launches)]
        for t in steps:
            at = {} if mode == "forward" else \
                {s: address[n_slots + k] + t * nbytes[k] for k, s in enumerate(self.carries)}
            if indices is not None:
                at[plan.inputs[0]] = index_at + (t - first) * index_size
            # Steps done before this one: their parity says which buffer holds the carry.
            swapped = direct and mode != "forward_taped" and \
                (trips - 1 - t if mode == "reverse" else t) % 2 == 1
            if swapped:
                for s_in, s_out in pairs:
                    at[s_in], at[s_out] = address[s_out], address[s_in]
            elif direct and mode == "forward_taped":
                for k, (s_in, s_out) in enumerate(pairs):
                    at[s_out] = address[s_in] if t + 1 == trips else \
                        address[n_slots + k] + (t + 1) * nbytes[k]
            for p in kernels:
                values = p.values
                for i, r in p.slots:
                    values[i] = at.get(r, address[r])
                launch(p.function, p.grid, 1, 1, BLOCK, 1, 1, 0, stream, p.pointers, 0)
            for acc, g in accumulate:
                cupy.add(acc, g, out=acc)
            last_step = t == (0 if mode == "reverse" else trips - 1)
            if not direct:
                for k, (s_in, s_out) in enumerate(pairs):
                    to = address[n_slots + k] + (t + 1) * nbytes[k] \
                        if mode == "forward_taped" and not last_step else address[s_in]
                    _copy(to, address[s_out], plan.nbytes[s_in], stream)
            elif mode != "forward_taped" and last_step and not swapped:
                for s_in, s_out in pairs:       # the result is in the written buffer
                    _copy(address[s_in], address[s_out], plan.nbytes[s_in], stream)


class _Parameters:
    """One kernel's launch: its arguments (the thread count, then one address per buffer,
    all 8 bytes) in a block the steps rewrite, and the array of pointers to them that
    cuLaunchKernel reads."""

    def __init__(self, function, n, grid, refs, faults):
        self.function, self.grid = function.ptr, grid
        self.values = (ctypes.c_uint64 * (1 + len(refs)))(int(n), *[
            faults if r is None else 0 for r in refs])
        base = ctypes.addressof(self.values)
        self._pointers = (ctypes.c_void_p * (1 + len(refs)))(
            *[base + 8 * i for i in range(1 + len(refs))])
        self.pointers = ctypes.addressof(self._pointers)
        self.slots = [(i, r) for i, r in enumerate(refs, 1) if r is not None]


def _copy(dst, src, nbytes, stream):
    if nbytes:
        cupy.cuda.runtime.memcpyAsync(dst, src, nbytes, _D2D, stream)


def _view(address, aval):
    """The device array at `address` (memory the run owns elsewhere)."""
    nbytes = int(np.prod(aval.shape, dtype=np.int64)) * aval.dtype.itemsize
    memory = cupy.cuda.UnownedMemory(address, nbytes, None)
    return cupy.ndarray(aval.shape, aval.dtype, cupy.cuda.MemoryPointer(memory, 0))
