"""STAGE 5 — vulkan: compact adstack starts computed on the device. Sizing runs on the host
for Vulkan (design.md 20), but a loop left in element order and compact needs only each
element's start, ~(exclusive prefix sum of the capacities) (kernel/kir.py), which the host
would compute and then copy to the device: on the GPU machine the scan and the copy took
about 5 ms of W1's gradient at 10^6 elements. Here two kernels of kernel IR do it where the
capacities already are (the loop's trip counts, copied for the kernel anyway): each thread
sums a chunk of CHUNK capacities; the host reads the chunk sums (one value per CHUNK
elements), scans them and copies the chunk offsets back; each thread then writes its
chunk's starts. The total, which sizes the heap, comes from the chunk sums."""

import threading

import numpy as np

from ...kernel import kir
from ...kernel.core import Emitter

CHUNK = 64                   # capacities per thread
MIN_ELEMENTS = 1 << 16       # below this, the host's scan and copy cost less than a wait
_I64 = np.dtype(np.int64)
_kernels = {}
_lock = threading.Lock()


def _chunk(e, tid, n):
    """(lo, hi) of thread tid's chunk, for n capacities."""
    lo = e.wrap(tid) * CHUNK
    end = lo + CHUNK
    return lo, e.select(end < n, end, n)


def _loop(e, lo, hi, init, step):
    """for k in [lo, hi): carry = step(k, carry); the final carry. step emits into e."""
    k, carry = kir.KVar(_I64), kir.KVar(_I64)
    outer, e.stmts = e.stmts, []
    following = step(e.wrap(k), e.wrap(carry))
    body, e.stmts = e.stmts, outer
    out = kir.KVar(_I64)
    e.stmts.append(kir.For(k, lo.x, hi.x, False, [carry], [init.x], body, [following.x],
                           [out]))
    return e.wrap(out)


def _load(e, buf, index):
    out = kir.KVar(_I64)
    e.stmts.append(kir.Load(out, buf, index.x if hasattr(index, "x") else index))
    return e.wrap(out)


def _sums():
    """buf0 capacities, buf1 [n], buf2 (out) each chunk's sum."""
    e, tid = Emitter(), kir.KVar(_I64)
    n = _load(e, 1, kir.Const(0, _I64))
    lo, hi = _chunk(e, tid, n)
    total = _loop(e, lo, hi, e.const(0, _I64), lambda k, s: s + _load(e, 0, k))
    e.stmts.append(kir.Store(2, tid, total.x))
    return kir.Kernel("dloop_chunk_sums", tid, e.stmts, [
        kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64), kir.BufferSpec("out", _I64)])


def _starts():
    """buf0 capacities, buf1 [n], buf2 each chunk's offset, buf3 (out) ~start per element."""
    e, tid = Emitter(), kir.KVar(_I64)
    n = _load(e, 1, kir.Const(0, _I64))
    lo, hi = _chunk(e, tid, n)

    def step(k, running):
        e.stmts.append(kir.Store(3, k.x, (-1 - running).x))      # ~running
        return running + _load(e, 0, k)
    _loop(e, lo, hi, _load(e, 2, tid), step)
    return kir.Kernel("dloop_compact_starts", tid, e.stmts, [
        kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64), kir.BufferSpec("in", _I64),
        kir.BufferSpec("out", _I64)])


def _kernel(backend, name):
    with _lock:
        if name not in _kernels:
            _kernels[name] = {"sums": _sums, "starts": _starts}[name]()
    return backend.compile(_kernels[name])


def compact_starts(backend, cap, upload):
    """(start, total) of compact slices for host capacities `cap` (int64, element order), the
    starts as a device array of ~offsets; None where the host should do it (small launches,
    devices without 64-bit integers). upload: the run's upload, which shares the copy of an
    array the kernels read too."""
    n = cap.size
    if n < MIN_ELEMENTS or not backend.features.int64:
        return None
    on_device = upload(cap, _I64)
    size = backend.upload(np.array([n], _I64), _I64)
    chunks = -(-n // CHUNK)
    sums = backend.empty((chunks,), _I64)
    backend.launch(_kernel(backend, "sums"), chunks, [on_device, size, sums])
    sums = backend.to_numpy(sums)
    offsets = np.cumsum(sums) - sums
    start = backend.empty((n,), _I64)
    backend.launch(_kernel(backend, "starts"), chunks,
                   [on_device, size, backend.upload(offsets, _I64), start])
    return start, int(offsets[-1] + sums[-1])
