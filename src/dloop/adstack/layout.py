"""STAGE 3b — where each element's stack slots live: thread slices laid out by an exclusive
prefix sum of per-element capacities, so storage is the sum of the trip counts, not
elements x the longest trip."""

from dataclasses import dataclass

import numpy as np


@dataclass
class LoopLayout:
    cap: object              # int64 per element: slots per stack (an xp array)
    start: object            # int64 per element: exclusive prefix sum of cap
    regions: dict            # dtype name -> (np.dtype, number of slots for the whole loop)


def loop_layout(info, cap, xp=np):
    """cap: per-element capacities, an array of `xp` (the backend's namespace, so that a
    GPU computes the prefix sum where the capacities are; only the total is read back)."""
    cap = xp.ascontiguousarray(xp.asarray(cap), dtype=np.int64)
    start = xp.cumsum(cap) - cap
    total = int(start[-1] + cap[-1]) if cap.size else 0
    regions = {}
    for dtype in map(np.dtype, info.carry_dtypes):
        count = sum(1 for d in info.carry_dtypes if np.dtype(d) == dtype)
        regions[dtype.name] = (dtype, count * total)
    return LoopLayout(cap, start, regions)
