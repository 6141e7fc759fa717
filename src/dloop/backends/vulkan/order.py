"""STAGE 5 — vulkan: the element order and the interleaved adstack layout, computed on the
device from capacities sized on the host (design.md 20).

Run in element order, a warp of W1's uniform trips in [0, 200) idles 78 lane-iterations per
element and its compact tapes scatter every push; sorted, its tapes interleave (kir.py,
L = 32) and its loops end together: the two kernels of W1's gradient at 10^6 elements took
5.9 ms unsorted against 2.8 ms sorted by the host on NVIDIA's driver (H100; each launch
timed alone, waits included; 1.7 ms in a whole call sorted here), but the host's sort,
layout and their two uploads took longer than that saved. Here the order is
adstack/parallel.order_by_tiles' (the cuda backend's), bit for bit, by a stable counting
sort: each thread counts the keys of a chunk of CHUNK consecutive elements into a table
laid out in the order's own major-to-minor sequence (class of work, tile, rest of the key,
chunk), so that one exclusive scan of the table (sizing.exclusive_sums) gives every
(key, chunk) its first position, and the thread then places its chunk's elements from
there. A chunk never straddles tiles (parallel.order_tile is a multiple of CHUNK). The
interleaved layout follows as on cuda: each group of 32 threads' largest capacity, a scan
of the groups' slots, and each element's start and raised capacity."""

import numpy as np

from ...adstack import parallel
from ...kernel import kir
from ...kernel.core import Emitter
from . import sizing
from .sizing import chunk, load, loop

CHUNK = 256                  # elements a thread counts and places
LANES = 32                   # kir.py's L for Vulkan (VulkanBackend.caps.tape_lanes)
_LANE_BITS = LANES.bit_length() - 1
_FINE = 8 - parallel.ORDER_CLASS_BITS
_I64 = np.dtype(np.int64)


def _key_position(e, work, shift, tid, per_tile, tiles):
    """The table entry of thread tid's chunk for an element of `work`: its 8-bit key
    255 - (work >> shift) split as in parallel.order_by_tiles (class, then tile, then the
    rest), and the chunk last."""
    k = 255 - e.op("ishr", e.select(work > 0, work, 0), shift)
    tile = e.op("idiv", tid, per_tile)
    bucket = (e.op("ishr", k, _FINE) * tiles + tile) * (1 << _FINE) + (k & ((1 << _FINE) - 1))
    return bucket * per_tile + (tid - tile * per_tile)


def _over_chunk(name, visit, written):
    """A kernel whose thread walks its chunk of CHUNK elements in order, visit(e, i, at)
    emitting what it does with element i and its table entry `at`: buf0 work, buf1 [n,
    shift, chunks per tile, tiles], then the `written` buffers (int64)."""
    e, tid = Emitter(), kir.KVar(_I64)
    n, shift, per_tile, tiles = (load(e, 1, kir.Const(j, _I64)) for j in range(4))
    lo, hi = chunk(e, tid, n, CHUNK)
    t = e.wrap(tid)

    def step(i, carry):
        visit(e, i, _key_position(e, load(e, 0, i), shift, t, per_tile, tiles))
        return carry
    loop(e, lo, hi, e.const(0, _I64), step)
    buffers = [kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64)]
    return kir.Kernel(name, tid, e.stmts, buffers + [kir.BufferSpec("out", _I64)] * written)


def _counts():
    """buf2 (zeroed) the table: each (key, chunk) entry counts its elements."""
    def count(e, i, at):
        e.stmts.append(kir.Store(2, at.x, (load(e, 2, at) + 1).x))
    return _over_chunk("dloop_order_counts", count, 1)


def _place():
    """buf2 the scanned table (advanced in place), buf3 (out) the order: each element at its
    (key, chunk)'s next position."""
    def place(e, i, at):
        position = load(e, 2, at)
        e.stmts.append(kir.Store(3, position.x, i.x))
        e.stmts.append(kir.Store(2, at.x, (position + 1).x))
    return _over_chunk("dloop_order_place", place, 2)


def _group_slots():
    """buf0 capacities, buf1 the order, buf2 [n], buf3 (out) LANES x each group's largest
    capacity, for groups of LANES consecutive threads."""
    e, tid = Emitter(), kir.KVar(_I64)
    n = load(e, 2, kir.Const(0, _I64))
    lo, hi = chunk(e, tid, n, LANES)

    def step(p, most):
        c = load(e, 0, load(e, 1, p))
        return e.select(c > most, c, most)
    largest = loop(e, lo, hi, e.const(0, _I64), step)
    e.stmts.append(kir.Store(3, tid, (largest * LANES).x))
    return kir.Kernel("dloop_group_slots", tid, e.stmts, [
        kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64),
        kir.BufferSpec("out", _I64)])


def _starts():
    """buf0 the order, buf1 [n, at the slot (1) or the element (0)], buf2 each group's first
    slot, buf3 its slots, buf4 (out) start, buf5 (out) raised capacity; one thread per
    element."""
    e, tid = Emitter(), kir.KVar(_I64)
    by_slot = load(e, 1, kir.Const(1, _I64))
    t = e.wrap(tid)
    group = e.op("ishr", t, _LANE_BITS)
    where = e.select(by_slot.ne(0), t, load(e, 0, t))
    first, slots = load(e, 2, group), load(e, 3, group)
    e.stmts.append(kir.Store(4, where.x, (first + (t & (LANES - 1))).x))
    e.stmts.append(kir.Store(5, where.x, e.op("ishr", slots, _LANE_BITS).x))
    return kir.Kernel("dloop_interleaved_starts", tid, e.stmts, [
        kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64),
        kir.BufferSpec("in", _I64), kir.BufferSpec("out", _I64), kir.BufferSpec("out", _I64)])


_BUILDERS = {"order counts": _counts, "order place": _place, "order slots": _group_slots,
             "order starts": _starts}


def element_order(backend, work, upload):
    """parallel.order_by_tiles(work) as a device array, for host int64 `work` (a launch's
    total trip counts per element); None where the host should sort (launches too small to
    pay the device's waits, devices without 64-bit integers, a count table larger than
    one binding can address). upload: the run's upload, which shares the copy of an array
    the kernels read too."""
    n = work.size
    if n < sizing.MIN_ELEMENTS or not backend.features.int64:
        return None
    tile = parallel.order_tile(n)
    per_tile, tiles = tile // CHUNK, -(-n // tile)
    if (1 << 8) * tiles * per_tile * _I64.itemsize > backend.features.max_range:
        return None
    shift = max(0, parallel.extremes(work)[1].bit_length() - 8)
    params = backend.upload(np.array([n, shift, per_tile, tiles], _I64), _I64)
    on_device = upload(work, _I64)
    table = backend.zeros(((1 << 8) * tiles * per_tile,), _I64)
    threads = tiles * per_tile
    backend.launch(sizing.kernel(backend, "order counts", _BUILDERS), threads,
                   [on_device, params, table])
    first, _ = sizing.exclusive_sums(backend, table, table.size)
    order = backend.empty((n,), _I64)
    backend.launch(sizing.kernel(backend, "order place", _BUILDERS), threads,
                   [on_device, params, first, order])
    return order


def interleaved(backend, cap, order, by_slot, upload):
    """(start, raised, total) of the interleaved layout (adstack/layout.py) for host
    capacities `cap` run in device `order`, on the device. (layout.py keeps the loop
    compact where this pads by more than 1/MAX_PADDING, as host layouts do: the order sorts
    the launch's total work, which a loop beside others may not follow.)"""
    n = cap.size
    groups = -(-n // LANES)
    on_device = upload(cap, _I64)
    count = backend.upload(np.array([n, int(by_slot)], _I64), _I64)
    slots = backend.empty((groups,), _I64)
    backend.launch(sizing.kernel(backend, "order slots", _BUILDERS), groups,
                   [on_device, order, count, slots])
    first, total = sizing.exclusive_sums(backend, slots, groups)
    start, raised = backend.empty((n,), _I64), backend.empty((n,), _I64)
    backend.launch(sizing.kernel(backend, "order starts", _BUILDERS), n,
                   [order, count, first, slots, start, raised])
    return start, raised, total
