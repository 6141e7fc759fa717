"""STAGE 3b — symbolic adstack capacities, evaluated per element at launch.

A loop's stacks need one slot per iteration. A capacity expression is built from what is
known at launch: constants, arrays read at the element's index (`n[j]`) or gathered at an
enclosing loop's index (`m[i]`), an enclosing loop's index, + - * max min, and the maximum
over an enclosing loop's range. A loop nested in a body is refilled once per outer iteration,
so its capacity is the maximum of its trip count over the outer loop's range (0 when the
outer loop does not run). Arithmetic saturates at +-2**62 instead of wrapping around, so a
huge bound (2**62, or -2**63 ... 2**63-1) gives a huge capacity, which the layout refuses
with DloopMemoryError, never a small wrapped one. Where no expression exists (a while loop,
a bound computed from the carry), capacities() answers None and the runtime counts trips in
a pre-pass instead. There is no default size."""

from dataclasses import dataclass

import numpy as np

from ..config import config
from ..ir import prims
from ..ir.graph import Lit, Var
from . import parallel


SATURATED = 1 << 62
_LIMIT = float(SATURATED)


def _checked(name, a, b, xp):
    """xp.<name>(a, b) in int64, saturated at +-2**62 where the exact result would pass it: a
    float64 twin of the computation flags those elements (its rounding is far below the
    margin). On the host the operands' magnitudes usually show at once that nothing can pass
    it; on a device, reading them would wait for the device, so the twin always runs."""
    op = getattr(xp, name)
    if _scalar(b) and int(b) == (1 if name == "multiply" else 0):
        return a                # a trip count's `upper - 0`: no pass over the elements
    if _scalar(a) and _scalar(b):
        exact = getattr(int, {"add": "__add__", "subtract": "__sub__",
                              "multiply": "__mul__"}[name])(int(a), int(b))
        return np.int64(max(-SATURATED, min(SATURATED, exact)))
    if xp is np:
        ma, mb = _magnitude(a), _magnitude(b)
        if (ma * mb if name == "multiply" else ma + mb) < SATURATED:
            return op(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    # A scalar stays a Python number: on a device it would be a transfer per operation.
    a, b = (int(x) if _scalar(x) else xp.asarray(x, dtype=np.int64) for x in (a, b))
    with np.errstate(over="ignore"):
        exact = op(a, b)
        approx = op(*(float(x) if isinstance(x, int) else x.astype(np.float64) for x in (a, b)))
    return xp.where(xp.abs(approx) < _LIMIT, exact,
                    xp.clip(approx, -_LIMIT, _LIMIT).astype(np.int64))


def _scalar(x):
    """A host number (not a device array of one element)."""
    return isinstance(x, (int, np.integer)) or (isinstance(x, np.ndarray) and x.ndim == 0)


def _magnitude(x):
    """max |x| of a host array or scalar."""
    if np.ndim(x) == 0:
        return abs(int(x))
    x = np.asarray(x)
    if not x.size:
        return 0
    return max(-int(x.min()), int(x.max()), 0)


def _as_int64(array, xp):
    """An integer array as int64; uint64 values past int64 saturate like the arithmetic."""
    array = xp.asarray(array)
    if array.dtype == np.uint64:
        array = xp.minimum(array, np.uint64(SATURATED))
    # Not copied when already int64: capacities are computed from it, never written in it.
    return array.astype(np.int64, copy=False)


class Expr:
    def __sub__(self, other):
        return Binary("-", self, other)

    def __add__(self, other):
        return Binary("+", self, other)

    def __mul__(self, other):
        return Binary("*", self, other)

    def vars(self):
        return set()


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int

    def evaluate(self, env, shape, xp):
        return np.int64(self.value)

    def trend(self, loop):
        return 0

    def __str__(self):
        return str(self.value)


@dataclass(frozen=True, eq=False)
class Read(Expr):
    """An integer array known at launch, read at the element's index: n[j]."""
    var: Var

    def evaluate(self, env, shape, xp):
        return xp.broadcast_to(_as_int64(env[self.var], xp), shape)

    def trend(self, loop):
        return 0

    def vars(self):
        return {self.var}

    def __str__(self):
        return f"{self.var}[j]"


@dataclass(frozen=True, eq=False)
class Index(Expr):
    """The index of an enclosing fori loop (bound by a MaxOver around this expression)."""
    loop: int

    def evaluate(self, env, shape, xp):
        return env[("index", self.loop)]

    def trend(self, loop):
        return 1 if loop == self.loop else 0

    def __str__(self):
        return f"i{self.loop}"


@dataclass(frozen=True, eq=False)
class Gather(Expr):
    """An integer array known at launch, read at computed indices: m[i] (clamped like the
    kernel's own gather, which reports out-of-range indices itself)."""
    var: Var
    indices: tuple

    def evaluate(self, env, shape, xp):
        table = _as_int64(env[self.var], xp)
        idx = []
        for e, dim in zip(self.indices, table.shape):
            i = xp.broadcast_to(xp.asarray(e.evaluate(env, shape, xp)), shape)
            idx.append(xp.clip(xp.where(i < 0, i + dim, i), 0, max(dim - 1, 0)))
        return table[tuple(idx)] if table.size else xp.zeros(shape, np.int64)

    def trend(self, loop):
        return None if any(e.trend(loop) != 0 for e in self.indices) else 0

    def vars(self):
        return {self.var}.union(*(e.vars() for e in self.indices))

    def __str__(self):
        return f"{self.var}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str          # '+', '-', '*', 'max', 'min'
    a: Expr
    b: Expr

    def evaluate(self, env, shape, xp):
        a, b = self.a.evaluate(env, shape, xp), self.b.evaluate(env, shape, xp)
        if self.op in ("max", "min"):
            # A scalar stays a Python number: on a device, an array of it is a transfer.
            a, b = (int(x) if _scalar(x) else xp.asarray(x) for x in (a, b))
            if isinstance(a, int) and isinstance(b, int):
                return np.int64(max(a, b) if self.op == "max" else min(a, b))
            return getattr(xp, _BINARY[self.op])(a, b)
        return _checked(_BINARY[self.op], a, b, xp)

    def trend(self, loop):
        ta, tb = self.a.trend(loop), self.b.trend(loop)
        if self.op == "-":
            tb = None if tb is None else -tb
        elif self.op == "*":
            if ta == 0 and tb == 0:
                return 0
            const = self.a if ta == 0 else self.b
            other = tb if ta == 0 else ta
            if not isinstance(const, Const) or other is None:
                return None
            return 0 if const.value == 0 else other * int(np.sign(const.value))
        return _combine(ta, tb)

    def vars(self):
        return self.a.vars() | self.b.vars()

    def __str__(self):
        if self.op in ("max", "min"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


_BINARY = {"+": "add", "-": "subtract", "*": "multiply", "max": "maximum", "min": "minimum"}


def _combine(ta, tb):
    if ta is None or tb is None:
        return None
    if ta == 0 or tb == 0 or ta == tb:
        return ta or tb
    return None


RANGE_BLOCK = 1 << 20          # values of a maximum's body evaluated at once


@dataclass(frozen=True, eq=False)
class MaxOver(Expr):
    """max over i in [lower, upper) of body(i); 0 when the range is empty."""
    loop: int
    lower: Expr
    upper: Expr
    body: Expr

    def evaluate(self, env, shape, xp):
        lo = xp.broadcast_to(xp.asarray(self.lower.evaluate(env, shape, xp)), shape)
        hi = xp.broadcast_to(xp.asarray(self.upper.evaluate(env, shape, xp)), shape)
        count = xp.maximum(_checked("subtract", hi, lo, xp), 0)
        key = ("index", self.loop)
        if self.body.trend(self.loop) is not None:
            # Monotone in i: the maximum over the range is at one of its ends.
            ends = [xp.asarray(self.body.evaluate({**env, key: end}, shape, xp))
                    for end in (lo, _checked("subtract", hi, 1, xp))]
            return xp.where(count > 0, xp.maximum(*ends), 0)
        if count.size and int(count.max()) > config.max_adstack_bytes:
            # The enclosing loop's own tape cannot fit; do not walk its range.
            return xp.full(shape, SATURATED, np.int64)
        steps = int(count.max()) if count.size else 0
        kept = _Kept(self, env, shape, lo, count, xp)
        t0 = 0
        while t0 < steps:
            kept.compact(t0)
            # Blocks of the range at once, as rows (block, *shape): one step at a time took
            # 16 s for a range of 10^6.
            block = max(1, RANGE_BLOCK // max(int(np.prod(kept.shape, dtype=np.int64)), 1))
            t = xp.arange(t0, min(t0 + block, steps), dtype=np.int64).reshape(
                (-1,) + (1,) * len(kept.shape))
            rows = (t.shape[0],) + tuple(kept.shape)
            value = xp.broadcast_to(xp.asarray(self.body.evaluate(
                {**kept.env, key: kept.lo[None] + t}, rows, xp)), rows)
            value = xp.where(t < kept.count[None], value, 0)
            kept.best = xp.maximum(kept.best, value.max(axis=0))
            t0 += block
        return kept.result()

    def trend(self, loop):
        parts = [self.lower.trend(loop), self.upper.trend(loop), self.body.trend(loop)]
        return 0 if parts == [0, 0, 0] else None

    def vars(self):
        return self.lower.vars() | self.upper.vars() | self.body.vars()

    def __str__(self):
        return f"max(i{self.loop} in [{self.lower}, {self.upper})) {self.body}"


COMPACT_FROM = 4096     # elements: below it, walking the finished ones costs little


class _Kept:
    """A MaxOver's elements whose range is not walked to its end yet. Where most have
    finished (one element 10^5 steps long among 10^4 short ones), the walk goes on over the
    rest only: over all of them, sizing took 9 s where the loop ran in 0.05 s. Per-element
    values (arrays read at the element, enclosing loops' indices) are narrowed to those
    elements; tables read at computed indices stay whole."""

    def __init__(self, over, env, shape, lo, count, xp):
        self.env, self.shape, self.xp = env, tuple(shape), xp
        self.lo, self.count = lo, count
        self.best = xp.zeros(shape, np.int64)
        self.full_shape, self.where, self.full_best = self.shape, None, None
        self._sorted = None
        nodes = list(_nodes(over.body))
        reads = {n.var for n in nodes if isinstance(n, Read)}
        tables = {n.var for n in nodes if isinstance(n, Gather)}
        # An array both read at the element and gathered cannot be narrowed for one use only.
        self.per_element = None if reads & tables else reads | {
            k for k in env if isinstance(k, tuple) and k[0] == "index" and k[1] != over.loop}

    def compact(self, t0):
        xp, size = self.xp, int(np.prod(self.shape, dtype=np.int64))
        if self.per_element is None or size < COMPACT_FROM:
            return
        if self._sorted is None:     # once per narrowing: a block then costs a search only
            self._sorted = xp.sort(self.count.reshape(-1))
        if size - int(xp.searchsorted(self._sorted, t0, side="right")) > size // 4:
            return
        self._sorted = None
        running = xp.flatnonzero(self.count.reshape(-1) > t0)
        if self.where is None:
            self.full_best = xp.zeros(size, np.int64)
            self.where = xp.arange(size, dtype=np.int64)
        self.full_best[self.where] = self.best.reshape(-1)
        self.where = self.where[running]
        self.env = {k: self._narrow(v, running) if k in self.per_element else v
                    for k, v in self.env.items()}
        self.lo, self.count = (self._narrow(a, running) for a in (self.lo, self.count))
        self.best = self.best.reshape(-1)[running]
        self.shape = (int(running.size),)

    def _narrow(self, value, running):
        value = self.xp.asarray(value)
        if not value.ndim:
            return value
        return self.xp.broadcast_to(value, self.shape).reshape(-1)[running]

    def result(self):
        if self.where is None:
            return self.best
        self.full_best[self.where] = self.best
        return self.full_best.reshape(self.full_shape)


def _nodes(expr):
    yield expr
    for child in (getattr(expr, name, None) for name in ("a", "b", "lower", "upper", "body")):
        if isinstance(child, Expr):
            yield from _nodes(child)
    for child in getattr(expr, "indices", ()):
        yield from _nodes(child)


def trip_count(lower, upper):
    return Binary("max", upper - lower, Const(0))


def evaluate(expr, env, shape, xp=np):
    """Per-element int64 capacities, flattened in element order, computed with the array
    namespace xp (NumPy on the host; a device's array library where sizing runs there).
    On the host a large launch's elements are split over threads where the expression
    allows (_flat_reads), with the same result bit for bit."""
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    bounds = _bounds_as_is(expr, env, shape) if xp is np else None
    if bounds is not None:
        return bounds
    chunks = parallel.parts(n, xp)
    flat = _flat_reads(expr, env, shape) if len(chunks) > 1 else None
    if flat is None:
        out = xp.broadcast_to(xp.asarray(expr.evaluate(env, shape, xp)), shape)
        return xp.ascontiguousarray(out, dtype=np.int64).reshape(-1)
    out = np.empty(n, np.int64)

    def part(_, lo, hi):
        rows = {v: a if a.ndim == 0 else a[lo:hi] for v, a in flat.items()}
        out[lo:hi] = expr.evaluate(rows, (hi - lo,), np)

    parallel.run(part, chunks)
    return out


def _bounds_as_is(expr, env, shape):
    """The array n itself where `expr` is a trip count max(n[j] - 0, c) (or n[j]) of a 1-D
    int64 n with no element below c: the loop's bound and its capacity are then one array,
    which a device backend uploads once for both (runtime/execute.py). None otherwise."""
    floor = None
    if isinstance(expr, Binary) and expr.op == "max" and isinstance(expr.b, Const):
        expr, floor = expr.a, expr.b.value
    while isinstance(expr, Binary) and expr.op in "+-" and isinstance(expr.b, Const) \
            and expr.b.value == 0:
        expr = expr.a
    if not isinstance(expr, Read):
        return None
    n = env[expr.var]
    if not isinstance(n, np.ndarray) or n.dtype != np.int64 or n.shape != shape or \
            len(shape) != 1 or not n.flags.c_contiguous or not n.size:
        return None
    return n if floor is None or parallel.extremes(n)[0] >= floor else None


def _flat_reads(expr, env, shape):
    """{var: its array flattened in element order, or a 0-d array} where `expr` only reads
    arrays at the element's index (no gather, no range maximum) and each is one value or
    one per element; else None (evaluated whole)."""
    def plain(e):
        if isinstance(e, Binary):
            return plain(e.a) and plain(e.b)
        return isinstance(e, (Const, Read))
    if not plain(expr):
        return None
    flat = {}
    for v in expr.vars():
        a = np.asarray(env[v])
        if a.size == 1:
            flat[v] = a.reshape(())
        elif a.shape == shape:
            flat[v] = np.ascontiguousarray(a).reshape(-1)
        else:
            return None
    return flat


def capacities(op):
    """{loop_id: Expr or None} for the taped loop `op` and every loop nested in it."""
    out = {}
    _walk(op.params["info"], [_source(x) for x in op.inputs], [], out)
    return out


def nest_infos(info, out=None):
    """{loop_id: LoopInfo} of a loop and every loop nested in its body or condition."""
    out = {} if out is None else out
    out[info.loop_id] = info
    for graph in (info.body, info.cond):
        for op in graph.ops if graph is not None else ():
            if op.prim.kind == "loop":
                nest_infos(op.params["info"], out)
    return out


def _source(x):
    """What a value outside every loop is at launch: a literal, or an array to read."""
    if isinstance(x, Lit):
        return Const(int(x.value)) if np.issubdtype(x.aval.dtype, np.integer) else None
    return _Array(x)


@dataclass(frozen=True, eq=False)
class _Array:
    """A launch-known array: read per element (as a bound) or gathered (as a table)."""
    var: Var


def _as_int(source):
    if isinstance(source, _Array):
        return Read(source.var) if np.issubdtype(source.var.aval.dtype, np.integer) else None
    return source


def _walk(info, sources, enclosing, out):
    """enclosing: [(loop_id, lower, upper)] of the fori loops around this one, outermost first."""
    lower, upper = (_as_int(s) for s in sources[:2]) if info.kind == "fori" else (None, None)
    trip = None if lower is None or upper is None else trip_count(lower, upper)
    cap = trip
    for loop_id, lo, hi in reversed(enclosing):
        cap = None if cap is None or lo is None or hi is None else MaxOver(loop_id, lo, hi, cap)
    out[info.loop_id] = cap
    inner_enclosing = enclosing + [(info.loop_id, lower, upper)] if trip is not None else None
    first_inv = info.n_bounds + info.n_carry
    invariants = sources[first_inv:]
    for graph, n_fixed in ((info.body, len(info.body.inputs) - len(invariants)),
                           (info.cond, info.n_carry)):
        if graph is None:
            continue
        env = dict(zip(graph.inputs[n_fixed:], invariants))
        if info.kind == "fori" and graph is info.body:
            env[graph.inputs[0]] = Index(info.loop_id)
        for op in graph.ops:
            if op.prim.kind == "loop":
                if inner_enclosing is None:
                    _mark_unknown(op.params["info"], out)
                else:
                    _walk(op.params["info"], [_lookup(env, x) for x in op.inputs],
                          inner_enclosing, out)
            else:
                _derive(op, env)


def _lookup(env, x):
    if isinstance(x, Lit):
        return Const(int(x.value)) if np.issubdtype(x.aval.dtype, np.integer) else None
    return env.get(x)


_ARITH = {"add": "+", "sub": "-", "mul": "*", "max": "max", "min": "min"}


def _derive(op, env):
    """Extend env with the expression of op's integer result, where it has one."""
    out = op.outputs[0]
    if not np.issubdtype(out.aval.dtype, np.integer):
        return
    if np.dtype(out.aval.dtype).itemsize < 8:
        # int32 arithmetic and narrowing conversions wrap in the kernel, where expressions
        # saturate: such a bound is counted (a wrapped (i + 1) * 2^32 + 3 runs 3 trips).
        return
    args = [_lookup(env, x) for x in op.inputs]
    if op.prim.name in _ARITH and all(isinstance(a, Expr) for a in args):
        env[out] = Binary(_ARITH[op.prim.name], *args)
    elif op.prim is prims.convert_p and isinstance(_as_int(args[0]), Expr):
        env[out] = _as_int(args[0])
    elif op.prim is prims.gather_p and isinstance(args[0], _Array) and \
            all(isinstance(_as_int(a), Expr) for a in args[1:]):
        env[out] = Gather(args[0].var, tuple(_as_int(a) for a in args[1:]))


def _mark_unknown(info, out):
    for loop_id in nest_infos(info):
        out[loop_id] = None
