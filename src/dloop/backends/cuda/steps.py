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
API with parameter blocks made for all the steps of a call at once (_Parameters): CuPy's
own launch converts every argument at every call, several microseconds a launch."""

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
        indices = None
        if self.n_index:
            dtype = plan.slots[plan.inputs[0]].aval.dtype
            indices = cupy.arange(index_base + first, index_base + last, dtype=dtype)
        accumulate = []
        if mode == "reverse":
            grads = plan.outputs[len(self.bars):]
            accumulate = [(_view(address[n_slots + n_carry + k], plan.slots[s].aval),
                           _view(address[s], plan.slots[s].aval)) for k, s in enumerate(grads)]
        steps = np.arange(last - 1, first - 1, -1) if mode == "reverse" else \
            np.arange(first, last)
        if mode == "forward_taped" and first == 0:
            for k, s in enumerate(self.carries):
                _copy(address[n_slots + k], address[s], plan.nbytes[s], stream)
        at = self._addresses(steps, address, indices, first, trips)
        blocks = [_Parameters(function, n, grid, refs, address[faults + k], at, address,
                              steps.size)
                  for k, (function, n, grid, refs) in enumerate(self.launches)]
        launch = cupy.cuda.driver.launchKernel
        direct, pairs = self.direct, self.pairs
        for j, t in enumerate(steps.tolist()):
            for p in blocks:
                launch(p.function, p.grid, 1, 1, BLOCK, 1, 1, 0, stream,
                       p.pointers + j * p.stride, 0)
            for acc, g in accumulate:
                cupy.add(acc, g, out=acc)
            last_step = t == (0 if mode == "reverse" else trips - 1)
            if not direct:
                for k, (s_in, s_out) in enumerate(pairs):
                    to = address[n_slots + k] + (t + 1) * plan.nbytes[s_in] \
                        if mode == "forward_taped" and not last_step else address[s_in]
                    _copy(to, address[s_out], plan.nbytes[s_in], stream)
            elif mode != "forward_taped" and last_step and not self._swapped(t, trips):
                for s_in, s_out in pairs:       # the result is in the written buffer
                    _copy(address[s_in], address[s_out], plan.nbytes[s_in], stream)

    def _swapped(self, t, trips):
        """Whether step t reads the carries from the written buffers: the steps before it
        (their parity) swapped them back and forth."""
        return self.direct and self.mode != "forward_taped" and \
            (trips - 1 - t if self.mode == "reverse" else t) % 2 == 1

    def _addresses(self, steps, address, indices, first, trips):
        """{slot: address per step} (int64 arrays over `steps`, in launch order) for the
        slots whose address changes from step to step; the rest stay at address[slot].
        Taped, step t's carries are row t of the tape; the fori index is the chunk's
        index array at t; direct carries alternate between the read and the written
        buffer (or, taped, write the next row, the carry slot at the last step)."""
        plan, mode, n_slots = self.plan, self.mode, len(self.plan.slots)
        at = {}
        if mode != "forward":
            for k, s in enumerate(self.carries):
                at[s] = address[n_slots + k] + steps * plan.nbytes[s]
        if indices is not None:
            at[plan.inputs[0]] = indices.data.ptr + (steps - first) * indices.itemsize
        if self.direct and mode != "forward_taped":
            odd = (trips - 1 - steps if mode == "reverse" else steps) % 2 == 1
            for s_in, s_out in self.pairs:
                at[s_in], at[s_out] = (np.where(odd, address[s_out], at.get(s_in, address[s_in])),
                                       np.where(odd, address[s_in],
                                                at.get(s_out, address[s_out])))
        elif self.direct:
            for k, (s_in, s_out) in enumerate(self.pairs):
                at[s_out] = np.where(steps + 1 == trips, address[s_in],
                                     address[n_slots + k] + (steps + 1) * plan.nbytes[s_in])
        return at


class _Parameters:
    """One kernel's launches, one per step: each step's arguments (the thread count, then
    one address per buffer, all 8 bytes) as a row of one array, and each row's array of
    pointers to them, which cuLaunchKernel reads (and copies) at the launch. Made for all
    the steps of a call at once with NumPy: worked out step by step in Python, the
    addresses took as long as the GPU took to run W3's steps (8 us a step on an H100)."""

    def __init__(self, function, n, grid, refs, faults, at, address, n_steps):
        self.function, self.grid = function.ptr, grid
        width = 1 + len(refs)
        self.values = np.empty((n_steps, width), np.int64)
        self.values[:, 0] = int(n)
        for i, r in enumerate(refs, 1):
            self.values[:, i] = faults if r is None else at.get(r, address[r])
        base = self.values.ctypes.data
        self._pointers = base + 8 * np.arange(n_steps * width, dtype=np.int64)
        self.pointers = self._pointers.ctypes.data
        self.stride = 8 * width


def _copy(dst, src, nbytes, stream):
    if nbytes:
        cupy.cuda.runtime.memcpyAsync(dst, src, nbytes, _D2D, stream)


def _view(address, aval):
    """The device array at `address` (memory the run owns elsewhere)."""
    nbytes = int(np.prod(aval.shape, dtype=np.int64)) * aval.dtype.itemsize
    memory = cupy.cuda.UnownedMemory(address, nbytes, None)
    return cupy.ndarray(aval.shape, aval.dtype, cupy.cuda.MemoryPointer(memory, 0))
