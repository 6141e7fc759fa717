"""Host-side array work split over threads. Adstack sizing touches every element at each
launch that sizes (the element order, the layout's gather, prefix sum and scatter); on a
many-core machine it would otherwise run on one core between kernels that use all of them.
NumPy releases the GIL in the calls used on the chunks (take, cumsum, argsort,
fancy assignment), so the chunks run in parallel. Each chunk writes a disjoint part of the
output, and the result is the same as the one-thread computation, bit for bit. Each function
takes the arrays' namespace `xp`: arrays of a device's library (sizing on the device) are one
chunk, computed by that library."""

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import array_api_compat
import numpy as np

from ..config import config
from . import native
from .native import scan_into

MIN_CHUNK = 1 << 16      # fewer elements per thread: threads cost more than they save

# os.cpu_count() reads /sys at every call (8 us here), and sizing asks at every launch.
_CORES = os.cpu_count() or 1
_lock = threading.Lock()
_pool = [None, 0]            # (executor, workers)


def _reset_after_fork():
    global _lock
    _lock = threading.Lock()
    _pool[:] = [None, 0]


os.register_at_fork(after_in_child=_reset_after_fork)


def parts(n, xp=np, min_chunk=MIN_CHUNK):
    """[(lo, hi)] splitting range(n) into one chunk per thread, or a single chunk."""
    if xp is not np:
        return [(0, n)]
    workers = config.num_threads or _CORES
    k = max(1, min(workers, n // min_chunk))
    edges = [n * c // k for c in range(k + 1)]
    return list(zip(edges[:-1], edges[1:]))


def run(fn, chunks):
    """[fn(c, lo, hi) for each chunk c], the first on the calling thread."""
    if len(chunks) == 1:
        return [fn(0, *chunks[0])]
    # Submitting under the lock: another thread that needs a larger pool cannot shut this
    # one down between finding it and submitting to it (submitted work still runs).
    with _lock:
        pool, workers = _pool
        if pool is None or workers < len(chunks) - 1:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = ThreadPoolExecutor(max_workers=len(chunks) - 1,
                                      thread_name_prefix="dloop-host")
            _pool[:] = [pool, len(chunks) - 1]
        try:
            futures = [pool.submit(fn, c, lo, hi) for c, (lo, hi) in enumerate(chunks) if c]
        except RuntimeError:
            # The interpreter is exiting (see backends/cpu/launch.py): no pool takes work.
            _pool[:] = [None, 0]
            return [fn(c, lo, hi) for c, (lo, hi) in enumerate(chunks)]
    first = fn(0, *chunks[0])
    return [first] + [f.result() for f in futures]


# A device's order (Backend.order_by_work): elements stay within tiles of at least
# ORDER_TILE consecutive elements (512 KiB of float64 values) inside each of 2**ORDER_CLASS_BITS
# classes of work, longest class first.
ORDER_TILE = 1 << 16
ORDER_CLASS_BITS = 2


def order_tile(n):
    """Elements per tile for n elements: at least ORDER_TILE, few enough for at most 256
    tiles, and a multiple of 256 (Vulkan's sort counts chunks of 256 elements, which must
    not straddle tiles)."""
    return -(-max(ORDER_TILE, -(-n // 256)) // 256) * 256


def order_by_tiles(work, xp):
    """On a device (xp: its array library): a stable sort by a 16-bit key, from the most
    significant bits: the class of the element's work (the top ORDER_CLASS_BITS of the
    8-bit key 255 - work shifted down to 8 bits, as on the host), its tile of ORDER_TILE or
    more consecutive elements (at most 256 tiles), the rest of the 8-bit key.

    Lockstep groups stay as even as a global sort makes them (the key's bits are all
    there, only reordered), but the threads that run one tile's elements of a class touch
    that tile's span of each array, whose cache lines they share, where a global sort sent
    each thread of a warp to a different line; the classes keep the longest work first,
    so a long tile at the end of a launch does not run alone after the rest finished.
    Measured on an H100, W1's gradient, medians, alternated in one process: at 10^7 uniform
    elements 10.55 ms with a stable sort of the 64-bit work, 8.57 with tiles alone, 8.85 with
    tiles and classes, 9.93 with the 8-bit key alone; at 10^6 skewed (1% long), 1.88, 2.01,
    1.88 (the tail that classes remove) and 1.97 ms. The array-namespace definition of what
    backends fuse into their own code."""
    n = work.size
    longest = int(work.max()) if n else 0
    shift = max(0, longest.bit_length() - 8)
    tile = order_tile(n)
    k = 255 - (xp.maximum(work, 0) >> shift)
    fine = 8 - ORDER_CLASS_BITS
    key = ((k >> fine) << (8 + fine)) | ((xp.arange(n, dtype=np.int64) // tile) << fine) | \
        (k & ((1 << fine) - 1))
    return xp.argsort(key.astype(np.uint16), kind="stable").astype(np.int64, copy=False)


def order_by_work(work, shift):
    """A permutation of range(work.size) that sorts each of a few contiguous parts (one per
    thread) stably by the 8-bit key (255 - (work >> shift)) % 256, so by decreasing work: a
    counting sort per part (native.py). Elements run in this order only so that lanes get
    loops of about equal length; a global merge would cost more passes than the part sorts
    themselves."""
    work = np.ascontiguousarray(work, np.int64)
    order = np.empty(work.size, np.int64)
    run(lambda c, lo, hi: native.order_part(work, lo, hi, shift, order), parts(work.size))
    return order


_remembered = threading.local()
_SMALL_BYTES = 4096          # equal() compares arrays up to this size as bytes

# array type -> start(array): the extremes of such an array in one pass on its device, where
# a backend has one (the cuda backend's sizing registers CuPy's): the pass is queued at once,
# and start returns the function that reads its result.
DEVICE_EXTREMES = {}


@contextlib.contextmanager
def remembering():
    """Within it, extremes() of one array is computed once: a launch's sizing reads the same
    trip counts for their capacities (least), their order (largest) and the size check
    (largest and total), and they do not change meanwhile. Each pass over 10^6 of them took
    0.25 ms on the GPU machine's host."""
    outer = getattr(_remembered, "table", None)
    _remembered.table = {} if outer is None else outer
    try:
        yield
    finally:
        _remembered.table = outer


def extremes(values):
    """(min, max, sum) of a non-empty 1-D int64 array as Python ints (the sum wrapping like
    NumPy's), in one compiled pass for a NumPy array; remembered inside remembering()."""
    table = getattr(_remembered, "table", None)
    hit = table.get(id(values)) if table is not None else None
    if hit is not None and hit[0] is values:
        return hit[1]
    if not isinstance(values, np.ndarray):       # a device's: one read back of the three
        start = DEVICE_EXTREMES.get(type(values))
        found = start(values)() if start is not None else tuple(
            int(v) for v in array_api_compat.array_namespace(values).stack(
                [values.min(), values.max(), values.sum(dtype=np.int64)]).tolist())
    elif values.dtype == np.int64 and values.flags.c_contiguous:
        found = _native_extremes(values)
    else:
        found = int(values.min()), int(values.max()), int(values.sum(dtype=np.int64))
    if table is not None:
        table[id(values)] = values, found      # the array kept: its id is not reused
    return found


def extremes_soon(values):
    """A function giving (min, max, sum) of int64 `values` ((0, 0, 0) where empty). Where
    their device has a pass of its own (DEVICE_EXTREMES: cuda), it is queued now, behind the
    launch that makes them, and read when the function is called, once that launch has been
    waited for anyway; host arrays are summed up at once."""
    start = DEVICE_EXTREMES.get(type(values)) if values.size else None
    if start is not None:
        return start(values)
    found = extremes(values.reshape(-1)) if values.size else (0, 0, 0)
    return lambda: found


def _native_extremes(values):
    """native.extremes in one part per thread: one core reads about 6 GB/s on the GPU
    machine's host, where a pass over 10^6 trip counts took 0.25 to 1.25 ms."""
    chunks = parts(values.size, np, 4 * MIN_CHUNK)
    if len(chunks) == 1:
        return native.extremes(values)
    found = run(lambda c, lo, hi: native.extremes(values[lo:hi]), chunks)
    total = sum(f[2] for f in found)
    # The parts' sums wrap as NumPy's int64 sum does; so does their sum, modulo 2**64.
    wrapped = (total + (1 << 63)) % (1 << 64) - (1 << 63)
    return min(f[0] for f in found), max(f[1] for f in found), wrapped


def equal(a, b):
    """Whether NumPy arrays a and b, of one shape and dtype, hold the same values, in one part
    per thread: np.array_equal of W1's 10^6 trip counts took 1.25 ms on one core of the GPU
    machine's host, at every call of its Vulkan gradient (the kept sizing's check). Up to
    _SMALL_BYTES the same bits instead (floats differ there only at NaN, equal to itself,
    and -0.0 against 0.0): either way a "same" sizes the same, and a "different" only sizes
    again."""
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return bool(np.array_equal(a, b))
    if a.nbytes <= _SMALL_BYTES:
        # The same bits give the same sizing (a NaN equals itself here, -0.0 differs from
        # 0.0: only a needless new sizing); np.array_equal of a guess's one value took 2 us
        # and the parts below 5 us, at every call whose sizing was kept.
        return a.tobytes() == b.tobytes()
    a, b = a.reshape(-1), b.reshape(-1)
    chunks = parts(a.size, np, 4 * MIN_CHUNK)
    return all(run(lambda c, lo, hi: bool(np.array_equal(a[lo:hi], b[lo:hi])), chunks))


def copy(dst, src, part_bytes=2 << 20, most=4):
    """dst[:] = src (1-D NumPy arrays of one size and dtype), in parts of at least
    `part_bytes` on up to `most` threads. One thread copies about 6 GB/s into or out of a
    GPU's host-visible memory on the GPU machine; 16 MB took 2.5 ms on one thread, 0.74 ms on
    4, 0.73 on 8 and 1.1 on 16 (more threads only add hand-offs)."""
    workers = config.num_threads or _CORES
    k = max(1, min(most, workers, src.nbytes // part_bytes))
    if k == 1:
        dst[...] = src
        return
    edges = [src.size * c // k for c in range(k + 1)]
    run(lambda c, lo, hi: dst.__setitem__(slice(lo, hi), src[lo:hi]),
        list(zip(edges[:-1], edges[1:])))


def take(values, indices, xp=np):
    """values[indices] (1-D)."""
    chunks = parts(indices.size, xp)
    if len(chunks) == 1:
        return values[indices]
    out = np.empty(indices.size, values.dtype)
    run(lambda c, lo, hi: np.take(values, indices[lo:hi], out=out[lo:hi]), chunks)
    return out


def exclusive_cumsum(values, xp=np, invert=False):
    """[0, v0, v0 + v1, ...] (without the total), as int64; with `invert`, each as ~sum
    (the compact slices of kernel/kir.py), in the same passes."""
    out = xp.empty(values.size, np.int64)
    if xp is not np:
        if values.size:
            out[0] = 0
            xp.cumsum(values[:-1], out=out[1:])
            if invert:
                xp.invert(out, out=out)
        return out
    values = np.ascontiguousarray(values, np.int64)
    # The compiled scan runs at memory speed: a thread's hand-off costs more below this.
    chunks = parts(values.size, xp, 4 * MIN_CHUNK)
    if len(chunks) == 1:
        scan_into(values, out, invert=invert)
        return out
    sums = np.array(run(lambda c, lo, hi: int(values[lo:hi].sum()), chunks), np.int64)
    offsets = np.cumsum(sums) - sums
    run(lambda c, lo, hi: scan_into(values[lo:hi], out[lo:hi], offsets[c], invert=invert),
        chunks)
    return out


def starts_in_order(cap, order, xp=np):
    """(start, total): each element's slice start when the slices of `cap` are laid out in
    `order` (start[order] = exclusive_cumsum(cap[order])), and their sum. On threads, two
    passes over the parts (gather and sum; scan and scatter) instead of one per step."""
    chunks = parts(order.size, xp)
    if len(chunks) == 1:
        ordered = cap[order]
        running = exclusive_cumsum(ordered, xp)
        start = xp.empty_like(cap)
        start[order] = running
        return start, int(running[-1] + ordered[-1]) if cap.size else 0
    ordered = np.empty(order.size, np.int64)

    def gather(c, lo, hi):
        np.take(cap, order[lo:hi], out=ordered[lo:hi])
        return int(ordered[lo:hi].sum())
    sums = np.array(run(gather, chunks), np.int64)
    offsets = np.cumsum(sums) - sums
    start = np.empty_like(cap)

    def place(c, lo, hi):
        running = np.empty(hi - lo, np.int64)
        scan_into(ordered[lo:hi], running, offsets[c])
        start[order[lo:hi]] = running
    run(place, chunks)
    return start, int(sums.sum())


def interleaved(cap, order, lanes, max_padding=None, shared=True):
    """(start, raised, total) for interleaved tapes on the host (layout.py): threads run
    elements `order` (None: element order), each group of `lanes` consecutive threads takes
    its largest capacity (`raised`, per element; `cap` itself unless `shared`, for loops
    whose stack addresses do not depend on it) and the group's slots start at a multiple of
    `lanes`, each thread at its lane (`start`, per element); `total`: slots per stack.
    None where that pads the capacities' sum by more than 1/max_padding of it. Two passes
    over parts of whole groups, one part per thread (group maxima and sums; starts and the
    scatter back to elements), the second only where the padding is acceptable; each
    part is one compiled loop (native.py)."""
    n = cap.size
    if not n:
        return np.empty_like(cap), np.empty_like(cap) if shared else cap, 0
    if max_padding is not None and order is None and _pads_plainly(cap, lanes, max_padding):
        return None
    # In element order the loops run a group per vector instruction (native.VECTOR_LANES),
    # about 4x faster: a thread then pays only for four times the elements.
    fast = order is None and lanes in native.VECTOR_LANES
    chunks = [(lo // lanes * lanes, hi // lanes * lanes if hi < n else n)
              for lo, hi in parts(n, min_chunk=MIN_CHUNK * (4 if fast else 1))]
    group_cap = np.empty(-(-n // lanes), np.int64)
    cap = np.ascontiguousarray(cap, np.int64)
    order = None if order is None else np.ascontiguousarray(order, np.int64)

    def maxima(c, lo, hi):
        return native.group_maxima(cap, order, lo, hi, lanes,
                                   group_cap[lo // lanes:-(-hi // lanes)])
    sums, exact = np.array(run(maxima, chunks), np.int64).reshape(-1, 2).T
    total, exact = int(sums.sum()), int(exact.sum())
    if max_padding is not None and (total - exact) * max_padding > exact:
        return None
    offsets = np.cumsum(sums) - sums
    start = np.empty_like(cap)
    raised = np.empty_like(cap) if shared else cap
    run(lambda c, lo, hi: native.group_place(group_cap[lo // lanes:-(-hi // lanes)], order,
                                             lo, hi, lanes, offsets[c], start,
                                             raised if shared else None), chunks)
    return start, raised, total


def _pads_plainly(cap, lanes, max_padding):
    """Whether ~1,000 groups spread over `cap` (in element order) pad by more than twice
    1/max_padding: then the whole pass would only confirm it (W2's Newton solves: 17%)."""
    padding, exact, _ = sampled_padding(cap, lanes, 1024)
    return padding * max_padding > 2 * exact


def sampled_padding(values, lanes, most):
    """(padding, total, count) over at most `most` groups of `lanes` consecutive values,
    spread over the whole array (a whole group each; a last partial group is left out): the
    slots that raising each group to its largest adds, the sample's sum and its size. On
    one thread: a sample is cheap."""
    whole = values.size // lanes * lanes
    groups = values[:whole].reshape(-1, lanes)
    groups = groups[::max(1, len(groups) // most)]
    total = int(groups.sum())
    if lanes >= 16:
        top = groups.max(axis=1)            # a warp's 32: one pass along the last axis
    else:
        # SIMD's 8, lane by lane: NumPy's max along a short last axis is 3x slower.
        top = groups[:, 0].copy()
        for lane in range(1, lanes):
            np.maximum(top, groups[:, lane], out=top)
    return int(top.sum()) * lanes - total, total, groups.size


def scatter(out, indices, values, xp=np):
    """out[indices] = values, for indices without repeats (a permutation)."""
    chunks = parts(indices.size, xp)
    if len(chunks) == 1:
        out[indices] = values
        return
    run(lambda c, lo, hi: out.__setitem__(indices[lo:hi], values[lo:hi]), chunks)
