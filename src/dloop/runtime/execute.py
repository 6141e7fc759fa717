"""Running an Executable: host steps through the backend's array namespace, kernel steps
through the backend, with adstacks sized at each launch that starts a taped loop.

Fault flags are collected per launch and read where the backend synchronises anyway: before a
host step reads kernel output, before sizing reads arrays, and before results are handed back.
Device memory is reached only through the backend (empty, zeros, upload, to_host, the heap)."""

import sys

import numpy as np

from ..adstack import capacity, parallel
from ..adstack.layout import loop_layout
from ..errors import DloopMemoryError, DloopNotImplementedError, DloopValueError
from ..ir.graph import Lit
from ..trace import captured_copies
from . import faults as fault_check
from . import guess, sizing_memo
from .collective import RUNNERS
from .host_ops import HOST_IMPLS


class TapeHandle:
    """A taped loop's token at run time: trips per element, where its stacks live, and the
    order its elements ran in (None: element order), which the reverse kernel reuses: the
    same elements with the same trip counts, and the same order buffer on the device
    (`bound`). `decided`: the order was chosen for this work (the kernel ran in an order),
    not merely absent."""
    __slots__ = ("trips", "layouts", "lease", "order", "decided", "bound")

    def __init__(self, trips, layouts, lease, order, decided, bound):
        self.trips, self.layouts, self.lease, self.order = trips, layouts, lease, order
        self.decided, self.bound = decided, bound


class Execution:
    """One run of a program. A fresh execution restarts the adstack accounting; the backward
    half of a vjp is not fresh: it runs on the heap holding the forward half's tapes."""

    def __init__(self, backend, fresh=True, heap=None):
        self.backend = backend
        self.heap = heap or backend.heap
        self.lease = None
        self.pending = []          # (kernel, fault buffer, layouts) not yet checked
        self.lasting = {}          # id -> (host array, {dtype: its device copy}); see _upload
        self.kept_uploads = {}     # id -> a device copy of a kept host array (_sizing_array)
        self.guessing = True       # counted loops may be sized from their plan's last count
        self.guessed = None        # the plan whose launch being sized guessed (guess.py)
        self.guesses = []          # every plan that guessed in this run, in order
        self.fresh = fresh
        if fresh:
            self.heap.last_used = 0

    def heap_lease(self):
        if self.lease is None:
            self.lease = self.heap.lease()
        return self.lease

    def heap_mark(self):
        return self.heap_lease().mark()

    def heap_reset(self, mark):
        self.lease.reset(mark)

    def run(self, executable, args, consts=None, to_host=False):
        """consts: values of the program's constant vars, when they differ from the ones it
        was scheduled with (a program reused for a new trace of the same function). to_host:
        the outputs go to the user as NumPy arrays where the backend's never do
        (Backend.host_results), read in the wait that reads the fault flags."""
        with self.heap.lock:
            # The program's inputs and constants live as long as the run: each is copied to
            # the device once, however many kernels read it (_upload).
            given = executable.program.consts if consts is None else consts
            self.lasting = {id(v): (v, {}) for v in [*args, *given.values()]
                            if isinstance(v, np.ndarray)}
            missed = None
            try:
                outs = self._finish(self._run(executable, args, consts), to_host)
            except guess.GuessMissed as e:
                missed = e.args[0]
            if missed is not None:
                # Again, counted; outside the handler, so the first attempt's tapes are freed.
                guess.missed(missed)
                self.guessing, self.pending, self.lease, self.guesses = False, [], None, []
                if self.fresh:
                    self.heap.last_used = 0
                outs = self._finish(self._run(executable, args, consts), to_host)
        return outs

    def _finish(self, outs, to_host):
        if not (to_host and self.backend.host_results) or sys.is_finalizing():
            self.sync()
            return outs
        # One wait for the launches, their flags and the results: on NVIDIA's Vulkan driver
        # each wait cost 0.1 to 0.2 ms of W1's gradient.
        device = [k for k, o in enumerate(outs) if not isinstance(o, (np.ndarray, np.generic))]
        pending, self.pending = self.pending, []
        host = self.backend.to_numpy_all([flags for _, flags, _ in pending] +
                                         [outs[k] for k in device]) \
            if pending or device else []
        for (kernel, _, layouts), flags in zip(pending, host):
            fault_check.check(kernel, flags, layouts)
        outs = list(outs)
        for k, value in zip(device, host[len(pending):]):
            outs[k] = value
        return outs

    def _run(self, executable, args, consts=None):
        program = executable.program
        env = dict(program.consts if consts is None else consts)
        env.update(zip(program.inputs, args))
        for host_op, plan, dead in executable.sequence:
            if host_op is not None:
                self._host(executable, host_op, env)
            else:
                self._kernel(plan, env)
            for v in dead:
                env.pop(v, None)
        return [_value(env, o) for o in program.outputs]

    def run_body(self, executable, args):
        """A collective loop's body program, inside this execution (same lease, faults
        collected with the rest)."""
        return self._run(executable, args)

    def sync(self):
        """Wait for the launches so far and raise the first fault they flagged."""
        if not self.pending:
            return
        if sys.is_finalizing():
            self.backend.synchronize()
            self.pending = []
            return
        # One read for all the launches' flags (on a GPU each read is a transfer), which
        # waits for them; synchronize() after it finds the device idle. Before it, a second
        # wait for the read's own copy cost Vulkan 0.15 ms a call on the H100.
        host = self.backend.to_numpy_all([flags for _, flags, _ in self.pending])
        pending, self.pending = self.pending, []
        self.backend.synchronize()
        for (kernel, _, layouts), flags in zip(pending, host):
            fault_check.check(kernel, flags, layouts)

    def host(self, x):
        """x, readable by the host: the launches that made it finished, faults checked. A
        NumPy array is a host input or a host step's result, or a host backend's kernel
        output, which exists once its (synchronous) launch returned: no wait. (A grad's
        scalar cotangent, reshaped on the host between the forward and reverse kernels,
        held the reverse launch until the forward kernel finished: 3.9 ms of W1's Vulkan
        gradient at 10^6 on the H100.)"""
        if isinstance(x, np.ndarray):
            return x
        self.sync()
        return self.backend.to_host(x)

    def queued(self, x):
        """x for more work on the device (a tape copy, an array-library add): no wait where
        that work queues behind the launches that make x (backend.stream_ordered)."""
        return self.backend.to_host(x) if self.backend.stream_ordered else self.host(x)

    def _host(self, executable, op, env):
        runner = RUNNERS.get(op.prim)
        if runner is not None:
            outs = runner(self, executable.bodies[id(op)], op, lambda x: _value(env, x))
            for var, out in zip(op.outputs, outs):
                env[var] = out
            return
        xp = self.backend.xp
        args = [self.host(_value(env, x)) for x in op.inputs]
        try:
            out = _host_step(self.backend, op, args)
        except np.linalg.LinAlgError as e:
            raise DloopValueError(f"{op.prim.name}: {e}. The matrix is singular (or not positive "
                                  "definite) for this data: check it, or regularize it (add a "
                                  "small multiple of the identity)", op.src) from None
        outs = out if len(op.outputs) > 1 else [out]     # decompositions give several
        for var, value in zip(op.outputs, outs):
            env[var] = xp.asarray(value, dtype=var.aval.dtype)

    def _kernel(self, plan, env):
        be, step, kernel = self.backend, plan.step, plan.main.kernel
        n = plan.n_threads
        outs = {v: be.empty(v.aval.shape, v.aval.dtype) for v in step.outputs
                if v.id not in kernel.accum_outputs}
        layouts, work, orders = {}, [], set()
        for token in plan.external_tokens:
            handle = env[token]
            layouts.update(handle.layouts)
            work.append(handle.trips)
            orders.add((id(handle.order), handle.decided))
        order = bound = trips = None
        decided = plan.main.order_index is not None
        self.guessed = None
        if n and plan.nests:
            self._prefetch(kernel, plan, env)
            # The settings this sizing depends on, read once: another thread may change
            # them meanwhile, and what is kept must be what was computed under its key.
            key = sizing_memo.key(n)
            fixed = key[1]             # config.adstack_capacity
            with parallel.remembering():
                work = self._sized_work(work)
                longest = self._guess(plan, n, fixed)
                kept = sizing_memo.inputs(plan, env, work, self._sizing_array, longest,
                                          fixed) if plan.keeps_sizing else None
                hit = kept is not None and sizing_memo.lookup(plan, key, kept,
                                                              self._all_equal, self._immutable)
                if hit:
                    caps, order, loop_layouts = hit
                    if longest is not None:
                        self._guessed(plan)
                try:
                    if not hit:
                        caps = self._capacities(plan, env, n, longest, fixed)
                        order = self._order(plan.main, work + list(caps.values()))
                        loop_layouts = self._layouts(plan, caps, order)  # refuses what cannot fit
                        if kept is not None:
                            sizing_memo.store(plan, key, kept, caps, order, loop_layouts,
                                              self._sizing_xp(), self._immutable)
                    layouts.update(self._allocate(plan, loop_layouts))
                except DloopMemoryError:
                    # A guess, this launch's or an earlier one's whose tape is still held,
                    # may be what passes the limit: counted, the run may fit.
                    blamed = self.guessed or (self.guesses[-1] if self.guesses else None)
                    if blamed is None:
                        raise
                    raise guess.GuessMissed(blamed) from None
            self._check_trips(plan, caps, fixed)
        elif n and work:
            handle = env[plan.external_tokens[0]]
            same = len(orders) == 1 and handle.decided
            order = handle.order if same else self._order(plan.main, work)
            bound = handle.bound if same else None
        buffers = self._bind(kernel, plan, env, outs, layouts, None, order, bound) if n \
            else None
        if n and kernel.buffer_index("order") is not None:
            bound = buffers[kernel.buffer_index("order")]
        if n:
            if not be.caps.index64:
                self._check_index_width(plan, [n] + [int(np.prod(v.aval.shape, dtype=object))
                                                     for v in plan.vars.values()])
            be.launch(plan.main.artifact, n, buffers)
            self._collect(plan.main, buffers, layouts)
            if self.guessed is plan:
                # Its tokens, the counts the next launch sizes by, summed up (on cuda by a
                # pass queued behind it); a guess that fell short is found before any later
                # launch reads it, on a backend that queues launches too. That miss comes
                # first where starting the pass fails too: the call runs again, counted.
                try:
                    trips = {nest.top: parallel.extremes_soon(
                                 self._sizing_array(outs[nest.token]))
                             for nest in plan.nests if nest.top in plan.counting.kernel.counters}
                except Exception:
                    self.sync()
                    raise
                self.sync()
        for var_id, buf in kernel.accum_outputs.items():
            var = plan.vars[var_id]
            outs[var] = buffers[buf].reshape(var.aval.shape) if n else \
                be.zeros(var.aval.shape, var.aval.dtype)
        for v, arr in outs.items():
            env[v] = TapeHandle(arr, layouts, self.lease, order, decided, bound) \
                if v.aval.is_tape else arr
        if trips is not None:
            # The launch is over (a synchronous backend's, or waited for above) and fit: its
            # tokens are the counts of the loops it guessed, which the next launch sizes by.
            guess.remember(plan, n, trips, after_guess=True)

    def _prefetch(self, kernel, plan, env):
        """The kernel's inputs copied to the device before its sizing (which waits for the
        device), where _bind finds them: a run's lasting values only, which it keeps."""
        for spec in kernel.buffers:
            if spec.kind == "in":
                val = env[plan.vars[spec.key]]
                if id(val) in self.lasting:
                    self._upload(val, spec.dtype)

    def _check_index_width(self, plan, sizes):
        """On a device without 64-bit integers, kernels index with 32 bits: refuse a launch
        whose thread count, array sizes or adstack offsets would not fit, before anything is
        allocated for it."""
        if self.backend.caps.index64:
            return
        if max(sizes) >= 2 ** 31:
            raise DloopValueError(
                f"this launch needs offsets up to {max(sizes):,}, but the {self.backend.name} "
                "device has no 64-bit integers, so kernels index with 32 bits (at most "
                "2,147,483,647). Fewer elements or shorter loops per call fit it",
                next((st.src for st in plan.main.kernel.body if st.src), None))

    def _collect(self, compiled, buffers, layouts):
        if compiled.faults_index is None:
            return
        flags = buffers[compiled.faults_index]
        if self.backend.synchronous:       # the launch is over: no later sync to wait for
            fault_check.check(compiled.kernel, flags, layouts)
        else:
            self.pending.append((compiled.kernel, flags, layouts))

    def _check_trips(self, plan, caps, fixed):
        limit = self.backend.caps.max_loop_trips
        if limit is None or fixed is not None:
            # With a fixed capacity the caps are not trip counts (a loop of 10 trips was
            # refused as running 100,000): the kernel's own pass counter (loop_budget.py)
            # faults where the driver cut a loop.
            return
        for nest in plan.nests:
            for loop_id, info in nest.infos.items():
                cap = caps[loop_id]
                longest = int(cap.max()) if cap.size else 0
                # A loop of exactly `limit` trips ends as it should, but a count that reached
                # the limit may itself have been cut short on the device.
                counted = nest.exprs.get(loop_id) is None
                if longest > limit or (counted and longest == limit):
                    raise DloopNotImplementedError(
                        f"this loop runs up to {longest:,} iterations per element, but the "
                        f"{self.backend.name} device's driver ends loops after {limit:,} "
                        "without an error (Mesa's lavapipe does), which would give wrong "
                        "results; run this call on the cpu backend, or on a GPU", info.src)

    def _order(self, compiled, work):
        """The elements by decreasing work (the sum of their loops' trip counts), for a
        kernel compiled to run them in an order; None (element order) otherwise, or where
        that order is nearly as good (sorting_pays)."""
        if compiled.order_index is None:
            return None
        # (1-D arrays as they are: the device order shares the upload of a trip count array)
        arrays = [a if a.ndim == 1 else a.reshape(-1) for a in map(self._sizing_array, work)]
        arrays = [a.astype(np.int64, copy=False) for a in arrays]
        total = arrays[0] if len(arrays) == 1 else sum(arrays)
        be = self.backend
        if be.device_order is not None and sorting_pays(total, be.caps,
                                                        be.caps.device_sort_cost):
            order = be.device_order(total, self._upload)
            if order is not None:
                return order
        if not sorting_pays(total, be.caps):
            return None
        return work_order(total, be)

    def _guess(self, plan, n, fixed):
        """{loop_id: trips} that the plan's counted loops are sized by without counting
        (guess.py), or None where they must be counted (or there are none). fixed: the
        launch's reading of config.adstack_capacity."""
        if fixed is not None or not self.guessing or not plan.guessable:
            return None
        if all(expr is not None for nest in plan.nests for expr in nest.exprs.values()):
            return None
        return guess.guess(plan, n, plan.counting.kernel.counters)

    def _guessed(self, plan):
        self.guessed = plan
        self.guesses.append(plan)

    def _capacities(self, plan, env, n, longest=None, fixed=None):
        """Per loop, each element's capacity; longest: the guess for counted loops;
        fixed: the launch's reading of config.adstack_capacity."""
        caps, to_count = {}, False
        xp = self._sizing_xp()
        self.sync()
        for nest in plan.nests:
            for loop_id, expr in nest.exprs.items():
                if fixed is not None:
                    caps[loop_id] = xp.full(n, fixed, dtype=np.int64)
                elif expr is None:
                    to_count = True
                else:
                    known = {v: self._sizing_array(env[v]) for v in expr.vars()}
                    caps[loop_id] = capacity.evaluate(expr, known, plan.step.shape, xp)
        if to_count:
            if longest is None:
                counted = self._count(plan, env, n)
                if plan.guessable:           # its counts are the next guess
                    guess.remember(plan, n, counted)
                caps.update(counted)
            else:
                caps.update({loop: xp.full(n, most, dtype=np.int64)
                             for loop, most in longest.items()})
                self._guessed(plan)
        return caps

    def _sized_work(self, work):
        """The earlier loops' work as sizing reads it (and sizing_memo compares it), once the
        launches that make it are over."""
        self.sync()
        return [self._sizing_array(w) for w in work]

    def _layouts(self, plan, caps, order):
        be, layouts = self.backend, {}
        interleave = be.interleave if be.caps.sizes_on_device else None
        if order is not None and not isinstance(order, np.ndarray) and interleave is None:
            # ordered on the device (device_order): the layout follows it there
            def interleave(cap, order, by_slot):
                return be.device_interleave(cap, order, by_slot, self._upload)
        pack = None if be.compact_starts is None else \
            (lambda cap: be.compact_starts(cap, self._upload))
        for nest in plan.nests:
            for loop_id, info in nest.infos.items():
                layout = loop_layout(info, caps[loop_id], order, self._sizing_xp(),
                                     be.caps.tape_lanes, be.caps.compact_tapes, interleave,
                                     pack, plan.main.kernel.stacks_by_slot)
                self._check_index_width(plan, [slots for _, slots in layout.regions.values()])
                layouts[loop_id] = layout
        return layouts

    def _allocate(self, plan, loop_layouts):
        """The loops' heap regions, for this run."""
        lease, layouts = self.heap_lease(), {}
        for nest in plan.nests:
            for loop_id, info in nest.infos.items():
                layout = loop_layouts[loop_id]
                regions = {name: lease.alloc(slots * self._slot_bytes(dtype), dtype, info.src)
                           for name, (dtype, slots) in layout.regions.items()}
                layouts[loop_id] = DeviceLayout(layout, regions, self._upload)
                if self.guessed is plan and loop_id in plan.counting.kernel.counters:
                    layouts[loop_id].guessed_by = plan
        return layouts

    def _slot_bytes(self, dtype):
        """Device backends may hold a bool in more than a byte (Vulkan: 32-bit integers)."""
        return self.backend.caps.bool_bytes if dtype == bool else dtype.itemsize

    def _sizing_xp(self):
        """The array namespace adstack sizing computes with: the device's own where the
        backend says so (capacities, order and layout then never cross to the host), else
        NumPy."""
        return self.backend.xp if self.backend.caps.sizes_on_device else np

    def _all_equal(self, pairs):
        """Whether each (old, new) pair of sizing arrays holds the same values."""
        be = self.backend
        if be.caps.sizes_on_device and be.all_equal is not None:
            return be.all_equal(pairs)
        xp = self._sizing_xp()
        if xp is np:
            return all(parallel.equal(old, new) for old, new in pairs)
        return all(bool(xp.array_equal(old, new)) for old, new in pairs)

    def _sizing_array(self, val):
        val = val.trips if isinstance(val, TapeHandle) else val
        be = self.backend
        if not be.caps.sizes_on_device:
            return be.host_values(val)
        if captured_copies.immutable(val):
            # The same device array at every call: the sizing memo finds it unchanged
            # without comparing.
            kept = be.kept_upload(val, val.dtype)
            self.kept_uploads[id(kept)] = kept
            return kept
        return be.to_host(val)

    def _immutable(self, array):
        return captured_copies.immutable(array) or self.kept_uploads.get(id(array)) is array

    def _count(self, plan, env, n):
        kernel = plan.counting.kernel
        self.backend.count_launches += 1
        buffers = self._bind(kernel, plan, env, {}, {}, n)
        self.backend.launch(plan.counting.artifact, n, buffers)
        self._collect(plan.counting, buffers, {})
        self.sync()
        counts = self._sizing_array(buffers[kernel.buffer_index("counts")])
        counts = counts.reshape(len(kernel.counters), n)
        if len(kernel.counters) == 1:
            return {kernel.counters[0]: counts[0]}      # the buffer is this call's alone
        return {loop_id: counts[k].copy() for k, loop_id in enumerate(kernel.counters)}

    def _upload(self, val, dtype):
        """val on the device as dtype: for an immutable host array (a kept captured copy, a
        layout the sizing memo keeps), the copy an earlier call made (Backend.kept_upload);
        for a lasting value (_run), the copy made for an earlier kernel of this run, so a
        forward and a reverse kernel reading x share one transfer to a GPU."""
        if captured_copies.immutable(val):
            kept = self.backend.kept_upload(val, dtype)
            return kept if kept.ndim == 1 else kept.reshape(-1)   # a GPU array's reshape: us
        kept = self.lasting.get(id(val))
        if kept is None:
            return self.backend.upload(val, dtype)
        copies = kept[1]
        dtype = np.dtype(dtype)
        if dtype not in copies:
            copies[dtype] = self.backend.upload(val, dtype)
        return copies[dtype]

    def _bind(self, kernel, plan, env, outs, layouts, n_counts, order=None, bound=None):
        """bound: the order already on the device (the forward kernel's, for its reverse)."""
        be = self.backend
        buffers = []
        for spec in kernel.buffers:
            if spec.kind == "in":
                val = env[plan.vars[spec.key]]
                val = val.trips if isinstance(val, TapeHandle) else val
                buffers.append(self._upload(val, spec.dtype))
            elif spec.kind == "out":
                buffers.append(outs[plan.vars[spec.key]].reshape(-1))
            elif spec.kind == "faults":
                buffers.append(be.zeros(1 + len(kernel.faults), np.int64))
            elif spec.kind == "accum":
                table = kernel.buffers[spec.key[1]]
                buffers.append(be.zeros(plan.vars[table.key].aval.size, spec.dtype))
            elif spec.kind == "order":
                buffers.append(bound if bound is not None else
                               be.upload(order, np.int64) if order is not None else
                               be.element_order(plan.n_threads))
            elif spec.kind == "counts":
                buffers.append(be.zeros(len(kernel.counters) * n_counts, np.int64))
            elif spec.kind == "region":
                loop_id, dtype_name = spec.key
                buffers.append(self.heap.view(layouts[loop_id].regions[dtype_name]))
            else:
                buffers.append(getattr(layouts[spec.key], spec.kind))
        return buffers


class DeviceLayout:
    """A loop's layout on the device: per-element capacities and slice starts uploaded once
    (already there where the backend computed them; the capacities may be a trip count
    array a kernel reads, uploaded once for both), the capacities as the backend's array
    for error messages (read only when one is raised), and its heap regions."""
    __slots__ = ("cap", "start", "host_cap", "regions", "guessed_by")

    def __init__(self, layout, regions, upload):
        self.host_cap = layout.cap
        self.cap = upload(layout.cap, np.int64)
        self.start = upload(layout.start, np.int64)
        self.regions = regions
        self.guessed_by = None     # the plan whose guess sized it (guess.py), if one did


# Host steps that the backend's array library could not run (NumPy functions a device array
# library does not implement, e.g. np.add.at on CuPy): they run on host copies instead.
_ON_HOST = set()


def _host_step(backend, op, args):
    """HOST_IMPLS are written with NumPy's functions, which dispatch to a device array library
    through __array_function__ / like=; where that library lacks one, the step runs on host
    copies (once found, always for that primitive on that backend)."""
    key = (backend.name, op.prim)
    if backend.xp is not np and key not in _ON_HOST:
        try:
            return HOST_IMPLS[op.prim](*args, **op.params)
        except (TypeError, NotImplementedError, AttributeError, ValueError):
            _ON_HOST.add(key)
    if backend.xp is np:
        return HOST_IMPLS[op.prim](*args, **op.params)
    host = [backend.to_numpy(a) if hasattr(a, "shape") else a for a in args]
    return HOST_IMPLS[op.prim](*host, **op.params)


def sorting_pays(work, caps, cost=None):
    """Whether ordering the elements saves more lane-iterations than it costs. Host
    sizing: the sort and the layout's permutations cost about as much per element as
    caps.sort_cost iterations of a loop (a CPU lane: 8), so elements keep their order
    where, in that order, the lockstep groups' longest loops exceed the work by less
    (W2's Newton solves: 3 to 5 steps each, 0.8 idle lane-iterations per element; W1's
    uniform trips in [0, 200): 78). Interleaved tapes (caps.tape_lanes = caps.lockstep)
    are padded to each group's longest, by exactly those idle lane-iterations, so the
    same test keeps the padding small. Devices that size themselves sort exactly (cheap
    there). cost: in place of caps.sort_cost (a device's sort of host-sized elements)."""
    if caps.sizes_on_device:
        return True
    lanes = caps.lockstep
    if lanes == 1 or work.size < lanes:
        return False
    # A sample of 1,024 lockstep groups (8,192 elements on the cpu, 32,768 on Vulkan): the
    # test compares averages over thousands of elements, and 8,192 groups of 8 took 0.3 ms
    # of W2's 7 ms gradient on the cpu.
    idle, _, count = parallel.sampled_padding(work, lanes, 1024)
    return idle >= (caps.sort_cost if cost is None else cost) * count


def work_order(work, backend=None):
    """Indices of `work` from largest to smallest, by a stable sort of an 8-bit key (a
    counting sort, one linear pass); equal keys keep their order. Above 255 the work is
    shifted down to 8 bits, which orders it to within 1/128 of its maximum: enough to let
    threads that run in lockstep end their loops together. On the host, large arrays are
    sorted in one part per thread (adstack/parallel.py). A backend that sizes on the device
    sorts there by the same key, within tiles of consecutive elements inside a few classes
    of work (parallel.order_by_tiles, or the backend's fused order_by_work)."""
    if backend is not None and backend.caps.sizes_on_device:
        fused = backend.order_by_work
        return fused(work) if fused is not None else parallel.order_by_tiles(work, backend.xp)
    shift = max(0, (int(work.max()) if work.size else 0).bit_length() - 8)
    return parallel.order_by_work(work, shift)


def _value(env, x):
    if isinstance(x, Lit):
        return np.asarray(x.value, dtype=x.aval.dtype)
    return env[x]
