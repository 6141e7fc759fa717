"""Generated loop programs: every compiled backend against the interpreter, and gradients
against central finite differences. CI runs 60 (twelve shards of 5, each of a fixed seed), the
same ones every run, each on every compiled backend; set DLOOP_RANDOM_EXAMPLES to run more by
hand (e.g. 10000), and DLOOP_RANDOM_SEED to draw a different set."""

import os

import array_api_compat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import dloop as dl
from helpers import compiled_backends
from dloop.backends.base import available

EXAMPLES = int(os.environ.get("DLOOP_RANDOM_EXAMPLES", "60"))
SEED = os.environ.get("DLOOP_RANDOM_SEED")
COMPILED = [b for b in compiled_backends() if available(b)[0]]

UNARY = ["sin", "cos", "tanh", "softsq"]
BINARY = ["add", "sub", "mul"]


def expressions(depth):
    leaf = st.one_of(st.sampled_from(["v", "x", "i", "s", "t"]),
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


def step(tree, v, x, i, s, table):
    """A contraction, so long loops stay bounded: v <- 0.8 v + 0.2 tanh(expr). The leaf 't'
    gathers from a differentiated table at the loop index."""
    gathered = array_api_compat.array_namespace(i).asarray(table)[i % 4]
    env = {"v": v, "x": x, "i": i * 0.01, "s": s, "t": gathered}
    return 0.8 * v + 0.2 * np.tanh(evaluate(tree, env))


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
        # Offset from exact zeros: x = 0 can sit on an unstable fixed point of the body,
        # where no finite difference resolves the (vanishing) derivative.
        "x": 0.0137 + np.array(draw(st.lists(st.floats(-1.5, 1.5, allow_nan=False),
                                             min_size=size, max_size=size))),
        "n": draw(trip_counts(size)),
        "m": draw(trip_counts(size)),
        "uniform": draw(st.integers(0, 12)),
        "threshold": draw(st.floats(0.3, 3.0)),
    }


def build(p):
    n, m, kind = p["n"], p["m"], p["kind"]

    def run(x, s, t):
        body = lambda i, v: step(p["body"], v, x, i, s, t)  # noqa: E731
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
            inner = lambda k, w: step(p["inner"], w, x, k, s, t)  # noqa: E731
            return dl.fori_loop(0, n, lambda i, v: body(i, dl.fori_loop(0, i, inner, v)), x)
        if kind == "nested_array":
            inner = lambda k, w: step(p["inner"], w, x, k, s, t)  # noqa: E731
            return dl.fori_loop(0, n, lambda i, v: body(i, dl.fori_loop(0, m, inner, v)), x)
        def outer(i, v):      # while_in_fori
            w, _ = dl.while_loop(lambda c: c[1] < m, lambda c: (step(p["inner"], c[0], x, c[1],
                                                                     s, t), c[1] + 1),
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


# The examples run in SHARDS tests of their own seeds, so that pytest-xdist spreads them over
# the cores instead of leaving one long test for one core at the end (four shards of 15 left
# one of 50-170 s on a 2-core machine).
SHARDS = 12


def _shard(k):
    @pytest.mark.skipif(not COMPILED, reason="no compiled backend available")
    @seed((int(SEED) if SEED is not None else 0) * SHARDS + k)
    @settings(max_examples=-(-EXAMPLES // SHARDS), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs())
    def test(p):
        check_program(p)
    test.__name__ = f"test_random_programs_{k}"
    return test


for _k in range(SHARDS):
    globals()[f"test_random_programs_{_k}"] = _shard(_k)


def check_program(p):
    run = build(p)
    x, s, t = p["x"], np.array(0.7), np.array([0.3, -0.5, 0.9, 0.1])
    loss = lambda x, s, t: (run(x, s, t) * np.cos(x)).sum()  # noqa: E731
    grad = dl.grad(loss, argnums=(0, 1, 2))
    ref_out = _with_backend("interpret", lambda: dl.jit(run)(x, s, t))
    ref = _with_backend("interpret", lambda: grad(x, s, t))
    for backend in COMPILED:
        out = _with_backend(backend, lambda: dl.jit(run)(x, s, t))
        got = _with_backend(backend, lambda: grad(x, s, t))
        np.testing.assert_allclose(out, ref_out, rtol=1e-10, atol=1e-12)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-8, atol=1e-10)
    # Central differences on the compiled forward, one input entry at a time, at two step
    # sizes combined by Richardson extrapolation: a body that amplifies perturbations (a
    # derivative of 1.2 ** 45 through 45 steps) leaves plain central differences too far from
    # the truth to check against. What still separates the estimate from the finer plain
    # difference bounds the estimate's own error and is allowed for.
    # Derivatives beyond 1e100 (a body amplifying 1.2 times per step over 65 x 65 nested
    # steps overflows to inf) are checked between backends above, not here: no finite
    # difference resolves them. Elements of x are independent, so three of them suffice.
    forward = dl.jit(loss)
    eps = 1e-5
    stable = _trip_counts_stable(p, x, s, t, eps)
    checkable = [np.abs(np.asarray(r)) < 1e100 for r in ref]
    for k, base in enumerate((x, s, t)):
        if k > 0 and not stable.all():
            continue                  # s and t reach every element, unstable ones included
        keep = (stable & checkable[0]) if k == 0 else checkable[k]
        if k == 0:
            keep = keep & (np.cumsum(keep) <= 3)
        estimate, error = _richardson(forward, [x, s, t], k, base, eps, np.abs(ref[k]), keep)
        # Where the two step sizes disagree by more than 1%, finite differences have not
        # converged (the function is far from linear at any step): they decide nothing.
        keep = keep & (error <= 1e-2 * np.abs(estimate) + 1e-6)
        got, want = np.asarray(ref[k])[keep], estimate[keep]
        assert np.all(np.abs(got - want) <= 1e-5 * np.abs(want) + 1e-6 + error[keep]), \
            (k, got, want, error[keep])


def _richardson(forward, args, k, base, eps, scale, which):
    """d forward / d args[k] at the entries `which` selects: (extrapolated estimate, its error
    bound). Where the derivative is large (scale: its expected size), the step shrinks so that
    the output moves by about 1e-3: a perturbation amplified 1e11 times would leave the linear
    regime."""
    base = np.asarray(base, dtype=np.float64)
    scale = np.broadcast_to(scale, base.shape)
    estimate, error = np.zeros(base.shape), np.zeros(base.shape)
    which = np.broadcast_to(which, base.shape)
    for j in np.ndindex(base.shape):
        if not which[j]:
            continue
        step = min(eps, 1e-3 / max(float(scale[j]), 1e-300))

        def central(h):
            e = np.zeros(base.shape)
            e[j] = h
            up, down = list(args), list(args)
            up[k], down[k] = base + e, base - e
            return (forward(*up) - forward(*down)) / (2 * h)
        coarse, fine = central(step), central(step / 2)
        estimate[j] = (4 * fine - coarse) / 3
        error[j] = abs(estimate[j] - fine)
    return estimate, error


@pytest.mark.skipif(not COMPILED, reason="no compiled backend available")
def test_derivative_amplified_through_many_steps():
    """Found by the generator: v <- 0.8 v + 0.2 tanh(2 v) from 0 has derivative 1.2 per step,
    so d v_45 / d x = 1.2 ** 45 exactly."""
    x = np.zeros(2)
    n = np.array([0, 45])
    g = dl.grad(lambda x: dl.fori_loop(0, n, lambda i, v: 0.8 * v + 0.2 * np.tanh(v + v),
                                       x).sum())(x)
    np.testing.assert_allclose(g, [1.0, 1.2 ** 45], rtol=1e-12)


def _trip_counts_stable(p, x, s, t, eps):
    """Elements whose while-loop exit does not move under any perturbation (finite
    differences across a jump in the trip count say nothing about the derivative)."""
    if p["kind"] != "while":
        return np.ones(x.shape, bool)

    def trips(x, s, t):
        cond = lambda c: (c[1] < p["m"]) & (np.abs(c[0]) < p["threshold"])  # noqa: E731
        body = lambda c: (step(p["body"], c[0], x, c[1], s, t), c[1] + 1)  # noqa: E731
        return dl.while_loop(cond, body, (x, np.zeros(x.shape, np.int64)))[1]

    base = trips(x, s, t)
    stable = np.ones(x.shape, bool)
    for dx, ds, dt in ((eps, 0, 0), (0, eps, 0), (0, 0, eps)):
        for sign in (1, -1):
            stable &= trips(x + sign * dx, s + sign * ds, t + sign * dt) == base
    return stable
