"""Generated loop programs: every compiled backend against the interpreter, and gradients
against central finite differences. CI runs a few hundred; set DLOOP_RANDOM_EXAMPLES to run
more by hand (e.g. 10000)."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dloop as dl
from dloop.backends.base import available

EXAMPLES = int(os.environ.get("DLOOP_RANDOM_EXAMPLES", "200"))
COMPILED = [b for b in ("cpu",) if available(b)[0]]

UNARY = ["sin", "cos", "tanh", "softsq"]
BINARY = ["add", "sub", "mul"]


def expressions(depth):
    leaf = st.one_of(st.sampled_from(["v", "x", "i", "s"]),
                     st.floats(-2, 2, allow_nan=False).map(lambda c: ("c", round(c, 3))))
    if depth == 0:
        return leaf
    sub = expressions(depth - 1)
    return st.one_of(leaf, st.tuples(st.sampled_from(UNARY), sub),
                     st.tuples(st.sampled_from(BINARY), sub, sub))


def evaluate(tree, env):
    if isinstance(tree, str):
        return env[tree]
    op = tree[0]
    if op == "c":
        return tree[1]
    args = [evaluate(t, env) for t in tree[1:]]
    if op == "softsq":
        return np.sqrt(1.0 + args[0] * args[0])
    if op in ("sin", "cos", "tanh"):
        return getattr(np, op)(args[0])
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](*args)


def step(tree, v, x, i, s):
    """A contraction, so long loops stay bounded: v <- 0.8 v + 0.2 tanh(expr)."""
    return 0.8 * v + 0.2 * np.tanh(evaluate(tree, {"v": v, "x": x, "i": i * 0.01, "s": s}))


def trip_counts(size):
    long_tail = st.integers(0, 8).flatmap(lambda k: st.sampled_from([k, k, k, 40 + 5 * k]))
    return st.lists(long_tail, min_size=size, max_size=size).map(np.array)


@st.composite
def programs(draw):
    size = draw(st.integers(1, 9))
    return {
        "kind": draw(st.sampled_from(["fori", "fori_uniform", "while", "nested_index",
                                      "nested_array", "while_in_fori"])),
        "body": draw(expressions(3)),
        "inner": draw(expressions(2)),
        "x": np.array(draw(st.lists(st.floats(-1.5, 1.5, allow_nan=False), min_size=size,
                                    max_size=size))),
        "n": draw(trip_counts(size)),
        "m": draw(trip_counts(size)),
        "uniform": draw(st.integers(0, 12)),
        "threshold": draw(st.floats(0.3, 3.0)),
    }


def build(p):
    n, m, kind = p["n"], p["m"], p["kind"]

    def run(x, s):
        body = lambda i, v: step(p["body"], v, x, i, s)  # noqa: E731
        if kind == "fori":
            return dl.fori_loop(0, n, body, x)
        if kind == "fori_uniform":
            return dl.fori_loop(0, p["uniform"], body, x)
        if kind == "while":
            # Stops after m[j] steps, or earlier once |v| passes a threshold.
            def cond(c):
                return (c[1] < m) & (np.abs(c[0]) < p["threshold"])
            v, _ = dl.while_loop(cond, lambda c: (body(c[1], c[0]), c[1] + 1),
                                 (x, np.zeros(x.shape, np.int64)))
            return v
        if kind == "nested_index":
            inner = lambda k, w: step(p["inner"], w, x, k, s)  # noqa: E731
            return dl.fori_loop(0, n, lambda i, v: body(i, dl.fori_loop(0, i, inner, v)), x)
        if kind == "nested_array":
            inner = lambda k, w: step(p["inner"], w, x, k, s)  # noqa: E731
            return dl.fori_loop(0, n, lambda i, v: body(i, dl.fori_loop(0, m, inner, v)), x)
        def outer(i, v):      # while_in_fori
            w, _ = dl.while_loop(lambda c: c[1] < m, lambda c: (step(p["inner"], c[0], x, c[1],
                                                                     s), c[1] + 1),
                                 (v, np.zeros(v.shape, np.int64)))
            return body(i, w)
        return dl.fori_loop(0, n, outer, x)
    return run


def _with_backend(name, fn):
    previous = dl.config.backend
    dl.config.update("backend", name)
    try:
        return fn()
    finally:
        dl.config.update("backend", previous)


@pytest.mark.skipif(not COMPILED, reason="no compiled backend available")
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_random_program(p):
    run = build(p)
    x, s = p["x"], np.array(0.7)
    loss = lambda x, s: (run(x, s) * np.cos(x)).sum()  # noqa: E731
    grad = dl.grad(loss, argnums=(0, 1))
    ref_out = _with_backend("interpret", lambda: dl.jit(run)(x, s))
    ref_gx, ref_gs = _with_backend("interpret", lambda: grad(x, s))
    for backend in COMPILED:
        out = _with_backend(backend, lambda: dl.jit(run)(x, s))
        gx, gs = _with_backend(backend, lambda: grad(x, s))
        np.testing.assert_allclose(out, ref_out, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gx, ref_gx, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(gs, ref_gs, rtol=1e-8, atol=1e-10)
    # Central differences on the compiled forward. Elements are independent except through
    # s, so one perturbation of all of x gives every d loss / d x_j.
    forward = dl.jit(loss)
    eps = 1e-6
    fd_x = np.array([(forward(x + eps * e, s) - forward(x - eps * e, s)) / (2 * eps)
                     for e in np.eye(x.size)])
    fd_s = (forward(x, s + eps) - forward(x, s - eps)) / (2 * eps)
    stable = _trip_counts_stable(p, x, s, eps)
    np.testing.assert_allclose(ref_gx[stable], fd_x[stable], rtol=1e-5, atol=1e-6)
    if stable.all():
        np.testing.assert_allclose(ref_gs, fd_s, rtol=1e-5, atol=1e-6)


def _trip_counts_stable(p, x, s, eps):
    """Elements whose while-loop exit does not move under the perturbation (finite differences
    across a jump in the trip count say nothing about the derivative)."""
    if p["kind"] != "while":
        return np.ones(x.shape, bool)

    def trips(x, s):
        cond = lambda c: (c[1] < p["m"]) & (np.abs(c[0]) < p["threshold"])  # noqa: E731
        body = lambda c: (step(p["body"], c[0], x, c[1], s), c[1] + 1)  # noqa: E731
        return dl.while_loop(cond, body, (x, np.zeros(x.shape, np.int64)))[1]

    base = trips(x, s)
    return (trips(x + eps, s) == base) & (trips(x - eps, s) == base) & \
        (trips(x, s + eps) == base) & (trips(x, s - eps) == base)
