"""The adstack heap, backend-neutral: one buffer per backend and thread, reused across launches.

Growth policy: to max(required, 2 x current); if that allocation fails and `required` is
smaller, retry at exactly `required`; past that, or past config.max_adstack_bytes, raise
DloopMemoryError naming the bytes needed. The backend supplies the memory (heap_alloc,
heap_copy, heap_region, release, caps.align). Regions are offsets, resolved to typed views at
each launch, so growing (which copies the live prefix to a new buffer) never invalidates a tape
that is still held; the replaced buffer goes to backend.release, which frees it only once no
queued launch can use it.

Allocation is a bump from the top of the live leases. A lease is one execution's allocations
(a grad call, or the forward half of a vjp whose pullback is alive); when it is collected its
bytes return, so a kept pullback pins only its own tapes, not every call made after it. The
lock is held by an execution for its whole run (re-entrantly, for collective bodies): a pullback
run from another thread waits rather than interleaving with this heap's owner."""

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ..config import config
from ..errors import DloopMemoryError


@dataclass(frozen=True)
class Region:
    offset: int
    nbytes: int
    dtype: np.dtype


class Heap:
    def __init__(self, memory):
        self._memory = memory
        self.lock = threading.RLock()
        self.buffer = None
        self.reserved = 0
        self.last_used = 0
        self._tops = {}               # live lease id -> end of its last allocation

    @property
    def used(self):
        return max(self._tops.values(), default=0)

    def lease(self):
        return Lease(self)

    def alloc(self, lease, nbytes, dtype, where=None):
        align = self._memory.caps.align
        offset = -(-self.used // align) * align
        required = offset + int(nbytes)
        limit = config.max_adstack_bytes
        if required > limit:
            # The heap's extent, not only this launch's bytes: regions start on the backend's
            # alignment, and a live vjp pullback's tapes stay below them until it is freed.
            held = f" ({offset:,} of them held below it: alignment and the tapes of live " \
                "vjp pullbacks)" if offset else ""
            raise DloopMemoryError(
                f"the adstacks of this launch need the heap to hold {required:,} bytes"
                f"{held}, more than max_adstack_bytes = {limit:,}. Fewer elements or shorter "
                "loops per launch reduce it; drop pullbacks no longer needed; raise "
                "dloop.config.max_adstack_bytes if the memory is there", where)
        if required > self.reserved:
            self._grow(required, limit, where)
        self._tops[id(lease)] = required
        return Region(offset, int(nbytes), np.dtype(dtype))

    def _grow(self, required, limit, where):
        target = min(max(required, 2 * self.reserved), limit)
        try:
            new = self._memory.heap_alloc(target)
        except MemoryError:
            if target == required:
                raise self._oom(required, where) from None
            target = required
            try:
                new = self._memory.heap_alloc(target)
            except MemoryError:
                raise self._oom(required, where) from None
        used = self.used
        old = self.buffer
        if old is not None and used:
            self._memory.heap_copy(new, old, used)
        self.buffer, self.reserved = new, target
        if old is not None:
            self._memory.release(old)

    @staticmethod
    def _oom(required, where):
        return DloopMemoryError(
            f"could not allocate {required:,} bytes of adstack storage. Fewer elements or "
            "shorter loops per launch reduce it", where)

    def view(self, region):
        return self._memory.heap_region(self.buffer if region.nbytes else None, region.offset,
                                        region.nbytes, region.dtype)

    def _forget(self, lease_id):
        with self.lock:
            self._tops.pop(lease_id, None)


class Lease:
    """Keeps an execution's regions alive for as long as any tape made by it is referenced."""

    def __init__(self, heap):
        self.heap = heap
        self.bytes = 0
        weakref.finalize(self, heap._forget, id(self))

    def alloc(self, nbytes, dtype, where=None):
        region = self.heap.alloc(self, nbytes, dtype, where)
        self.bytes += region.nbytes
        self.heap.last_used = max(self.heap.last_used, self.bytes)
        return region

    def mark(self):
        return self.heap._tops.get(id(self)), self.bytes

    def reset(self, mark):
        """Free everything this lease allocated since mark: valid when nothing made since is
        still held (the tapes of one reverse step of a collective loop)."""
        top, self.bytes = mark
        if top is None:
            self.heap._tops.pop(id(self), None)
        else:
            self.heap._tops[id(self)] = top
