"""STAGE 2 — graph IR: typed values, ops and graphs; loops are ops that hold body graphs."""

import functools
import itertools
from dataclasses import dataclass, field

import numpy as np

_ids = itertools.count()


_DTYPE_NAMES = {}


def dtype_name(dtype):
    """dtype.name, which NumPy computes in Python at every access: read once per dtype (the
    cache key of every call prints one per value)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


@dataclass(frozen=True)
class Aval:
    """Abstract value: what tracing knows of an array. A tape token is an int64 array of the
    loop's element shape holding each element's trip count, plus the heap layout at run time."""
    shape: tuple
    dtype: np.dtype
    is_tape: bool = False

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self):
        return self.text

    @functools.cached_property
    def text(self):
        """Written into every program's cache key, at every call: made once per value."""
        base = f"{dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]"
        return "tape" + base if self.is_tape else base


class Var:
    __slots__ = ("aval", "id")

    def __init__(self, aval):
        self.aval = aval
        self.id = next(_ids)

    def __repr__(self):
        return f"%{self.id}"


_SCALAR_AVALS = {}


def scalar_aval(dtype, is_tape=False):
    """The Aval of a 0-d value, one per dtype: literals and the values of scalarized loop
    bodies need one per operation traced, and a frozen dataclass costs a microsecond."""
    aval = _SCALAR_AVALS.get((dtype, is_tape))
    if aval is None:
        aval = _SCALAR_AVALS[dtype, is_tape] = Aval((), np.dtype(dtype), is_tape)
    return aval


class Lit:
    """A Python scalar constant with a fixed dtype."""
    __slots__ = ("value", "aval")

    def __init__(self, value, dtype):
        aval = scalar_aval(dtype)
        self.value = aval.dtype.type(value).item()
        self.aval = aval

    def __repr__(self):
        return repr(self.value)


@dataclass
class Op:
    prim: object                  # ir.prims.Primitive
    inputs: list                  # Var | Lit
    outputs: list                 # Var
    params: dict = field(default_factory=dict)
    src: str = None               # the user's file:line

    def subgraphs(self):
        """(name, graph) of the graphs this op holds: a loop's condition and body, and the
        body VJP of a loop's backward op."""
        info, body_vjp = self.params.get("info"), self.params.get("body_vjp")
        named = [("cond", getattr(info, "cond", None)), ("body", getattr(info, "body", None)),
                 ("body_vjp", getattr(body_vjp, "graph", None))]
        return [(name, g) for name, g in named if g is not None]


@dataclass
class Graph:
    inputs: list                  # Var
    outputs: list                 # Var | Lit
    ops: list                     # Op

    def __str__(self):
        from .printer import format_graph
        return format_graph(self)


def pruned(graph, outputs):
    """`graph` returning `outputs` (some of its values), without the ops none of them needs.
    Ops are pure, and loop bodies read outer values only through their op's inputs."""
    live = {o for o in outputs if isinstance(o, Var)}
    kept = []
    for op in reversed(graph.ops):
        if any(o in live for o in op.outputs):
            kept.append(op)
            live.update(x for x in op.inputs if isinstance(x, Var))
    return Graph(list(graph.inputs), list(outputs), kept[::-1])


def new_var(shape, dtype, is_tape=False):
    return Var(Aval(tuple(int(d) for d in shape), np.dtype(dtype), is_tape))


def safe_zip(*seqs):
    lengths = {len(s) for s in seqs}
    if len(lengths) > 1:
        raise AssertionError(f"length mismatch in safe_zip: {[len(s) for s in seqs]}")
    return zip(*seqs)


@dataclass(frozen=True, eq=False)
class LoopInfo:
    """What a loop op needs beyond its inputs. The op runs one scalar loop per element of
    `shape`; `body` and `cond` are scalar graphs (one value per element; invariant tables keep
    their full shape). Op inputs: [lower, upper] (fori only), carries, invariants."""
    loop_id: int
    kind: str                     # 'fori' or 'while'
    shape: tuple                  # element shape; () inside an enclosing loop's scalar body
    carry_dtypes: tuple
    invariant_modes: tuple        # 'elem' (read at the element's index) or 'table' (gathered)
    body: Graph                   # fori: (i, *carries, *invariants); while: (*carries, *inv.)
    cond: Graph = None            # while only: (*carries, *invariants) -> bool
    index_dtype: np.dtype = None
    src: str = None

    @property
    def n_bounds(self):
        return 2 if self.kind == "fori" else 0

    @property
    def n_carry(self):
        return len(self.carry_dtypes)

    def split_inputs(self, inputs):
        """(bounds, carries, invariants) of a loop op's inputs."""
        nb, nc = self.n_bounds, self.n_carry
        return inputs[:nb], inputs[nb:nb + nc], inputs[nb + nc:]


@dataclass(frozen=True, eq=False)
class CollectiveInfo:
    """A loop over whole arrays: the body is an array-level graph run once per iteration.
    Op inputs: [lower, upper] (fori only, 0-d), carries, invariants."""
    loop_id: int
    kind: str                     # 'fori' or 'while'
    carry_avals: tuple
    body: Graph                   # fori: (i, *carries, *invariants); while: (*carries, *inv.)
    cond: Graph = None            # while only: (*carries, *invariants) -> 0-d bool
    index_dtype: np.dtype = None
    src: str = None

    n_bounds = LoopInfo.n_bounds
    split_inputs = LoopInfo.split_inputs

    @property
    def n_carry(self):
        return len(self.carry_avals)

    @property
    def carry_dtypes(self):
        return tuple(a.dtype for a in self.carry_avals)
