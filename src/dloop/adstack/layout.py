"""STAGE 3b — where each element's stack slots live: thread slices laid out by an exclusive
prefix sum of per-element capacities, so storage is the sum of the trip counts, not
elements x the longest trip. The total is checked against config.max_adstack_bytes before
the prefix sum, so an int64 sum never wraps around and nothing is allocated for a loop that
cannot fit."""

from dataclasses import dataclass

import numpy as np

from ..config import config
from ..errors import DloopMemoryError
from . import parallel
from .capacity import SATURATED


@dataclass
class LoopLayout:
    cap: object              # int64 per element: slots per stack (NumPy or device array)
    start: object            # int64 per element: exclusive prefix sum of cap
    regions: dict            # dtype name -> (np.dtype, number of slots for the whole loop)


def loop_layout(info, cap, order=None, xp=np):
    """With `order` (the elements in the order threads run them), the slices are laid out in
    that order, so threads that run together write neighbouring memory (for launches of at
    least parallel.MIN_CHUNK elements; smaller ones keep element order). xp: the array
    namespace of `cap` and `order` (NumPy, or the device's where sizing runs there)."""
    cap = xp.ascontiguousarray(cap, dtype=np.int64)
    _check_size(info, cap)
    if cap.size < parallel.MIN_CHUNK:
        # Small tapes stay in cache whatever their order: the permutation would cost more
        # than the locality it buys.
        order = None
    ordered = cap if order is None else parallel.take(cap, order, xp)
    running = parallel.exclusive_cumsum(ordered, xp)     # the slices' starts, in that order
    total = int(running[-1] + ordered[-1]) if cap.size else 0
    if order is None:
        start = running
    else:
        start = xp.empty_like(cap)
        parallel.scatter(start, order, running, xp)
    regions = {}
    for dtype in map(np.dtype, info.carry_dtypes):
        count = sum(1 for d in info.carry_dtypes if np.dtype(d) == dtype)
        regions[dtype.name] = (dtype, count * total)
    return LoopLayout(cap, start, regions)


def _check_size(info, cap):
    """Refuse a loop whose stacks would pass max_adstack_bytes. The float64 sum is a cheap
    filter (exact to far below the limit); the message's figure is exact Python integers."""
    per_slot = sum(np.dtype(d).itemsize for d in info.carry_dtypes)
    limit = config.max_adstack_bytes
    if not cap.size or not per_slot or float(cap.sum(dtype=np.float64)) * per_slot <= limit:
        return
    needed = sum(int(c) for c in cap.tolist()) * per_slot
    if needed <= limit:
        return
    longest = int(cap.max())
    # A saturated capacity stands for 2**62 or more: the figures are then lower bounds.
    at_least = "at least " if longest >= SATURATED else ""
    raise DloopMemoryError(
        f"the adstacks of this loop would need {at_least}{needed:,} bytes ({cap.size:,} "
        f"elements, the longest running {at_least}{longest:,} iterations), more than "
        f"max_adstack_bytes = {limit:,}. "
        "Check the loop's bounds; fewer elements or shorter loops per call reduce it, and "
        "dloop.config.max_adstack_bytes can be raised if the memory is there", info.src)
