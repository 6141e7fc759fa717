"""A launch's adstack sizing kept from the last call of the same kernel plan: the capacities,
the order its elements run in and their slices, reused where every array the sizing read
(the trip counts of its capacity expressions, the work of earlier loops) equals the last
call's. Equality is checked on every call, by value: an array changed in place, or a new
one, sizes anew. Only the heap regions are allocated again.

Why: a user who calls grad again with the same trip counts (a fit over parameters, the
usual loop) pays for the sizing once. On a GPU it is most of the fixed per-call work: W1's
gradient at 10^6 elements spent 0.73 of its 2.1 ms on the H100 in capacities, order and
layout (small kernels and a read-back each), against one comparison here.

MAX_BYTES bounds the memory held by all plans' kept sizings together (on the device where
sizing runs there), the least recently used given up first: each compiled program keeps its
plans, and a program cache of hundreds of programs could otherwise hold that much per
program. A sizing larger than MAX_BYTES alone is not kept.

Loops sized by counting (no capacity expression) are not kept: their counts are this
call's. Loops sized by a guess from the last count (guess.py) are, under that guess."""


import os
import threading
import weakref
from collections import OrderedDict

import numpy as np

from ..adstack.layout import LoopLayout
from ..config import config
from ..trace import captured_copies

MAX_BYTES = 128 << 20

_lock = threading.Lock()
# id(plan) -> (weakref to the plan, bytes its memo holds), least recently used first
_held = OrderedDict()
_freed = []           # (id, weakref) of plans freed since (list.append is atomic)


class _Memo:
    __slots__ = ("key", "inputs", "caps", "order", "layouts")

    def __init__(self, key, inputs, caps, order, layouts):
        self.key, self.inputs, self.caps, self.order = key, inputs, caps, order
        self.layouts = layouts


def key(n):
    """The settings a launch's sizing depends on, read once for the whole sizing: another
    thread may change them meanwhile (config.override), and a sizing made under one
    capacity must not be kept under another."""
    return (n, config.adstack_capacity, config.max_adstack_bytes)


def inputs(plan, env, work, sizing_array, longest=None, capacity=None):
    """The arrays a launch's sizing reads, or None where it cannot be kept (a counted loop).
    longest: {loop_id: trips} where counted loops are sized by a guess (guess.py), whose
    capacities are then those trips, the same for every element. capacity: the launch's
    reading of config.adstack_capacity (key()[1])."""
    if capacity is not None:
        return list(work)
    values = []
    for nest in plan.nests:
        for loop_id, expr in nest.exprs.items():
            if expr is None:
                if longest is None:
                    return None
                values.append(np.array([longest[loop_id]], dtype=np.int64))
                continue
            values.extend(sizing_array(env[v]) for v in sorted(expr.vars(), key=lambda v: v.id))
    return values + list(work)


def lookup(plan, key, values, all_equal, immutable=captured_copies.immutable):
    """(caps, order, layouts) of the last call where `values` equal its inputs, else None.
    all_equal(pairs): whether each (old, new) pair of arrays of one shape and dtype holds
    the same values (Execution._all_equal: on a GPU, one read back for all of them).
    immutable: as for store()."""
    memo = plan.sizing_memo
    if memo is None or memo.key != key or len(memo.inputs) != len(values):
        return None
    for old, new in zip(memo.inputs, values):
        if old.shape != new.shape or old.dtype != new.dtype:
            return None
    # A trace's kept copy of a captured array (captured_copies) is never written: the same
    # one is the same values.
    pairs = [(old, new) for old, new in zip(memo.inputs, values) if old is not new]
    if pairs and not all_equal(pairs):
        return None
    if pairs:
        _adopt(plan, memo, values, immutable)
    with _lock:
        if id(plan) in _held:               # the last given up is the least recently used
            _held.move_to_end(id(plan))
    return memo.caps, memo.order, memo.layouts


def _adopt(plan, memo, values, immutable):
    """After a hit by value: keep the new inputs that are never written (the kept copy of
    a new array that holds the same trip counts, each call's the same object from then
    on) in place of the old, so that the next call finds them by identity. W1's Vulkan
    gradient given new arrays of the same values compared 8 MB at every later call, 0.5 ms
    of 2.4 on the H100."""
    swap = {id(old): new for old, new in zip(memo.inputs, values)
            if old is not new and immutable(new)}
    if not swap:
        return
    caps, layouts = _swapped(memo.caps, memo.layouts, swap)
    adopted = _Memo(memo.key, [swap.get(id(v), v) for v in memo.inputs], caps, memo.order,
                    layouts)
    with _lock:
        # Only in place of the memo compared: since, another thread may have kept a sizing
        # of other values (this one would push it out), or given this one up for the
        # budget (set back, it would be held but no longer counted in MAX_BYTES).
        if plan.sizing_memo is memo:
            plan.sizing_memo = adopted


def _swapped(caps, layouts, arrays):
    """caps and layouts with each capacity array that `arrays` (id -> array) names replaced
    by its entry there: a capacity may be one of the inputs whose array the memo keeps."""
    return ({k: arrays.get(id(c), c) for k, c in caps.items()},
            {k: LoopLayout(arrays.get(id(lay.cap), lay.cap), lay.start, lay.regions)
             for k, lay in layouts.items()})


def store(plan, key, values, caps, order, layouts, xp, immutable=captured_copies.immutable):
    """immutable(array): whether an input is never written (a trace's kept copy of a
    captured array, or its kept device copy): the memo keeps it instead of a copy."""
    # Each array once: a capacity may be an input itself, a layout's cap the capacities.
    kept = [*values, *caps.values(), order] + [
        a for lay in layouts.values() for a in (lay.cap, lay.start)]
    held = sum(int(a.nbytes) for a in {id(a): a for a in kept if hasattr(a, "nbytes")}.values())
    if held > MAX_BYTES:
        with _lock:
            plan.sizing_memo = None
            _held.pop(id(plan), None)
        return
    # The capacities may be the caller's own trip-count array (capacity._bounds_as_is),
    # which the caller may change in place after this call: keep the memo's copy instead.
    # (A guess's trips are a host array: its copy stays one, and is compared on the host.)
    copies = [v if immutable(v) else v.copy() if isinstance(v, np.ndarray)
              else xp.array(v, copy=True) for v in values]
    caps, layouts = _swapped(caps, layouts, {id(v): c for v, c in zip(values, copies)})
    # What the memo made or keeps of the host's sizing (its copies of the inputs, a layout
    # made on the host where no element order was computed on the device) is its own from
    # here on, never written: GPU backends then keep the device copies too, instead of
    # copying capacities and starts (8 bytes an element each) to the device at every call.
    for array in [*copies, *(lay.start for lay in layouts.values())]:
        if isinstance(array, np.ndarray) and not captured_copies.immutable(array):
            captured_copies.freeze(array)
    memo = _Memo(key, copies, caps, order, layouts)
    with _lock:
        # Set under the lock, as the budget's and _adopt's changes are: set before it,
        # another thread's store could give it up before it is counted, and an adoption
        # replace it with an older sizing.
        plan.sizing_memo = memo
        _drop_freed()
        _held.pop(id(plan), None)
        _held[id(plan)] = (weakref.ref(plan, _forget(id(plan))), held)
        total = sum(size for _, size in _held.values())
        while total > MAX_BYTES:
            _, (ref, size) = _held.popitem(last=False)
            total -= size
            older = ref()
            if older is not None:
                older.sizing_memo = None


def _forget(key):
    """A weakref callback: a plan freed (its program left the cache) holds nothing. It only
    notes the plan: garbage collection may run it anywhere, inside this module's locked
    code too, where taking the lock again would deadlock."""
    def forget(ref):
        _freed.append((key, ref))
    return forget


def _drop_freed():
    """Under _lock: forget the plans freed since."""
    while _freed:
        key, ref = _freed.pop()
        if key in _held and _held[key][0] is ref:
            del _held[key]


def _after_fork():
    """A lock another thread held at the fork stays held in the child forever."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def held_bytes():
    """The bytes all kept sizings hold now."""
    with _lock:
        _drop_freed()
        return sum(size for _, size in _held.values())
