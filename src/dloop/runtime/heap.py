"""The adstack heap, backend-neutral: one buffer per backend runtime, reused across launches.

Growth policy: to max(required, 2 x current); if that allocation fails and `required` is
smaller, retry at exactly `required`; past that, or past config.max_adstack_bytes, raise
DloopMemoryError naming the bytes needed. Backends supply allocate(nbytes) and copy.
Regions are offsets, resolved to typed views at each launch, so growing (which copies the
live prefix to a new buffer) never invalidates a tape that is still held. The replaced
buffer is dropped right after the copy: the host backends launch synchronously, so no
launch that could use it is still in flight (a backend with asynchronous launches must keep
it until its queue has passed that point)."""

import weakref
from dataclasses import dataclass

import numpy as np

from ..config import config
from ..errors import DloopMemoryError

ALIGN = 64


@dataclass(frozen=True)
class Region:
    offset: int
    nbytes: int
    dtype: np.dtype


class Heap:
    def __init__(self, allocate, copy):
        self._allocate = allocate       # nbytes -> buffer (may raise MemoryError)
        self._copy = copy               # (dst, src, nbytes) -> None
        self.buffer = None
        self.reserved = 0
        self.used = 0
        self.live_leases = 0
        self.last_used = 0

    def lease(self):
        """Start an execution's allocations. While earlier leases are alive (tapes kept by a
        vjp), their regions stay; otherwise the heap is reused from offset 0."""
        if self.live_leases == 0:
            self.used = 0
        return Lease(self)

    def _release(self):
        self.live_leases -= 1

    def alloc(self, nbytes, dtype, where=None):
        offset = -(-self.used // ALIGN) * ALIGN
        required = offset + int(nbytes)
        limit = config.max_adstack_bytes
        if required > limit:
            raise DloopMemoryError(
                f"the adstacks of this launch need {required:,} bytes, more than "
                f"max_adstack_bytes = {limit:,}. Fewer elements or shorter loops per launch "
                "reduce it; raise dloop.config.max_adstack_bytes if the memory is there", where)
        if required > self.reserved:
            self._grow(required, limit, where)
        self.used = required
        return Region(offset, int(nbytes), np.dtype(dtype))

    def _grow(self, required, limit, where):
        target = min(max(required, 2 * self.reserved), limit)
        try:
            new = self._allocate(target)
        except MemoryError:
            if target == required:
                raise self._oom(required, where) from None
            target = required
            try:
                new = self._allocate(target)
            except MemoryError:
                raise self._oom(required, where) from None
        if self.buffer is not None and self.used:
            self._copy(new, self.buffer, self.used)
        self.buffer, self.reserved = new, target

    def _oom(self, required, where):
        return DloopMemoryError(
            f"could not allocate {required:,} bytes of adstack storage. Fewer elements or "
            "shorter loops per launch reduce it", where)

    def view(self, region):
        count = region.nbytes // region.dtype.itemsize
        if count == 0:                       # the heap may hold no buffer yet
            return np.empty(0, region.dtype)
        return self.buffer[region.offset:region.offset + region.nbytes].view(region.dtype)


class Lease:
    """Keeps an execution's regions alive for as long as any tape made by it is referenced."""

    def __init__(self, heap):
        self.heap = heap
        self.start = heap.used
        self.bytes = 0
        heap.live_leases += 1
        weakref.finalize(self, heap._release)

    def alloc(self, nbytes, dtype, where=None):
        region = self.heap.alloc(nbytes, dtype, where)
        self.bytes += region.nbytes
        self.heap.last_used = max(self.heap.last_used, self.bytes)
        return region

    def mark(self):
        return self.heap.used, self.bytes

    def reset(self, mark):
        """Free everything allocated since mark: valid when nothing made since is still held
        (the tapes of one reverse step of a collective loop)."""
        self.heap.used, self.bytes = mark
