"""STAGE 5 — cuda: the interleaved adstack layout of a loop (adstack/layout.py, kir.py's
addressing with L = 32) in two kernels and one scan, instead of the twenty-odd CuPy calls
of the array-namespace version (layout._interleaved and its two scatters: 0.55 ms against
0.12 ms at 10^6 elements on an H100, each CuPy call costing its launch and Python).

A warp is a group: its 32 threads read the capacities of the elements they run (through
the order), take the warp's maximum with shuffles, and lane 0 writes the group's slots
(32 x that maximum). An inclusive scan of the groups' slots gives each group's end; the
second kernel writes each element's start (its group's first slot plus its lane) and its
raised capacity, at the element's index (or at the slot, for kernels that read them there).
The total, the last end, is the one value read back: the heap is sized from it.

The order the threads run the elements in (adstack/parallel.order_by_tiles: tiles within
classes of work) is one kernel computing 16-bit keys, the largest work read on the device,
and CuPy's stable sort of them: a stable sort of the 64-bit work, as before, took 1.3 ms at
10^7 elements on an H100, and kernels that read and wrote through its order were slower.

The extremes of an array of trip counts (their least, largest and sum: parallel.extremes)
take two launches and one read back."""

import threading

import cupy
import numpy as np

from ...adstack import parallel

LANES = 32
_BLOCK = 256                 # a multiple of LANES: groups never straddle blocks
_MAX_PARTS = 1024            # blocks of extremes' first launch: a part each
_EXTREMES_BLOCK = 1024       # the second launch's one block, over the parts

SOURCE = r"""
extern "C" __global__ void dloop_group_slots(const long long* cap, const long long* order,
                                             int ordered, long long n, long long* slots) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long c = t < n ? cap[ordered ? order[t] : t] : 0;
  for (int d = 16; d > 0; d >>= 1) c = max(c, __shfl_xor_sync(0xffffffffu, c, d));
  if ((threadIdx.x & 31) == 0 && t < n) slots[t >> 5] = 32 * c;
}

extern "C" __global__ void dloop_place(const long long* order, int ordered, long long n,
                                       const long long* ends, const long long* slots,
                                       long long* start, long long* raised) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const long long g = t >> 5, e = ordered ? order[t] : t;   // ordered = 0: at the slot
  start[e] = ends[g] - slots[g] + (t & 31);
  raised[e] = slots[g] >> 5;
}

extern "C" __global__ void dloop_tile_key(const long long* work, const long long* longest,
                                          long long n, long long tile, int fine,
                                          unsigned short* key) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const long long most = *longest;
  const int shift = most > 255 ? 56 - __clzll(most) : 0;    // bit length - 8
  const int k = 255 - (int)(work[t] > 0 ? work[t] >> shift : 0);
  key[t] = (unsigned short)(((k >> fine) << (8 + fine)) | ((t / tile) << fine)
                            | (k & ((1 << fine) - 1)));
}

// min, max and wrapping sum of v[0:n) in two launches: each block's grid-stride share to
// part[3 b], part[3 b + 1], part[3 b + 2], then one block over the blocks' parts to out[0:3].
__device__ void dloop_block_extremes(long long lo, long long hi, unsigned long long sum,
                                     long long* out) {
  __shared__ long long lows[32], highs[32];
  __shared__ unsigned long long sums[32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int round = 0; round < 2; round++) {
    for (int d = 16; d > 0; d >>= 1) {
      lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, d));
      hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, d));
      sum += __shfl_xor_sync(0xffffffffu, sum, d);
    }
    if (round) break;
    if (lane == 0) { lows[warp] = lo; highs[warp] = hi; sums[warp] = sum; }
    __syncthreads();
    if (warp) return;
    const bool held = lane < (int)(blockDim.x >> 5);
    lo = held ? lows[lane] : 0x7fffffffffffffffLL;
    hi = held ? highs[lane] : -0x7fffffffffffffffLL - 1;
    sum = held ? sums[lane] : 0;
  }
  if (lane == 0) { out[0] = lo; out[1] = hi; out[2] = (long long)sum; }
}

extern "C" __global__ void dloop_extremes_part(const long long* v, long long n,
                                               long long* part) {
  long long lo = 0x7fffffffffffffffLL, hi = -0x7fffffffffffffffLL - 1;
  unsigned long long sum = 0;
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n;
       t += (long long)gridDim.x * blockDim.x) {
    lo = min(lo, v[t]);
    hi = max(hi, v[t]);
    sum += (unsigned long long)v[t];
  }
  dloop_block_extremes(lo, hi, sum, part + 3 * blockIdx.x);
}

extern "C" __global__ void dloop_extremes_total(const long long* part, int parts,
                                                long long* out) {
  long long lo = 0x7fffffffffffffffLL, hi = -0x7fffffffffffffffLL - 1;
  unsigned long long sum = 0;
  for (int b = threadIdx.x; b < parts; b += blockDim.x) {
    lo = min(lo, part[3 * b]);
    hi = max(hi, part[3 * b + 1]);
    sum += (unsigned long long)part[3 * b + 2];
  }
  dloop_block_extremes(lo, hi, sum, out);
}

extern "C" __global__ void dloop_differs(const unsigned int* a, const unsigned int* b,
                                         long long n, int* differs) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n && a[t] != b[t]) *differs = 1;
}
"""

_module = {}
_lock = threading.Lock()


def _function(name):
    """The kernel `name` of SOURCE, looked up once (RawModule.get_function costs a few us,
    and extremes launches two at every guessed call)."""
    found = _module.get(name)
    if found is None:
        with _lock:
            if "module" not in _module:
                _module["module"] = cupy.RawModule(code=SOURCE)
            found = _module[name] = _module["module"].get_function(name)
    return found


def interleaved(cap, order, by_slot=False):
    """(start, raised, total) of the interleaved layout for per-element capacities `cap`
    (int64 CuPy array) with threads running elements `order` (None: element order): what
    layout._interleaved and the scatters through the order give, bit for bit; with
    `by_slot`, per slot instead (what _interleaved gives before the scatters: kernels with
    kir's stacks_by_slot read them there, and the scatters are saved). Capacities have
    passed the size check, so 32 x a capacity does not overflow."""
    n = cap.size
    if not n:
        empty = cupy.empty(0, np.int64)
        return empty, empty.copy(), 0
    ordered = order is not None
    indices = order if ordered else cap          # unread when not ordered
    grid = ((n + _BLOCK - 1) // _BLOCK,)
    slots = cupy.empty(-(-n // LANES), np.int64)
    _function("dloop_group_slots")(grid, (_BLOCK,), (cap, indices, np.int32(ordered),
                                                      np.int64(n), slots))
    ends = cupy.cumsum(slots)
    start, raised = cupy.empty(n, np.int64), cupy.empty(n, np.int64)
    _function("dloop_place")(grid, (_BLOCK,), (indices, np.int32(ordered and not by_slot),
                                               np.int64(n), ends, slots, start, raised))
    return start, raised, int(ends[-1])


def tile_order(work):
    """parallel.order_by_tiles of `work` (a CuPy array), without reading the largest work
    back to the host."""
    n = work.size
    if not n:
        return cupy.empty(0, np.int64)
    work = cupy.ascontiguousarray(work, np.int64)
    key = cupy.empty(n, np.uint16)
    tile = parallel.order_tile(n)
    _function("dloop_tile_key")(((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                                (work, work.max(), np.int64(n), np.int64(tile),
                                 np.int32(8 - parallel.ORDER_CLASS_BITS), key))
    return cupy.argsort(key, kind="stable").astype(np.int64, copy=False)


def start_extremes(values):
    """parallel.extremes of a non-empty int64 CuPy array, (min, max, wrapping sum), in two
    launches queued now; returns the function that reads them back. CuPy's min, max and sum
    and a stack of them took 0.17 to 0.24 ms of W2's gradient at 10^6 elements on an H100,
    at every call whose capacities were guessed (runtime/guess.py reads the trip counts the
    launch made)."""
    if values.dtype != np.int64 or not values.flags.c_contiguous:
        values = cupy.ascontiguousarray(values, np.int64)
    n = values.size
    parts = max(1, min(_MAX_PARTS, -(-n // (4 * _BLOCK))))
    part, out = cupy.empty(3 * parts, np.int64), cupy.empty(3, np.int64)
    _function("dloop_extremes_part")((parts,), (_BLOCK,), (values, np.int64(n), part))
    _function("dloop_extremes_total")((1,), (_EXTREMES_BLOCK,), (part, np.int32(parts), out))
    return lambda: tuple(int(x) for x in out.get())


parallel.DEVICE_EXTREMES[cupy.ndarray] = start_extremes


def all_equal(pairs):
    """Whether each (old, new) pair of arrays (of one shape and dtype: trip counts, work, a
    guess) holds the same values. Device arrays of integers are compared by one kernel per
    pair, on 32-bit words, with one read back for all: cupy.array_equal costs two launches
    and a read back per pair (0.24 ms of W1's gradient at 10^6 elements on an H100, for
    three arrays)."""
    on_device = []
    for old, new in pairs:
        if isinstance(old, np.ndarray) and isinstance(new, np.ndarray):
            if not parallel.equal(old, new):      # as the host's sizing compares
                return False
        elif all(isinstance(a, cupy.ndarray) and a.dtype.kind in "iu" and a.nbytes % 4 == 0
                 and a.flags.c_contiguous for a in (old, new)):
            on_device.append((old, new))
        elif not bool(cupy.array_equal(cupy.asarray(old), cupy.asarray(new))):
            return False
    if not on_device:
        return True
    differs = cupy.zeros(1, np.int32)
    for old, new in on_device:
        n = old.nbytes // 4
        if n:
            _function("dloop_differs")(((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                                       (old, new, np.int64(n), differs))
    return not int(differs.get()[0])
