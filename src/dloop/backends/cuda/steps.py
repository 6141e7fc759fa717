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
own launch converts every argument at every call, several microseconds a launch.

Where a step is kernels only (direct carries, no invariant cotangent to add), a call's steps
go as CUDA graphs (_StepGraph): one of their own number where an earlier call ran as many,
else runs of 2^k steps, one graph each. On an H100, a launch from Python takes about
3.5 us of host time, which bounded W3's 200 steps (10^6 cells) at 1.35 ms forward and 1.32
ms reverse in float32, where the same launches as a graph ran in 0.68 and 0.81 ms."""

import threading
from collections import OrderedDict

import cupy
import numpy as np

from ...config import config
from ...runtime.steps import carry_pairs
from .graphs import KernelChain
from .render import BLOCK

_D2D = cupy.cuda.runtime.memcpyDeviceToDevice
_H2D = cupy.cuda.runtime.memcpyHostToDevice
# Graphs run 2^k steps for k >= 3; fewer steps are launched one by one, where a graph's table
# copy and launch would cost about what the launches do.
SMALLEST_GRAPH = 8
GRAPHS_KEPT = 32         # per driver, keyed by (device, stream, steps); the oldest dropped
STEP_COUNTS_KEPT = 64    # step counts remembered per driver, to make graphs of their own


class StepDriver:
    def __init__(self, backend, plan, mode, n_index, n_carry, n_inv):
        self.backend, self.plan, self.mode = backend, plan, mode
        self.n_index, self.n_carry = n_index, n_carry
        ins = plan.inputs
        self.carries = ins[n_index:n_index + n_carry]
        self.bars = ins[n_index + n_carry + n_inv:] if mode == "reverse" else []
        self.pairs, self.direct = carry_pairs(plan, mode, n_index, n_carry, n_inv)
        self.entries = [0] * len(plan.calls)      # the cpu driver's kernel addresses: none
        self.launches = [(compiled.artifact.function, np.int64(n), (n + BLOCK - 1) // BLOCK,
                          refs) for compiled, n, refs in plan.calls]
        self.reads_index = n_index > 0 and plan.inputs[0] in plan.used
        self.graphs = OrderedDict()      # (device, stream, steps) -> _StepGraph
        self.graphs_lock = threading.Lock()
        self.row_functions = None        # the kernels' row entries, compiled at the first graph
        self.step_counts = set()         # of earlier calls (the first STEP_COUNTS_KEPT)
        self.no_graphs = None            # why the driver refused a graph, if it did

    def call(self, first, last, index_base, table):
        plan, mode = self.plan, self.mode
        n_slots, n_carry = len(plan.slots), self.n_carry
        address = [int(a) for a in table]
        n_acc = len(plan.outputs) - len(self.bars) if mode == "reverse" else 0
        faults = n_slots + n_carry + n_acc
        trips = address[-1]
        stream = cupy.cuda.get_current_stream().ptr
        indices = None
        if self.reads_index:
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
                device_copy(address[n_slots + k], address[s], plan.nbytes[s], stream)
        at = self._addresses(steps, address, indices, first, trips)
        blocks = [_Parameters(function, n, grid, refs, address[faults + k], at, address,
                              steps.size)
                  for k, (function, n, grid, refs) in enumerate(self.launches)]
        launch = cupy.cuda.driver.launchKernel
        direct, pairs = self.direct, self.pairs
        graphed = self._run_graphs(blocks, steps.size) if direct and not accumulate else 0
        for j, t in enumerate(steps[graphed:].tolist(), graphed):
            for p in blocks:
                launch(p.function, p.grid, 1, 1, BLOCK, 1, 1, 0, stream,
                       p.pointers + j * p.stride, 0)
            for acc, g in accumulate:
                cupy.add(acc, g, out=acc)
            if not direct:
                last_step = t == (0 if mode == "reverse" else trips - 1)
                for k, (s_in, s_out) in enumerate(pairs):
                    to = address[n_slots + k] + (t + 1) * plan.nbytes[s_in] \
                        if mode == "forward_taped" and not last_step else address[s_in]
                    device_copy(to, address[s_out], plan.nbytes[s_in], stream)
        t = int(steps[-1])
        if direct and mode != "forward_taped" and t == (0 if mode == "reverse" else trips - 1) \
                and not self._swapped(t, trips):
            for s_in, s_out in pairs:           # the result is in the written buffer
                device_copy(address[s_in], address[s_out], plan.nbytes[s_in], stream)

    def _run_graphs(self, blocks, n_steps):
        """Queue the first steps of a call's launches (`blocks`, in launch order) as graphs;
        returns how many steps they ran. A step count seen before gets a graph of its own;
        one seen first goes as graphs of 2^k steps, largest first, which any count reuses."""
        if n_steps < SMALLEST_GRAPH or self.no_graphs:
            return 0
        stream = cupy.cuda.get_current_stream()
        device = cupy.cuda.runtime.getDevice()
        seen = n_steps in self.step_counts
        if not seen and len(self.step_counts) < STEP_COUNTS_KEPT:
            self.step_counts.add(n_steps)
        whole = self._graph(device, stream, n_steps, build=seen)
        if whole is not None:
            whole.run([p.values for p in blocks], stream)
            return n_steps
        done, size = 0, 1 << (n_steps.bit_length() - 1)
        while size >= SMALLEST_GRAPH:
            if n_steps - done >= size:
                graph = self._graph(device, stream, size)
                if graph is None:
                    return done
                graph.run([p.values[done:done + size] for p in blocks], stream)
                done += size
            size >>= 1
        return done

    def _graph(self, device, stream, size, build=True):
        """The graph of `size` steps for `stream` (made here if `build`, else None)."""
        # cudaStreamPerThread (CuPy's default stream under CUPY_CUDA_PER_THREAD_DEFAULT_STREAM,
        # or Stream.ptds) is one handle for another stream in each thread.
        key = (device, stream.ptr, size, threading.get_ident()
               if stream.ptr == cupy.cuda.runtime.streamPerThread else None)
        with self.graphs_lock:
            graph = self.graphs.get(key)
            if graph is not None:
                self.graphs.move_to_end(key)
                return graph
        if not build:
            return None
        if self.row_functions is None:
            # The Function objects, which keep their modules loaded: a thread compiling at the
            # same time may replace the backend's cached artifact, and the one replaced would
            # unload its module under the graphs made from it.
            self.row_functions = [self.backend.compile(compiled.kernel, "rows").function
                                  for compiled, _, _ in self.plan.calls]
        try:
            graph = _StepGraph(self.row_functions, [g for _, _, g, _ in self.launches],
                               [1 + len(refs) for _, _, _, refs in self.launches], size)
        except (RuntimeError, MemoryError) as e:  # the driver made no graph: launch one by one
            self.no_graphs = f"{type(e).__name__}: {e}"
            if config.debug:
                print(f"dloop: a collective loop's steps are launched one by one: "
                      f"{self.no_graphs}")
            return None
        with self.graphs_lock:
            self.graphs[key] = graph
            dropped = [self.graphs.popitem(last=False)
                       for _ in range(len(self.graphs) - GRAPHS_KEPT)]
        del dropped           # outside the lock: each waits for its last launch (__del__)
        return graph

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
        self._pointers = None
        self.stride = 8 * width

    @property
    def pointers(self):
        """The address of step 0's pointer array (launches one by one only: a graph reads
        the values)."""
        if self._pointers is None:
            self._pointers = self.values.ctypes.data + 8 * np.arange(self.values.size,
                                                                     dtype=np.int64)
        return self._pointers.ctypes.data


class _StepGraph:
    """`size` steps of a driver's kernels as one CUDA graph, made for one stream of one
    device. Each node launches a kernel's row entry (render.py, rows=True) on its row of a
    device table; a run copies the call's rows (_Parameters.values) into the table, queued
    before the graph on the same stream, so the graph made once serves every call.

    The rows go from pinned host memory, so the copy does not wait for the work queued
    before it; the memory is rewritten only once the last copy from it has run (`copied`),
    and a run holds a lock from the rewrite to the launch, so two threads on one stream
    cannot queue their copies between the other's copy and launch."""

    def __init__(self, functions, grids, widths, size):
        self.size = size
        self.functions = functions       # CuPy Functions: their modules stay loaded
        self.offsets = np.cumsum([0] + [size * w for w in widths])
        n_words = int(self.offsets[-1])
        self.table = cupy.empty(n_words, np.int64)
        self.pinned = cupy.cuda.alloc_pinned_memory(8 * n_words)
        self.host = np.frombuffer(self.pinned, np.int64, n_words)
        self.lock = threading.Lock()
        self.copied = cupy.cuda.Event(block=False, disable_timing=True)
        self.copied.record()
        # Where the last launch was queued: a copy into the table waits for it (the same
        # stream orders them already, but not two threads on cudaStreamPerThread).
        self.launched = cupy.cuda.Event(block=False, disable_timing=True)
        # Node (step j, kernel k)'s one argument: the address of its row in the table.
        rows = np.array([[self.table.data.ptr + 8 * (int(self.offsets[k]) + j * w)
                          for k, w in enumerate(widths)] for j in range(size)], np.int64)
        pointers = rows.ctypes.data + 8 * np.arange(rows.size, dtype=np.int64)
        n = len(functions)
        # Node (j, k)'s kernelParams: the address of its one argument, rows[j, k].
        self.graph = KernelChain([(functions[k].ptr, grids[k], BLOCK,
                                   pointers.ctypes.data + 8 * (j * n + k))
                                  for j in range(size) for k in range(n)])

    def run(self, values, stream):
        """Queue the steps on `stream`; values[k]: kernel k's rows (size x its width)."""
        with self.lock:
            self.copied.synchronize()
            for k, v in enumerate(values):
                self.host[self.offsets[k]:self.offsets[k + 1]] = v.reshape(-1)
            stream.wait_event(self.launched)
            cupy.cuda.runtime.memcpyAsync(self.table.data.ptr, self.host.ctypes.data,
                                          self.host.nbytes, _H2D, stream.ptr)
            self.copied.record(stream)
            self.graph.launch(stream.ptr)
            self.launched.record(stream)

    def __del__(self):
        # The pinned memory and the table go back to CuPy's pools with this object: not
        # before the last copy and launch that read them have run (on the per-thread default
        # stream, another thread's work could otherwise get the table's memory at once).
        try:
            self.copied.synchronize()
            self.launched.synchronize()
        except Exception:           # CuPy already shut down at the interpreter's exit
            pass


def device_copy(dst, src, nbytes, stream):
    """nbytes from device address src to dst, queued on stream (a pointer)."""
    if nbytes:
        cupy.cuda.runtime.memcpyAsync(dst, src, nbytes, _D2D, stream)


def _view(address, aval):
    """The device array at `address` (memory the run owns elsewhere)."""
    nbytes = int(np.prod(aval.shape, dtype=np.int64)) * aval.dtype.itemsize
    memory = cupy.cuda.UnownedMemory(address, nbytes, None)
    return cupy.ndarray(aval.shape, aval.dtype, cupy.cuda.MemoryPointer(memory, 0))
