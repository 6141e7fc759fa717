"""STAGE 4 — kernel IR: the scalar program one thread runs, for one element.

Values are typed scalars in SSA form. Memory is reached only through the kernel's numbered
buffers; control flow is structured (For, While, If), so every backend can emit it directly.
Adstack operations are explicit. A thread's stacks, counters and the fault flags are the only
mutable state, and each has a fixed meaning every backend implements the same way:

* at thread start, stack s gets capacity cap[tid] and base = group_size * (start[tid] - lane)
  + lane + index * cap[tid] * L, where L is the kernel's `tape_lanes` and lane = start[tid]
  mod L (start and cap are buffers of the stack's loop); its depth sp starts at 0. Slot k of
  the stack is region[base + k * L]. With L = 1 a stack is one contiguous slice; with L > 1
  the layout interleaves the slots of each group of L elements, giving them one capacity
  (or each its own, where group_size is 1 and addresses do not depend on it), so
  that the L threads a GPU runs in lockstep store to neighbouring addresses
  (adstack/layout.py). With L > 1, a negative start[tid] is a compact slice instead:
  base = group_size * ~start[tid] + index * cap[tid] and slot k is region[base + k]; host
  layouts use it where interleaving would pad the tape by more than a little, for backends
  whose caps.compact_tapes says their renderer reads it (the SIMD CPU and Vulkan renderers).
* StackInit(s, d): sp = d.
* Push(s, v): if sp < cap: slot sp = v, else Fault(s.fault_slot, sp + 1); sp += 1.
* Pop(s): sp = max(sp - 1, 0); the value is slot sp if sp < cap, else 0.
* Fault(slot, v): faults[0] = 1; faults[1 + slot] = max(faults[1 + slot], v) (atomically).
* CountMax(c, v): counter c = max(counter c, v); counters start at 0 and are stored to
  counts[c * n_threads + tid] when the thread ends.

A kernel with an 'order' buffer runs its threads in that order: the thread in slot t
(0 <= t < n) runs element order[t], and `tid` is that element for every use (loads, stores,
stacks' start and cap, counters). Backends that run consecutive slots together (SIMD lanes,
GPU warps) then run elements of equal trip counts together; see runtime/execute.py. Such a
kernel may also have `slot`, the thread's slot t: loads and stores indexed by it reach
arrays kept in slot order between kernels that run the same order (runtime/program.py), and
with `stacks_by_slot` the stacks' start and cap are read at the slot instead of the element.

Every statement carries `src`, the user's file:line it was lowered from (or None), so that
renderers can point debug information (#line, OpLine) at the user's code.
"""

import itertools
from dataclasses import dataclass, field

import numpy as np

_ids = itertools.count()


class KVar:
    __slots__ = ("dtype", "id")

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.id = next(_ids)

    def __repr__(self):
        return f"v{self.id}"


@dataclass(frozen=True)
class Const:
    value: object
    dtype: np.dtype

    def __repr__(self):
        return f"{self.value!r}:{self.dtype.name}"


@dataclass
class Assign:
    """out = op(*args): an elementwise primitive's name, or 'convert'."""
    out: KVar
    op: str
    args: tuple
    src: object = None     # the user's file:line this statement comes from


@dataclass
class Load:
    out: KVar
    buf: int
    index: object
    src: object = None     # the user's file:line this statement comes from
    # (shift, size): read element index - shift, or index - shift + size where that is
    # negative; index is the thread's element, 0 <= index < size (a roll along the outermost
    # axis). Legalization turns it into a select, except for a backend that renders the
    # thread range in pieces on which each such read is contiguous (backends/cpu/render.py).
    wrap: tuple = None


@dataclass
class Store:
    buf: int
    index: object
    value: object
    src: object = None     # the user's file:line this statement comes from


@dataclass
class AtomicAdd:
    """buf[index] += value, atomically: elements accumulate into one array (the cotangent of
    a table they gathered from)."""
    buf: int
    index: object
    value: object
    src: object = None     # the user's file:line this statement comes from


@dataclass
class For:
    """for k in range(lo, hi) (or reversed): carries <- yields. outs = final carries."""
    index: KVar
    lo: object
    hi: object
    reverse: bool
    carries: list
    inits: list
    body: list
    yields: list
    outs: list
    src: object = None     # the user's file:line this statement comes from


@dataclass
class While:
    """carries <- inits; while (cond_body; cond): body; carries <- yields. outs = carries."""
    carries: list
    inits: list
    cond_body: list
    cond: object
    body: list
    yields: list
    outs: list
    src: object = None     # the user's file:line this statement comes from


@dataclass
class If:
    """Effects only (faults): no values flow out."""
    cond: object
    body: list
    src: object = None     # the user's file:line this statement comes from


@dataclass
class StackInit:
    stack: int
    depth: object
    src: object = None     # the user's file:line this statement comes from


@dataclass
class Push:
    stack: int
    value: object
    src: object = None     # the user's file:line this statement comes from


@dataclass
class Pop:
    out: KVar
    stack: int
    src: object = None     # the user's file:line this statement comes from


@dataclass
class Fault:
    slot: int
    value: object
    src: object = None     # the user's file:line this statement comes from


@dataclass
class CountMax:
    counter: int
    value: object
    src: object = None     # the user's file:line this statement comes from


@dataclass(frozen=True)
class BufferSpec:
    """kind: 'in', 'out', 'faults', 'counts', 'order' (the element each thread slot runs),
    'accum' (a zeroed array that AtomicAdds fill,
    key ('accum', the gathered table's buffer)), or for adstacks 'region', 'start', 'cap'
    with key (loop_id, dtype name) for regions and loop_id for start/cap."""
    kind: str
    dtype: np.dtype
    key: object = None


@dataclass(frozen=True)
class StackSpec:
    loop_id: int
    carry: int
    dtype: np.dtype
    region: int            # buffer numbers
    start: int
    cap: int
    group_size: int        # stacks of this loop sharing the region's dtype
    index: int             # this stack's position among them
    fault_slot: int


@dataclass(frozen=True)
class FaultSpec:
    kind: str              # 'overflow', 'index', 'loop_budget' (kernel/loop_budget.py) or
    #                        'int32_range' (kernel/int32_range.py)
    src: str
    detail: dict


def statements(stmts):
    """Every statement of `stmts`, the bodies of loops and Ifs included, each before its
    bodies (a While's condition block before its body)."""
    for s in stmts:
        yield s
        for inner in (getattr(s, "cond_body", None), getattr(s, "body", None)):
            if inner:
                yield from statements(inner)


@dataclass
class Kernel:
    name: str
    tid: KVar
    body: list
    buffers: list = field(default_factory=list)
    stacks: list = field(default_factory=list)
    faults: list = field(default_factory=list)
    counters: list = field(default_factory=list)     # loop ids, in counter order
    accum_outputs: dict = field(default_factory=dict)   # output var id -> 'accum' buffer
    tape_lanes: int = 1            # L in the stacks' addressing (the backend's caps)
    slot: KVar = None              # the thread's slot, where some arrays are in slot order
    stacks_by_slot: bool = False   # stacks' start and cap are read at the slot, not the element

    def buffer_index(self, kind, key=None):
        for k, b in enumerate(self.buffers):
            if b.kind == kind and b.key == key:
                return k
        return None

    def __str__(self):
        from .printer import format_kernel
        return format_kernel(self)
