"""STAGE 5 — vulkan: prefix sums on the device, and compact adstack starts from them. Sizing
runs on the host for Vulkan (design.md 20), but a loop left in element order and compact
needs only each element's start, ~(exclusive prefix sum of the capacities) (kernel/kir.py),
which the host would compute and then copy to the device: on the GPU machine the scan and
the copy took about 5 ms of W1's gradient at 10^6 elements. Here two kernels of kernel IR
do it where the capacities already are (the loop's trip counts, copied for the kernel
anyway): each thread sums a chunk of CHUNK values; the host reads the chunk sums (one value
per CHUNK elements), scans them and copies the chunk offsets back; each thread then writes
its chunk's prefix sums. The total comes from the chunk sums. The element order and the
interleaved layout (order.py) scan the same way."""

import threading
import weakref

import numpy as np

from ...kernel import kir
from ...kernel.core import Emitter

CHUNK = 64                   # capacities per thread
MIN_ELEMENTS = 1 << 16       # below this, the host's scan and copy cost less than a wait
_I64 = np.dtype(np.int64)
_compiled = weakref.WeakKeyDictionary()    # backend -> {name: artifact}
_lock = threading.Lock()


def chunk(e, tid, n, size=CHUNK):
    """(lo, hi) of thread tid's chunk of `size` values, of n."""
    lo = e.wrap(tid) * size
    end = lo + size
    return lo, e.select(end < n, end, n)


def loop(e, lo, hi, init, step):
    """for k in [lo, hi): carry = step(k, carry); the final carry. step emits into e."""
    k, carry = kir.KVar(_I64), kir.KVar(_I64)
    outer, e.stmts = e.stmts, []
    following = step(e.wrap(k), e.wrap(carry))
    body, e.stmts = e.stmts, outer
    out = kir.KVar(_I64)
    e.stmts.append(kir.For(k, lo.x, hi.x, False, [carry], [init.x], body, [following.x],
                           [out]))
    return e.wrap(out)


def load(e, buf, index):
    out = kir.KVar(_I64)
    e.stmts.append(kir.Load(out, buf, index.x if hasattr(index, "x") else index))
    return e.wrap(out)


def _sums():
    """buf0 capacities, buf1 [n], buf2 (out) each chunk's sum."""
    e, tid = Emitter(), kir.KVar(_I64)
    n = load(e, 1, kir.Const(0, _I64))
    lo, hi = chunk(e, tid, n)
    total = loop(e, lo, hi, e.const(0, _I64), lambda k, s: s + load(e, 0, k))
    e.stmts.append(kir.Store(2, tid, total.x))
    return kir.Kernel("dloop_chunk_sums", tid, e.stmts, [
        kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64), kir.BufferSpec("out", _I64)])


def _starts(invert):
    """buf0 values, buf1 [n], buf2 each chunk's offset, buf3 (out) the exclusive prefix sum
    per value (~ of it, with invert)."""
    e, tid = Emitter(), kir.KVar(_I64)
    n = load(e, 1, kir.Const(0, _I64))
    lo, hi = chunk(e, tid, n)

    def step(k, running):
        e.stmts.append(kir.Store(3, k.x, ((-1 - running) if invert else running).x))
        return running + load(e, 0, k)
    loop(e, lo, hi, load(e, 2, tid), step)
    return kir.Kernel("dloop_compact_starts" if invert else "dloop_prefix_sums", tid,
                      e.stmts, [kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64),
                                kir.BufferSpec("in", _I64), kir.BufferSpec("out", _I64)])


_BUILDERS = {"sums": _sums, "starts": lambda: _starts(False), "compact": lambda: _starts(True)}


def kernel(backend, name, builders=_BUILDERS):
    """The compiled sizing kernel `name`, built and compiled once per backend: its program
    cache's lookup (legalizing and printing the kernel for the key) took 0.2 to 0.5 ms per
    launch on the GPU machine's host, for kernels that run for less."""
    with _lock:
        found = _compiled.setdefault(backend, {}).get(name)
    if found is None:         # compiled outside the lock: a first compile takes a while
        found = backend.compile(builders[name]())
        with _lock:
            found = _compiled[backend].setdefault(name, found)
    return found


def exclusive_sums(backend, values, n, invert=False):
    """(the exclusive prefix sums of device int64 `values` (each as ~sum with invert), as a
    device array, and the values' total): one read of the chunk sums to the host."""
    size = backend.upload(np.array([n], _I64), _I64)
    chunks = -(-n // CHUNK)
    sums = backend.empty((chunks,), _I64)
    backend.launch(kernel(backend, "sums"), chunks, [values, size, sums])
    sums = backend.to_numpy(sums)
    offsets = np.cumsum(sums) - sums
    out = backend.empty((n,), _I64)
    backend.launch(kernel(backend, "compact" if invert else "starts"), chunks,
                   [values, size, backend.upload(offsets, _I64), out])
    return out, int(offsets[-1] + sums[-1])


def compact_starts(backend, cap, upload):
    """(start, total) of compact slices for host capacities `cap` (int64, element order), the
    starts as a device array of ~offsets; None where the host should do it (small launches,
    devices without 64-bit integers). upload: the run's upload, which shares the copy of an
    array the kernels read too."""
    n = cap.size
    if n < MIN_ELEMENTS or not backend.features.int64:
        return None
    return exclusive_sums(backend, upload(cap, _I64), n, invert=True)
