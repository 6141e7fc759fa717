"""STAGE 1 — trace: the copies of large captured arrays, kept from one trace to the next.

A traced function's captured NumPy arrays become constants, copied at their first use
(Builder.const_var says why). A function that closes over a large array (W1's trip counts)
paid that copy at every call: on the GPU machine's host an 8 MB copy took 3.5 ms of a
10 ms Vulkan gradient, most of it the page faults of a fresh allocation. Here the last
trace's copy is reused where the same array (the same object, still alive) holds the same
bits, compared in parallel; otherwise a new copy is made, in parallel too.

A kept copy is read-only (no kernel writes a constant, and the flag makes sure), so the
traces that share it, and the sizing memo that keeps it instead of a copy of its own, may
hold it as long as they like. MAX_BYTES bounds what is kept for later traces (the least
recently used given up first); arrays under MIN_BYTES are copied every time, which costs
less than comparing them.

immutable() knows these copies, and the host arrays that freeze() was given: what the
sizing memo keeps of a layout. GPU backends keep the device copy of every array it knows
(Backend.kept_upload)."""

import os
import threading
import weakref
from collections import OrderedDict

import numpy as np

from ..adstack import parallel

MIN_BYTES = 1 << 20
MAX_BYTES = 256 << 20

_lock = threading.Lock()
# id(original) -> (weakref to the original, its copy), least recently used first
_kept = OrderedDict()
_copy_ids = {}         # id(copy) -> weakref to the copy, for immutable()
_freed = []            # ids of originals freed since (list.append is atomic)


def _reset_after_fork():
    global _lock
    _lock = threading.Lock()       # another thread may have held it at the fork


os.register_at_fork(after_in_child=_reset_after_fork)


def copy_of(array):
    """A read-only copy of NumPy `array`'s values: the last trace's where it still holds them,
    else None where `array` is not one this module keeps (small, strided or byte-swapped:
    the caller copies it)."""
    if array.nbytes < MIN_BYTES or not array.flags.c_contiguous or not array.dtype.isnative \
            or array.dtype.itemsize not in (1, 2, 4, 8) or array.dtype.hasobject:
        return None
    key = id(array)
    with _lock:
        _drop_freed()
        entry = _kept.get(key)
    if entry is not None:
        ref, kept = entry
        if ref() is array and kept.shape == array.shape and kept.dtype == array.dtype and \
                same_bits(array, kept):
            with _lock:
                if key in _kept:
                    _kept.move_to_end(key)
            return kept
    kept = np.empty_like(array)
    parallel.copy(kept.reshape(-1), array.reshape(-1))
    kept.flags.writeable = False
    if kept.nbytes <= MAX_BYTES:
        _keep(key, array, kept)
    return kept


def immutable(array):
    """Whether `array` is a copy this module made, or one given to freeze() (read-only,
    never written): whoever would copy it to keep its values may keep it as it is. (No
    lock: one dict read, and the weakref says whether its entry is this array's.)"""
    ref = _copy_ids.get(id(array))
    return ref is not None and ref() is array


def freeze(array):
    """Make a host array that dloop owns and will not write again (a layout the sizing memo
    keeps) read-only and known to immutable()."""
    array.flags.writeable = False
    key = id(array)
    ref = weakref.ref(array, lambda _, key=key: _forget_frozen(key))
    with _lock:
        _copy_ids[key] = ref


def same_bits(array, other):
    """Whether two NumPy arrays of one shape and dtype (of 1, 2, 4 or 8 bytes an item) hold
    the same bits, compared as unsigned integers, in one part per thread."""
    bits = np.dtype(f"u{array.dtype.itemsize}")
    return parallel.equal(array.view(bits), other.view(bits))


def _keep(key, array, kept):
    try:
        ref = weakref.ref(array, lambda _, key=key: _forget(key))
    except TypeError:
        return
    with _lock:
        _drop_freed()
        old = _kept.pop(key, None)
        if old is not None:
            _copy_ids.pop(id(old[1]), None)
        _kept[key] = (ref, kept)
        _copy_ids[id(kept)] = weakref.ref(kept)
        total = sum(c.nbytes for _, c in _kept.values())
        while total > MAX_BYTES:
            _, (_, dropped) = _kept.popitem(last=False)
            _copy_ids.pop(id(dropped), None)
            total -= dropped.nbytes


def _forget(key):
    """A weakref callback: an original freed, its copy goes with it where the lock is free.
    Garbage collection may run it anywhere, inside this module's locked code too, where
    waiting for the lock would deadlock: then the next copy_of forgets it."""
    _freed.append(key)
    if _lock.acquire(blocking=False):
        try:
            _drop_freed()
        finally:
            _lock.release()


def _forget_frozen(key):
    """A weakref callback for a frozen array, as _forget: where the lock is busy, the entry
    stays, dead (immutable() reads it as absent), until the key is used again."""
    if _lock.acquire(blocking=False):
        try:
            ref = _copy_ids.get(key)
            if ref is not None and ref() is None:
                del _copy_ids[key]
        finally:
            _lock.release()


def _drop_freed():
    """Under _lock: forget the copies of originals freed since."""
    while _freed:
        key = _freed.pop()
        entry = _kept.get(key)
        if entry is not None and entry[0]() is None:
            del _kept[key]
            _copy_ids.pop(id(entry[1]), None)
