"""STAGE 5 — the backend protocol, the same for every backend.

A backend folder holds `render.py` (kernel IR -> the backend's source) and `launch.py` (the
Backend subclass: build, load, memory, launch). Everything else a backend needs is here:

* compile (owned here, with the caches): the kernel is legalized for `caps`
  (kernel/legalize.py: composites and missing transcendentals become core ops), then
  source = render(kernel); binary = build(source); artifact = load(binary, source, kernel).
  `binary` (bytes, or None where there is nothing worth keeping) goes to the on-disk cache,
  keyed by the legalized kernel's text, the backend and cache_identity() (host CPU,
  compiler version, device).
* memory: empty / zeros / upload give device arrays; to_host gives the backend's array
  namespace `xp` (NumPy for host backends) for host steps, to_numpy a NumPy array. The adstack
  heap (runtime/heap.py) allocates through heap_alloc / heap_copy / heap_region / release;
  collective loops write and read their tapes with heap_store / heap_load.
* execution: launch(artifact, n_threads, buffers) may return before the work is done;
  synchronize() waits for it. A backend whose launches finish before they return says so
  (`synchronous`): the runtime then reads each launch's fault flags at once; on the others it
  waits only where it must (a guessed launch, a host step, the call's end). release() must
  not free a buffer that queued work still uses.
* caps: what the device can do, read by legalization, the runtime and the renderers."""

import ctypes
import importlib
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import _version
from ..config import config
from ..errors import DloopValueError
from ..kernel.legalize import legalize
from ..runtime import cache
from ..runtime.heap import Heap
from . import TABLE

TRANSCENDENTALS = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                   "acosh", "atanh", "exp", "expm1", "log", "log1p", "log2", "log10", "pow",
                   "atan2")
ALL_MATH = frozenset((op, dt) for op in TRANSCENDENTALS for dt in ("float32", "float64"))


@dataclass(frozen=True)
class Caps:
    float64: bool = True
    index64: bool = True               # 64-bit integer arithmetic for offsets
    float_atomic_add: bool = True
    int64_atomics: bool = True
    bool_bytes: int = 1                # storage size of one bool element
    max_buffer_bytes: int = 1 << 62    # the largest buffer one binding can address
    align: int = 64                    # heap region alignment, bytes
    native_math: frozenset = ALL_MATH  # (op, dtype name) pairs rendered without legalization
    # False where float division and sqrt may be a few ulps off (Vulkan allows it): floor
    # division and modulo then use a correctly rounded division of their own, and the
    # software math a Newton step per quotient and root (kernel/exactdiv.py).
    rounded_division: bool = True
    # Run the elements of a kernel with per-element loops ordered by trip count (longest
    # first) where the trip counts are known at launch: for backends that run groups of
    # threads in lockstep (SIMD lanes, warps), so that a group's loops end together.
    order_elements: bool = False
    # Threads that run in lockstep (SIMD lanes, a warp). Where adstacks are sized on the host,
    # elements are ordered only when their loops, in element order, would leave enough of
    # these lanes idle to pay for the sort (runtime/execute.py).
    lockstep: int = 1
    # What ordering the elements on the host costs (the sort, and the layout's gather and
    # scatters through the order), in loop iterations of one lane per element: elements are
    # ordered where the idle lane-iterations it saves exceed it (runtime/execute.py).
    sort_cost: int = 8
    # The same where the backend sorts host-sized elements on its device (Backend.device_order).
    device_sort_cost: int = None
    # A driver's silent limit on a loop's iterations per thread (Mesa's lavapipe ends loops
    # after 65,535): launches whose sized loops reach it are refused rather than cut short.
    max_loop_trips: int = None
    # Adstack sizing (capacities, element order, layout) runs in the backend's array namespace
    # `xp` on the device, so per-element arrays never cross to the host and back.
    sizes_on_device: bool = False
    # interleave(cap, order, by_slot=True) lays a loop's starts and capacities out in slot
    # order, for kernels that read them at the slot (runtime/program.py).
    slot_layouts: bool = False
    # Elements whose adstack slots are interleaved in groups of this many (kernel/kir.py):
    # the width of a GPU warp, whose threads then store one slot each to one cache line.
    tape_lanes: int = 1
    # The renderer reads a negative start as a compact slice (kernel/kir.py): host layouts
    # then keep a loop compact where interleaving would pad its tape (adstack/layout.py).
    compact_tapes: bool = False


ELEMENT_ORDERS_KEPT = 4
KEPT_UPLOAD_BYTES = 256 << 20     # kept_upload's device copies, all together
_instances = {}
_instances_lock = threading.Lock()


def available(name):
    """(True, '') or (False, reason)."""
    if name not in TABLE:
        return False, f"unknown backend {name!r}"
    row = TABLE[name]
    try:
        for module in row.requires:
            importlib.import_module(module)
        cls = getattr(importlib.import_module(row.module), row.cls)
    except ImportError as e:
        return False, f"backend {name!r} needs {e.name or e}: {e}"
    except OSError as e:
        # A binding that is installed but finds no native library: the vulkan package
        # raises OSError at import when no Vulkan loader (libvulkan) is on the system.
        return False, f"backend {name!r} cannot load its native library: {e}"
    probe = getattr(cls, "probe", None)
    return probe() if probe else (True, "")


def _locks_after_fork():
    """Locks another parent thread held at the fork stay held in the child: fresh ones
    (the backends' own, for their pools and devices, are theirs to replace)."""
    global _instances_lock
    _instances_lock = threading.Lock()
    for backend in list(_instances.values()):
        backend._heaps_lock = threading.Lock()


os.register_at_fork(after_in_child=_locks_after_fork)


def get_backend(name):
    with _instances_lock:
        if name not in _instances:
            ok, why = available(name)
            if not ok:
                raise DloopValueError(why)
            row = TABLE[name]
            _instances[name] = getattr(importlib.import_module(row.module), row.cls)()
        backend = _instances[name]
    backend.check_settings()
    return backend


class Backend:
    name = None
    caps = Caps()
    xp = np
    synchronous = False
    # heap_store and heap_load queue behind the launches before them (one CUDA stream), so a
    # collective loop saves and loads its tape without waiting for the step's kernels.
    stream_ordered = False
    # Its arrays reach only users of its own array type (dloop.vulkan): for NumPy users a
    # call's results come back as NumPy arrays, read in the wait that reads its fault flags
    # (Execution.run).
    host_results = False
    # The largest launch a step driver runs (runtime/steps.py); None: any.
    max_step_threads = None
    # Backends that size on the device may lay interleaved tapes out in their own fused
    # code: interleave(cap, order, by_slot) -> (start, raised, total), as adstack/layout.py
    # would (per element, or per slot with by_slot).
    interleave = None
    # Backends that size on the device order the elements there: order_by_work(work) -> a
    # permutation (int64 device array) running the elements by decreasing work, as
    # runtime/execute.work_order describes.
    order_by_work = None
    # Backends that size on the host may order the elements on their device, and lay the
    # interleaved tapes out there: device_order(work, upload) -> parallel.order_by_tiles(work)
    # there, or None to leave it to the host; device_interleave(cap, order, by_slot, upload)
    # -> (start, raised, total) there. upload: the run's, which shares the copy of an array
    # the kernels read too.
    device_order = None
    device_interleave = None
    # Backends that size on the host may compute compact slice starts on their device:
    # compact_starts(cap, upload) -> (starts there, total), or None to leave it to the host.
    compact_starts = None
    # Backends that size on the device may compare the sizing kept from the last call with
    # this call's in their own code: all_equal(pairs) -> bool, for (old, new) pairs of one
    # shape and dtype; None: one array_equal and read back per pair.
    all_equal = None

    def __init__(self):
        self._artifacts = {}
        self._local = threading.local()
        self._heaps = weakref.WeakSet()
        self._heaps_lock = threading.Lock()
        self._element_orders = {}     # n -> 0 .. n-1 on this backend's device (element_order)
        # id(host array) -> (weakref to it, {dtype: its device copy}), least recently used
        # first (kept_upload)
        self._kept_uploads = OrderedDict()
        self._kept_lock = threading.Lock()
        self.compile_count = 0        # kernels and step drivers built (not found in a cache)
        self.count_launches = 0       # counting pre-passes run (where no expression exists)

    def check_settings(self):
        """Raise a DloopError where a setting this backend read once, when it started, has
        changed since (the change would be silently ignored)."""

    # -- compile --

    def render(self, kernel):
        raise NotImplementedError

    def build(self, source, kernel):
        """Native code for the disk cache, or None."""
        return None

    def load(self, binary, source, kernel):
        """A launchable artifact from build's bytes (source is None on a disk-cache hit)."""
        raise NotImplementedError

    def cache_identity(self):
        return ()

    def legalize(self, kernel):
        """The kernel in the ops this backend renders (kernel/legalize.py)."""
        return legalize(kernel, self.caps)

    def compile(self, kernel, variant=None):
        """The launchable artifact of `kernel`, legalized for this backend's caps first (so
        the caches are keyed by the code the renderer sees). variant: another form of the
        kernel the backend renders (render(kernel, variant)), cached under its own key."""
        kernel = self.legalize(kernel)
        text = str(kernel) if variant is None else f"{variant}\n{kernel}"
        artifact = self._artifacts.get(text)
        if artifact is not None:
            return artifact
        key, artifact = self.from_disk_cache(self.name, text,
                                             lambda binary: self.load(binary, None, kernel))
        if artifact is None:
            source = self.render(kernel) if variant is None else self.render(kernel, variant)
            if config.debug:
                print(f"dloop: {self.name} source of {kernel.name}\n{source}")
            binary = self.to_disk_cache(key, text, self.build(source, kernel))
            artifact = self.load(binary, source, kernel)
        self._artifacts[text] = artifact
        return artifact

    def from_disk_cache(self, tag, text, load):
        """(key, load(bytes)) for the disk cache's entry of code `text` (tag: what kind of
        code), or (key, None) where there is none; an entry the loader refuses is discarded
        and the caller builds again, then hands the bytes to to_disk_cache under `key`."""
        key = cache.key(tag, _version.__version__, cache.code_identity(), text,
                        *self.cache_identity())
        hit = cache.load(key, {"kernel": text})
        if hit is not None:
            try:
                return key, load(hit[0])
            except Exception as e:      # a verified entry the loader still refuses
                cache.discard(key, f"the {self.name} loader refused it ({e})")
        return key, None

    def to_disk_cache(self, key, text, binary):
        """Count a build and keep its bytes (None: nothing worth keeping) under `key` for
        code `text`; returns them."""
        self.compile_count += 1
        if binary is not None:
            cache.store(key, binary, {"kernel": text})
        return binary

    # -- memory --
    def empty(self, shape, dtype):
        raise NotImplementedError

    def element_order(self, n):
        """0 .. n-1 on this backend's device, read-only: the order buffer of a kernel compiled
        to run its elements in an order, when they run in element order. The last few sizes
        are kept instead of made at every launch. The dict is replaced, never changed in
        place, so threads need no lock (one may lose another's entry) and neither does fork."""
        order = self._element_orders.get(n)
        if order is None:
            order = self.upload(np.arange(n, dtype=np.int64), np.int64)
            if isinstance(order, np.ndarray):
                order.flags.writeable = False
            kept = {**self._element_orders, n: order}
            self._element_orders = dict(list(kept.items())[-ELEMENT_ORDERS_KEPT:])
        return order

    def zeros(self, shape, dtype):
        raise NotImplementedError

    def upload(self, x, dtype):
        """A flat, contiguous device array of dtype holding x (an xp or NumPy array)."""
        raise NotImplementedError

    def to_host(self, x):
        """x as an array of `xp`, for host steps."""
        raise NotImplementedError

    def owned_copy(self, x, dtype):
        """A new C-ordered array of `xp` and dtype holding x, for the caller to overwrite."""
        return self.xp.array(self.xp.asarray(x), dtype=dtype, order="C", copy=True)

    def to_numpy(self, x):
        raise NotImplementedError

    def to_numpy_all(self, arrays):
        """Host copies of several 1-D device arrays of one dtype (the fault flags of a call's
        launches), in one transfer where the backend can."""
        if len(arrays) == 1:        # a grad whose sweeps share a kernel: no join to make
            return [self.to_numpy(arrays[0])]
        host = self.to_numpy(self.xp.concatenate(arrays))
        return np.split(host, np.cumsum([a.size for a in arrays])[:-1])

    def heap_alloc(self, nbytes):
        """A raw heap buffer of nbytes; raises MemoryError when the device has no room."""
        raise NotImplementedError

    def heap_copy(self, dst, src, nbytes):
        raise NotImplementedError

    def heap_region(self, raw, offset, nbytes, dtype):
        """A typed device array viewing raw[offset:offset + nbytes]."""
        raise NotImplementedError

    def heap_store(self, region, x):
        """Write x (an xp array) into a typed heap region (a collective loop's tape)."""
        raise NotImplementedError

    def heap_load(self, region):
        """A copy of a typed heap region, as an xp array."""
        raise NotImplementedError

    def release(self, raw):
        """Drop a replaced heap buffer once no queued work can use it."""

    @property
    def heap(self):
        """The calling thread's adstack heap: threads never share tapes or growth."""
        heap = getattr(self._local, "heap", None)
        if heap is None:
            heap = self._local.heap = Heap(self)
            with self._heaps_lock:
                self._heaps.add(heap)
        return heap

    def reserved_bytes(self):
        with self._heaps_lock:
            return sum(h.reserved for h in self._heaps)

    # -- execution --
    def launch(self, artifact, n_threads, buffers):
        raise NotImplementedError

    def synchronize(self):
        """Wait for every launch so far (host backends launch synchronously)."""

    def step_driver(self, plan, mode, n_index, n_carry, n_inv):
        """What runs many steps of a collective loop in one call (runtime/steps.py):
        `call(first, last, index_base, table)`, the table a NumPy uint64 array of device
        addresses, and `entries`, the words that end the table before the step count (the
        cpu kernels' entry points); or None: the loop then runs host-driven."""
        return None

    def address(self, array):
        """The device address of a device array's first element (step drivers' tables)."""
        raise NotImplementedError

    def kept_upload(self, host, dtype):
        """The device copy of an immutable host array (a trace's kept copy of a captured
        array, trace/captured_copies.py) as dtype, in the host array's shape: the one made
        at an earlier call where there is one. W1's trip counts, captured by its loss, were
        copied to the device at every call (8 MB, and again for the sizing on cuda).
        Copies are kept while their host array lives, KEPT_UPLOAD_BYTES at most."""
        dtype, key = np.dtype(dtype), id(host)
        with self._kept_lock:
            entry = self._kept_uploads.get(key)
            if entry is not None and entry[0]() is host:
                self._kept_uploads.move_to_end(key)
                found = entry[1].get(dtype)
                if found is not None:
                    return found
        copy = self.upload(host, dtype).reshape(host.shape)
        if copy.nbytes <= KEPT_UPLOAD_BYTES:
            self.keep_upload(host, copy)
        return copy

    def keep_upload(self, host, copy):
        """Keep `copy` (a device array of host's shape) as immutable host's device copy in
        copy's dtype, for kept_upload to find."""
        dtype, key = copy.dtype, id(host)
        with self._kept_lock:
            # Popped and put back: an entry whose id a new host array took over would keep
            # its old place otherwise, and be given up first although just used.
            entry = self._kept_uploads.pop(key, None)
            if entry is None or entry[0]() is not host:
                entry = (weakref.ref(host, self._forget_kept(key)), {})
            entry[1][dtype] = copy
            self._kept_uploads[key] = entry
            total = 0
            for older in reversed(list(self._kept_uploads)):       # newest first
                ref, copies = self._kept_uploads[older]
                if ref() is None:          # its host array is gone: it takes no room
                    del self._kept_uploads[older]
                    continue
                total += sum(c.nbytes for c in copies.values())
                if total > KEPT_UPLOAD_BYTES:
                    del self._kept_uploads[older]

    def host_values(self, x):
        """x's values for the host to read, not write (sizing reads trip counts)."""
        return self.to_numpy(x)

    def _forget_kept(self, key):
        """A weakref callback: the device copies of a freed host array go with it, where
        the lock is free. Garbage collection may run it anywhere, inside kept_upload's
        locked code too, where waiting for the lock would deadlock: then the next
        kept_upload forgets them."""
        def forget(ref):
            if self._kept_lock.acquire(blocking=False):
                try:
                    entry = self._kept_uploads.get(key)
                    if entry is not None and entry[0] is ref:
                        del self._kept_uploads[key]
                finally:
                    self._kept_lock.release()
        return forget


class HostMemory:
    """Memory for backends that run on the CPU: device arrays are NumPy arrays."""
    synchronous = True      # launch returns when the work is done

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def upload(self, x, dtype):
        return np.ascontiguousarray(x, dtype=dtype).reshape(-1)

    def kept_upload(self, host, dtype):
        return np.asarray(host, dtype=dtype)     # the host array itself, or a conversion

    def address(self, array):
        """ctypes' view of the buffer is about 3x quicker than __array_interface__, which
        builds a dict: kernels of small collective-loop bodies that run host-driven are
        launched thousands of times per call. Read-only and empty arrays refuse that view."""
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(array))
        except (TypeError, ValueError, BufferError):
            return array.__array_interface__["data"][0]

    def to_host(self, x):
        return x

    def to_numpy(self, x):
        return np.asarray(x)

    def heap_alloc(self, nbytes):
        return np.empty(nbytes, dtype=np.uint8)

    def heap_copy(self, dst, src, nbytes):
        dst[:nbytes] = src[:nbytes]

    def release(self, raw):
        """Launches on the host are synchronous: nothing queued can still use `raw`."""

    def heap_store(self, region, x):
        region[:] = x.reshape(-1)

    def heap_load(self, region):
        return region.copy()

    def heap_region(self, raw, offset, nbytes, dtype):
        if raw is None:                    # nothing allocated yet: only empty regions exist
            return np.empty(0, dtype)
        return raw[offset:offset + nbytes].view(dtype)
