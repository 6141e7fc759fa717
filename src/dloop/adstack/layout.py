"""STAGE 3b — where each element's stack slots live: thread slices laid out by an exclusive
prefix sum of per-element capacities, so storage is the sum of the trip counts, not
elements x the longest trip. The total is checked against config.max_adstack_bytes before
the prefix sum, so an int64 sum never wraps around and nothing is allocated for a loop that
cannot fit.

On backends whose threads run in lockstep groups of L (caps.tape_lanes, a GPU warp), each
group of L consecutive threads shares one capacity, its largest member's, and their slots
are interleaved (kernel/kir.py): slot k of the group's stacks is L neighbouring words, one
per thread, so a warp's push is one coalesced store instead of L scattered ones. The
threads run in order of decreasing work, so a group's capacities differ little: the padding
is at most L times the longest capacity in all (the sum telescopes over sorted groups)."""

from dataclasses import dataclass

import numpy as np

from ..config import config
from ..errors import DloopMemoryError
from . import parallel
from .capacity import SATURATED

# Interleaved host layouts pad at most 1/MAX_PADDING of the tape; others stay compact. A
# quarter lets W2's Newton solves (3 to 5 steps in element order: 20.7%) push and pop
# whole vectors (design.md 16); one long element among short ones pads far more.
MAX_PADDING = 4


@dataclass
class LoopLayout:
    cap: object              # int64 per element: slots per stack (NumPy or device array)
    start: object            # int64 per element: exclusive prefix sum of cap
    regions: dict            # dtype name -> (np.dtype, number of slots for the whole loop)


def loop_layout(info, cap, order=None, xp=np, lanes=1, compact=False, interleave=None,
                pack=None, by_slot=False):
    """With `order` (the elements in the order threads run them), the slices are laid out in
    that order, so threads that run together write neighbouring memory (for launches of at
    least parallel.MIN_CHUNK elements, or any launch with lanes > 1; smaller ones keep
    element order). xp: the array namespace of `cap` and `order` (NumPy, or the device's
    where sizing runs there). lanes: caps.tape_lanes, the interleaving group (module
    docstring). compact: caps.compact_tapes, whether a loop that interleaving would pad by
    more than 1/MAX_PADDING may stay compact instead (negative starts, kernel/kir.py).
    interleave: the backend's fused device version of the interleaved layout
    (Backend.interleave, or device_interleave where the order is on the device), used in
    place of _interleaved and its scatters (where it pads by more than 1/MAX_PADDING and
    `compact` allows, the loop stays compact instead). pack: the backend's device version
    of compact slice starts in element order (for host sizing, Backend.compact_starts with
    the run's upload), which may decline. by_slot: starts and capacities per slot instead
    of per element (caps.slot_layouts; interleaved, with the device's interleave or the
    array-namespace version)."""
    if by_slot and lanes == 1:
        raise AssertionError("slot-ordered layouts are interleaved ones")
    cap = xp.ascontiguousarray(cap, dtype=np.int64)
    slots = _check_size(info, cap)
    if cap.size < parallel.MIN_CHUNK and lanes == 1:
        # Small tapes stay in cache whatever their order: the permutation would cost more
        # than the locality it buys.
        order = None
    laid = interleave(cap, order, by_slot) if lanes > 1 and interleave is not None else False
    may_compact = compact and not by_slot
    if laid and may_compact and ((laid[2] - slots) * MAX_PADDING > slots or
                                 not _fits(info, laid[2])):
        # The device's layout pads too much (its order follows the launch's total work, which
        # this loop's capacities need not), or past what exact slices fit in: compact slices,
        # whose starts suit any order.
        start, total = _compact(cap, None, pack)
    elif laid:
        start, cap, total = laid
        _check_size(info, cap, padded=total)
    elif lanes > 1 and (xp is not np or by_slot):
        ordered = cap if order is None else parallel.take(cap, order, xp)
        ordered, running, total = _interleaved(ordered, lanes, xp)
        _check_size(info, ordered, padded=total)
        if order is None or by_slot:
            start, cap = running, ordered
        else:
            start, cap = xp.empty_like(cap), xp.empty_like(cap)
            parallel.scatter(start, order, running, xp)
            parallel.scatter(cap, order, ordered, xp)
    elif lanes > 1:
        # Each element keeps its own capacity where no two stacks share a region: their
        # addresses then do not depend on it (kernel/kir.py), and a scatter is saved.
        shared = len(set(map(np.dtype, info.carry_dtypes))) < len(info.carry_dtypes)
        interleaved = parallel.interleaved(cap, order, lanes, MAX_PADDING if compact else None,
                                           shared)
        if interleaved is None or (compact and not _fits(info, interleaved[2])):
            start, total = _compact(cap, order, pack)
        else:
            start, cap, total = interleaved
            _check_size(info, cap, padded=total)
    else:
        start, total = _packed(cap, order, xp)
    regions = {}
    for dtype in map(np.dtype, info.carry_dtypes):
        count = sum(1 for d in info.carry_dtypes if np.dtype(d) == dtype)
        regions[dtype.name] = (dtype, count * total)
    return LoopLayout(cap, start, regions)


def _packed(cap, order, xp=np):
    """(start, total) of slices packed one after another in `order` (None: element order)."""
    if order is not None:
        return parallel.starts_in_order(cap, order, xp)
    start = parallel.exclusive_cumsum(cap, xp)
    return start, int(start[-1] + cap[-1]) if cap.size else 0


def _compact(cap, order, pack=None):
    """Compact slices under interleaved addressing (kernel/kir.py): each start as ~start, so
    negative, which the kernel reads as a slice of its own. Small tapes keep element order,
    as with lanes = 1. pack: see loop_layout."""
    if order is None or cap.size < parallel.MIN_CHUNK:
        on_device = pack(cap) if pack is not None else None
        if on_device is not None:
            return on_device
        start = parallel.exclusive_cumsum(cap, invert=True)
        return start, int(~start[-1] + cap[-1]) if cap.size else 0
    start, total = _packed(cap, order)
    return np.invert(start, out=start), total


def _interleaved(ordered, lanes, xp):
    """On a device, for capacities in thread order: each thread's capacity raised to its
    group's largest, the starts (group start + the thread's lane; group starts are
    multiples of `lanes`), and the slots per stack of the whole loop (the host's twin:
    parallel.interleaved). Capacities already passed _check_size, so a group's
    lanes * capacity cannot overflow int64."""
    n = ordered.size
    groups = -(-n // lanes)
    # One reduction kernel beats `lanes` strided launches.
    padded = xp.zeros(groups * lanes, np.int64)
    padded[:n] = ordered
    group_cap = padded.reshape(groups, lanes).max(axis=1)
    group_start = parallel.exclusive_cumsum(group_cap * lanes, xp)
    total = int(group_start[-1] + group_cap[-1] * lanes) if n else 0
    start = (group_start[:, None] + xp.arange(lanes, dtype=np.int64)[None, :]).reshape(-1)
    return xp.repeat(group_cap, lanes)[:n], start[:n], total


def _slots_at_most(cap):
    """The capacities' sum, or a float a little above it. On the host an int64 sum is
    exact, and 4x faster than a float64 one, where the largest capacity times their number
    cannot wrap; on a device the float64 sum reads one scalar back."""
    if isinstance(cap, np.ndarray):
        _, longest, total = parallel.extremes(cap)
        if longest < (1 << 62) // cap.size:
            return total
    return float(cap.sum(dtype=np.float64)) * (1 + 1e-9)


def _fits(info, padded):
    """Whether `padded` slots per stack stay within max_adstack_bytes."""
    return padded * sum(np.dtype(d).itemsize for d in info.carry_dtypes) <= \
        config.max_adstack_bytes


def _check_size(info, cap, padded=None):
    """Refuse a loop whose stacks would pass max_adstack_bytes; else the capacities' sum (a
    float a little above it where _slots_at_most says so; None with `padded`). The float64
    sum is a cheap filter (exact to far below the limit); the message's figure is exact
    Python integers. padded: the slots per stack once interleaved (cap then holds the raised
    capacities)."""
    per_slot = sum(np.dtype(d).itemsize for d in info.carry_dtypes)
    limit = config.max_adstack_bytes
    slots = None
    if padded is not None:
        if padded * per_slot <= limit:
            return None
    elif not cap.size:
        return 0
    else:
        slots = _slots_at_most(cap)
        if slots * per_slot <= limit:
            return slots
    exact = padded if padded is not None else sum(int(c) for c in cap.tolist())
    needed = exact * per_slot
    if needed <= limit:
        return None if padded is not None else exact
    longest = int(cap.max() if hasattr(cap, "max") else np.asarray(cap).max())
    # A saturated capacity stands for 2**62 or more: the figures are then lower bounds.
    at_least = "at least " if longest >= SATURATED else ""
    raise DloopMemoryError(
        f"the adstacks of this loop would need {at_least}{needed:,} bytes ({cap.size:,} "
        f"elements, the longest running {at_least}{longest:,} iterations), more than "
        f"max_adstack_bytes = {limit:,}. "
        "Check the loop's bounds; fewer elements or shorter loops per call reduce it, and "
        "dloop.config.max_adstack_bytes can be raised if the memory is there", info.src)
