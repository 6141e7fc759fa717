"""STAGE 3b — symbolic adstack capacities, evaluated per element at launch.

A loop's stacks need one slot per iteration. Where a loop's trip count is an expression of
values known at launch (constants, the bound arrays read at the element's index), the
capacity is that expression; a nested loop's stack is refilled once per outer iteration, so
its capacity is its own trip count when the outer loop runs at all. Where no expression
exists (a while loop, a bound computed inside the loop), capacities() answers None and the
runtime counts trips in a pre-pass instead. There is no default size."""

from dataclasses import dataclass

import numpy as np

from ..ir.graph import Lit, Var


class Expr:
    def __sub__(self, other):
        return Binary("-", self, other)

    def __mul__(self, other):
        return Binary("*", self, other)


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int

    def evaluate(self, env, shape):
        return np.int64(self.value)

    def __str__(self):
        return str(self.value)


@dataclass(frozen=True, eq=False)
class Read(Expr):
    """An integer array known at launch, read at the element's index."""
    var: Var

    def evaluate(self, env, shape):
        return np.broadcast_to(np.asarray(env[self.var]).astype(np.int64), shape)

    def __str__(self):
        return f"{self.var}[j]"


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str          # '-', '*', 'max'
    a: Expr
    b: Expr

    def evaluate(self, env, shape):
        a, b = self.a.evaluate(env, shape), self.b.evaluate(env, shape)
        return {"-": np.subtract, "*": np.multiply, "max": np.maximum}[self.op](a, b)

    def __str__(self):
        if self.op == "max":
            return f"max({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True, eq=False)
class Positive(Expr):
    """1 where a > 0, else 0."""
    a: Expr

    def evaluate(self, env, shape):
        return (self.a.evaluate(env, shape) > 0).astype(np.int64)

    def __str__(self):
        return f"[{self.a} > 0]"


def trip_count(lower, upper):
    return Binary("max", upper - lower, Const(0))


def evaluate(expr, env, shape):
    """Per-element int64 capacities, flattened in element order."""
    out = np.broadcast_to(expr.evaluate(env, tuple(shape)), tuple(shape))
    return np.ascontiguousarray(out, dtype=np.int64).reshape(-1)


def capacities(op):
    """{loop_id: Expr or None} for the taped loop `op` and every loop nested in it."""
    out = {}
    _walk(op.params["info"], [_source(x) for x in op.inputs], None, out)
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
    if isinstance(x, Lit):
        return Const(int(x.value)) if np.issubdtype(x.aval.dtype, np.integer) else None
    return Read(x) if np.issubdtype(x.aval.dtype, np.integer) else None


def _walk(info, sources, guard, out):
    lower, upper = sources[:2] if info.kind == "fori" else (None, None)
    trip = trip_count(lower, upper) if lower is not None and upper is not None else None
    out[info.loop_id] = None if trip is None else (trip if guard is None else trip * guard)
    inner_guard = None
    if trip is not None:
        inner_guard = Positive(trip) if guard is None else Positive(trip) * guard
    first_inv = info.n_bounds + info.n_carry
    for graph, n_fixed in ((info.body, len(info.body.inputs) - len(sources) + first_inv),
                           (info.cond, info.n_carry)):
        if graph is None:
            continue
        env = dict(zip(graph.inputs[n_fixed:], sources[first_inv:]))
        for op in graph.ops:
            if op.prim.kind == "loop":
                inner = [Const(int(x.value)) if isinstance(x, Lit) else env.get(x)
                         for x in op.inputs]
                if inner_guard is None:
                    _mark_unknown(op.params["info"], out)
                else:
                    _walk(op.params["info"], inner, inner_guard, out)


def _mark_unknown(info, out):
    for loop_id in nest_infos(info):
        out[loop_id] = None


